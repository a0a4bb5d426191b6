# gb200-nvl72-tray-no-nvml, local rank 3 (last). By hand: GPU 3 in bus order is 0019:01:00.0 on Grace 1, paired with mlx5_5 (0012:03:00.0; mlx5_4 goes to GPU 2); node 1 = CPUs 72-143.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1'
export GPUAFFINITY_GPU='3'
export GPUAFFINITY_NICS='mlx5_5'
export GPUAFFINITY_CPUS='72-143'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_5:1'
