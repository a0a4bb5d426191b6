# grace-hopper (one GH200: rank 0 is also the last rank). By hand from the spec: no default_route and no NIC besides the compute HCA mlx5_0 (ibp1s0) -> NCCL_SOCKET_IFNAME omitted (with a warning); GPU 0009:01:00.0 on numa 0, the only node with CPUs (0-71, 72 Neoverse V2 cores, Grace tuning guide); node 1 is the GPU's HBM, not the binding target.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_HCA='=mlx5_0:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-71'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
