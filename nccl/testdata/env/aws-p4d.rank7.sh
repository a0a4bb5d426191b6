# aws-p4d, local rank 7 (last). By hand: GPUs 6,7 (a0:1c,1d) + rdmap160s27 (a0:1b) in group 3 of p4d-24xl-topo.xml; numa1 CPUs 24-47,72-95.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=ens32'
export FI_PROVIDER='efa'
export FI_EFA_USE_DEVICE_RDMA='1'
export GPUAFFINITY_GPU='7'
export GPUAFFINITY_NICS='rdmap160s27'
export GPUAFFINITY_CPUS='24-47,72-95'
export GPUAFFINITY_NUMA='1'
