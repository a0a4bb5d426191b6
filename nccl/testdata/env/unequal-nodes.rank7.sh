# unequal-nodes, local rank 7 (last). By hand: GPU 7 with mlx5_2 on its switch; node 1 = 32-63 + siblings 96-127.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1'
export GPUAFFINITY_GPU='7'
export GPUAFFINITY_NICS='mlx5_2'
export GPUAFFINITY_CPUS='32-63,96-127'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_2:1'
