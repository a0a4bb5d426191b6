# gb200-nvl72-tray, local rank 0. By hand from the spec: front end enP6p3s0f0np0 = default_route (left BF-3, external-net); compute HCAs = the four ConnectX-7 InfiniBand in bus order 0000:03, 0002:03, 0010:03, 0012:03 = mlx5_0,1,4,5 (Mission Control GB200 port table; public GB200 scripts pass the same NCCL_IB_HCA), never the BF-3 Ethernet ports; GPU 0 (0008:01:00.0, Grace 0) pairs with mlx5_0, the first of its Grace's two NODE NICs; node 0 = CPUs 0-71 (72 Neoverse V2 cores, no SMT; srt-slurm#164); the GPU's HBM node 2 is no binding target. MNNVL: fabric ready on every GPU and IMEX channel0 present, so nothing is set (NCCL decides itself) and nothing is warned.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-71'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
