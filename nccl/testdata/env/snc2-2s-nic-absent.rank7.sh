# snc2-2s-nic-absent, local rank 7. By hand: no route table and no NIC but the compute NICs, so no front end (NCCL_SOCKET_IFNAME left out, with a warning); HCAs in bus order; GPU 7 with mlx5_3 (PIX); SNC node 3 = 72-95,168-191.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_2:1,mlx5_3:1'
export GPUAFFINITY_GPU='7'
export GPUAFFINITY_NICS='mlx5_3'
export GPUAFFINITY_CPUS='72-95,168-191'
export GPUAFFINITY_NUMA='3'
export UCX_NET_DEVICES='mlx5_3:1'
