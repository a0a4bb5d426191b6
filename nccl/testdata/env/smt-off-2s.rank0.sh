# smt-off-2s, local rank 0. By hand: no NIC at all: no front end (warning), sockets only (NCCL_IB_DISABLE=1, with a warning), empty NIC list; SMT off: GPU 0 on node 0 = CPUs 0-31.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_DISABLE='1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS=''
export GPUAFFINITY_CPUS='0-31'
export GPUAFFINITY_NUMA='0'
