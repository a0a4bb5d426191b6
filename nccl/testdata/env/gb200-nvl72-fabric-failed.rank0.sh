# gb200-nvl72-fabric-failed, local rank 0. By hand: the PCI, NIC and CPU layout is gb200-nvl72-tray's, so the variables are its rank 0's; the faults (GPU 2's failed fabric registration, no IMEX channel node) set no variable by default (NCCL_MNNVL_ENABLE=0 only on request) and give two warnings: GPU 2 without a cluster UUID, so NCCL turns multi-node NVLink off for communicators with it, and no usable IMEX channel (mknod hint).
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-71'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
