# dgx-b200, local rank 0. Written by hand: front end enp4s0 = spec default_route (the 10 GbE port); compute HCAs in bus order 18,40,4f,5e,9a,c0,ce,dc = mlx5_4,7,8,9,10,13,14,15 (spec: DGX H100 bus order behind the four NVSwitch management functions mlx5_0-3, which never appear); GPU 0 shares its two-level switch with mlx5_4 (PXB, spec expect); CPUs of socket 0 = 0-55 + SMT siblings 112-167 (2x56 cores, siblings N+112).
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp4s0'
export NCCL_IB_HCA='=mlx5_4:1,mlx5_7:1,mlx5_8:1,mlx5_9:1,mlx5_10:1,mlx5_13:1,mlx5_14:1,mlx5_15:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_4'
export GPUAFFINITY_CPUS='0-55,112-167'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_4:1'
