# gb300-nvl72-tray, local rank 0. By hand from the spec: front end enP6p3s0f0np0 = default_route (left BF-3, as on the GB200 tray); compute HCAs = the four ConnectX-8 InfiniBand PFs by their RDMA names in bus order 0000:03, 0002:03, 0010:03, 0012:03 = ibp3s0, ibP2p3s0, ibP16p3s0, ibP18p3s0 (NCCL matches NCCL_IB_HCA against the device name, then exposes <name>_dma), never the BF-3 Ethernet ports; GPU 0 (0008:06:00.0) sits behind ConnectX-8 #1's switch beside its Data Direct function 0008:03:00.0, whose VPD V3 is PF 0002:03:00.0's: ibP2p3s0 (NVIDIA's guide: "RDMA NIC=0002:03:00.0, GPU=0008:06:00.0"), not ibp3s0, which bus order would give; node 0 = CPUs 0-71; the GPU's HBM node 2 is no binding target. MNNVL: fabric ready and IMEX channel0 present: nothing set, nothing warned.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'
export NCCL_IB_HCA='=ibp3s0:1,ibP2p3s0:1,ibP16p3s0:1,ibP18p3s0:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='ibP2p3s0'
export GPUAFFINITY_CPUS='0-71'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='ibP2p3s0:1'
