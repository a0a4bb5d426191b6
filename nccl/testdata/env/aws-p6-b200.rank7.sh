# aws-p6-b200, local rank 7. By hand from aws-ofi-nccl's p6-b200 hwloc fixture: front end = the primary ENA enp71s0 (spec default_route); EFA compute: FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1 (p6*); no NCCL_IB_HCA or UCX_NET_DEVICES, and never the ConnectX-7 ibp115s0f0/ibp116s0f0; GPU 7 with rdmap133s0, the EFA its switch gives it (2 GPUs, 2 EFA per switch, spread in bus order); NUMA 1 = CPUs 48-95,144-191.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp71s0'
export FI_PROVIDER='efa'
export FI_EFA_USE_DEVICE_RDMA='1'
export GPUAFFINITY_GPU='7'
export GPUAFFINITY_NICS='rdmap133s0'
export GPUAFFINITY_CPUS='48-95,144-191'
export GPUAFFINITY_NUMA='1'
