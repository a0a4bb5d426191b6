# dgx-b200, local rank 7 (last). By hand: GPU 7 (df:00.0) shares its switch with mlx5_15 (dc:00.0, ibp220s0; spec); NUMA 1 = socket 1 = CPUs 56-111 + siblings 168-223.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp4s0'
export NCCL_IB_HCA='=mlx5_4:1,mlx5_7:1,mlx5_8:1,mlx5_9:1,mlx5_10:1,mlx5_13:1,mlx5_14:1,mlx5_15:1'
export GPUAFFINITY_GPU='7'
export GPUAFFINITY_NICS='mlx5_15'
export GPUAFFINITY_CPUS='56-111,168-223'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_15:1'
