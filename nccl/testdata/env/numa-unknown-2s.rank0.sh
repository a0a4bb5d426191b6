# numa-unknown-2s, local rank 0. By hand: no NIC at all: no front end (warning), sockets only (NCCL_IB_DISABLE=1, with a warning), empty NIC list; GPU 0 on node 0 = 0-15 + siblings 32-47.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_DISABLE='1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS=''
export GPUAFFINITY_CPUS='0-15,32-47'
export GPUAFFINITY_NUMA='0'
