# unequal-nodes, local rank 0. By hand: no route table, only compute NICs: no front end (warning); HCAs in bus order (1e,3e,9d); GPU 0 with mlx5_0 on its switch; node 0 = 0-31 + siblings 64-95.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-31,64-95'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
