# dgx-h100-ib-storage, local rank 0. By hand: the user guide's 8 compute HCAs (buses 18,40,4f,5e,9a,c0,ce,dc = mlx5_0,3,4,5,6,9,10,11) and none of the four storage ports, though they are InfiniBand at 400 Gb/s too (spec expect: storage); no RoCE compute NIC, so no NCCL_IB_GID_INDEX; GPU 0 with mlx5_0 (PIX); socket 0 = CPUs 0-55 + siblings 112-167.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp4s0f0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-55,112-167'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
