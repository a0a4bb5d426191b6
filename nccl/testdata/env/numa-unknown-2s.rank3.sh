# numa-unknown-2s, local rank 3. By hand: no NIC at all: no front end (warning), sockets only (NCCL_IB_DISABLE=1, with a warning), empty NIC list; GPU 3 reads numa_node -1 and local_cpulist 0-63 (every CPU): its CPUs are all, and with two NUMA nodes with CPUs its node is unknown (GPUAFFINITY_NUMA left out, with a warning).
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_DISABLE='1'
export GPUAFFINITY_GPU='3'
export GPUAFFINITY_NICS=''
export GPUAFFINITY_CPUS='0-63'
