# smt-off-2s, local rank 3. By hand: no NIC at all: no front end (warning), sockets only (NCCL_IB_DISABLE=1, with a warning), empty NIC list; GPU 3 on node 1 = CPUs 32-63.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_DISABLE='1'
export GPUAFFINITY_GPU='3'
export GPUAFFINITY_NICS=''
export GPUAFFINITY_CPUS='32-63'
export GPUAFFINITY_NUMA='1'
