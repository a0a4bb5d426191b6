# gcp-a3-mega, local rank 7 (last). By hand: GPU 7 <-> eth8 = enp142s0 (8e:00.0); numa1 CPUs 52-103,156-207.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp0s12'
export NCCL_FASTRAK_CTRL_DEV='enp0s12'
export NCCL_FASTRAK_IFNAME='enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0'
export GPUAFFINITY_GPU='7'
export GPUAFFINITY_NICS='enp142s0'
export GPUAFFINITY_CPUS='52-103,156-207'
export GPUAFFINITY_NUMA='1'
