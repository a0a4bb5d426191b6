# h200-vm (real capture, one GPU: rank 0 is also the last rank). By hand from shared/fixtures/h200-vm/host-report.txt: no proc/net/route captured, the only NIC is virtio eth0 (up, no RDMA) -> front end eth0 and socket transport (NCCL_IB_DISABLE=1); GPU 0000:00:06.0 numa_node -1 with one NUMA node (node0 CPUs 0-15) -> NUMA 0; Cpus_allowed_list 0-15; no compute NIC -> empty NIC list.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=eth0'
export NCCL_IB_DISABLE='1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS=''
export GPUAFFINITY_CPUS='0-15'
export GPUAFFINITY_NUMA='0'
