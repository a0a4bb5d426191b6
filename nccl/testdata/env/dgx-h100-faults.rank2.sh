# dgx-h100-faults, local rank 2: GPU 2's own NIC mlx5_4 is down; by hand it takes the healthy compute NIC nearest to it: none under its switch, mlx5_0/3/5 on its NUMA node (NODE, distance 10), each serving one GPU, so mlx5_0 by bus order (spec expect); its CPUs are still node 0's.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp4s0f0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_3:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1'
export GPUAFFINITY_GPU='2'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-55,112-167'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
