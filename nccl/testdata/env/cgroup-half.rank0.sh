# cgroup-half, local rank 0. By hand: no route table, only compute NICs: no front end (warning); 4 HCAs in bus order (1d,3d,9d,bd); GPU 0 shares its switch with mlx5_0; its CPUs are node 0 (0-55,112-167) within the cgroup's 0-55.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-55'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
