# snc2-2s-nic-absent, local rank 0. By hand: no route table and no NIC but the compute NICs, so no front end (NCCL_SOCKET_IFNAME left out, with a warning); HCAs in bus order; GPU 0 shares its switch with mlx5_0; SNC node 0 = 0-23,96-119.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_2:1,mlx5_3:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-23,96-119'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
