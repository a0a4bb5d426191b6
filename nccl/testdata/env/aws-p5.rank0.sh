# aws-p5, local rank 0. By hand: front end enp71s0 = primary ENA (spec default_route); p5 has EFA RDMA (research 2.1); GPU 53:00.0 shares its switch with rdmap79s0..rdmap82s0 (libfabric 8_topo on p5, research 2.6); 2x48 cores SMT, siblings N+96: numa0 = 0-47,96-143.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp71s0'
export FI_PROVIDER='efa'
export FI_EFA_USE_DEVICE_RDMA='1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='rdmap79s0,rdmap80s0,rdmap81s0,rdmap82s0'
export GPUAFFINITY_CPUS='0-47,96-143'
export GPUAFFINITY_NUMA='0'
