# gb200-nvl72-fabric-failed, local rank 3 (last). By hand: as gb200-nvl72-tray rank 3 (GPU 3 -> mlx5_5, node 1 = CPUs 72-143).
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1'
export GPUAFFINITY_GPU='3'
export GPUAFFINITY_NICS='mlx5_5'
export GPUAFFINITY_CPUS='72-143'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_5:1'
