# snc2-2s-nic-absent, local rank 2. By hand: no route table and no NIC but the compute NICs, so no front end (NCCL_SOCKET_IFNAME left out, with a warning); HCAs in bus order; GPU 2 has no NIC on SNC node 1: mlx5_0 on node 0 is SYS at distance 12 (same socket), mlx5_2/mlx5_3 at 21 (other socket); its CPUs stay node 1 = 24-47,120-143.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_2:1,mlx5_3:1'
export GPUAFFINITY_GPU='2'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='24-47,120-143'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_0:1'
