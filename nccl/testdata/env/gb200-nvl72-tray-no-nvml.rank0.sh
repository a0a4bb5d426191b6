# gb200-nvl72-tray-no-nvml, local rank 0. By hand: the gb200-nvl72-tray answer, none of which comes from NVML: front end = default_route enP6p3s0f0np0; compute HCAs = the four ConnectX-7 InfiniBand in bus order (mlx5_0,1,4,5, from sysfs); without NVML the GPUs are numbered in bus order, which is NVML's order on this tray, so GPU 0 is 0008:01:00.0 on Grace 0, paired with mlx5_0 (NODE, bus order); node 0 = CPUs 0-71 from the PCI numa_node; its HBM node 2 (now from the driver's numa_status) is no binding target. No MNNVL warning: without NVML no GPU reports a cluster UUID, so the node is not multi-node NVLink to env.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-71'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
