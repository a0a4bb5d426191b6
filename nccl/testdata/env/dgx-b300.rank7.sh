# dgx-b300, local rank 7 (last). By hand: GPU 7 (df:00.0) sits behind the ConnectX switch of mlx5_11 (dc:00.0, ibp220s0; spec); NUMA 1 = socket 1 = CPUs 64-127 + siblings 192-255.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp100s0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1'
export GPUAFFINITY_GPU='7'
export GPUAFFINITY_NICS='mlx5_11'
export GPUAFFINITY_CPUS='64-127,192-255'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_11:1'
