# aws-p5, local rank 7 (last). By hand: GPU ca:00.0 with rdmap198s0..rdmap201s0 (8_topo, research 2.6); numa1 = 48-95,144-191.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp71s0'
export FI_PROVIDER='efa'
export FI_EFA_USE_DEVICE_RDMA='1'
export GPUAFFINITY_GPU='7'
export GPUAFFINITY_NICS='rdmap198s0,rdmap199s0,rdmap200s0,rdmap201s0'
export GPUAFFINITY_CPUS='48-95,144-191'
export GPUAFFINITY_NUMA='1'
