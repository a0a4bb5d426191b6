# aws-p4d, local rank 0. By hand: front end ens32 = primary ENI (spec default_route); EFA RDMA on p4d: FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1 (aws-ofi-nccl doc/efa-env-var.md, research 2.1); no NCCL_IB_HCA/NCCL_TOPO_FILE on EFA; GPUs 0,1 + rdmap16s27 in one group (aws-ofi-nccl p4d-24xl-topo.xml); numa0 CPUs 0-23,48-71 (same file).
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=ens32'
export FI_PROVIDER='efa'
export FI_EFA_USE_DEVICE_RDMA='1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='rdmap16s27'
export GPUAFFINITY_CPUS='0-23,48-71'
export GPUAFFINITY_NUMA='0'
