# dgx-h100-numa-disagree, local rank 0. Written by hand: as dgx-h100 rank 0 (same NICs and HCA order); GPU 0 reads numa_node -1 and local_cpulist 0-223, and NVML affinity 0-55,112-167 decides: node 0 CPUs 0-55 + siblings 112-167, NUMA 0.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp4s0f0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-55,112-167'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
