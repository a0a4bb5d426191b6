# dgx-h100-acs, local rank 0. As dgx-h100: the storage layer (NVMe, mounts, nvidia-fs, ACS) changes nothing NCCL is told. Written by hand: front end enp4s0f0 = spec default_route; compute HCAs in bus order 18,40,4f,5e,9a,c0,ce,dc = mlx5_0,3,4,5,6,9,10,11 (DGX H100 user guide port table, research binding-and-fabrics.md 2.5, identical to OCI's H200 list); GPU 0 shares its switch with mlx5_0 (spec expect); CPUs of socket 0 = 0-55 + SMT siblings 112-167 (2x56 cores, siblings N+112).
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp4s0f0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-55,112-167'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
