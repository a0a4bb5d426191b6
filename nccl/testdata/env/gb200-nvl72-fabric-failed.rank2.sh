# gb200-nvl72-fabric-failed, local rank 2: the GPU whose fabric registration failed. By hand: GPU 2 (0018:01:00.0, Grace 1) keeps its PCIe pairing with mlx5_4 (0010:03:00.0) and node 1 = CPUs 72-143; the fabric fault changes no variable, only the warnings.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1'
export GPUAFFINITY_GPU='2'
export GPUAFFINITY_NICS='mlx5_4'
export GPUAFFINITY_CPUS='72-143'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_4:1'
