# gb300-nvl72-tray, local rank 3. By hand from the spec: GPU 3 (0019:06:00.0, Grace 1) sits behind ConnectX-8 #2's switch beside Data Direct function 0019:03:00.0, whose VPD V3 is PF 0010:03:00.0's: ibP16p3s0 (Grace 1 mirrors the guide's Grace 0 crossing); node 1 = CPUs 72-143; HCAs and front end as rank 0.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'
export NCCL_IB_HCA='=ibp3s0:1,ibP2p3s0:1,ibP16p3s0:1,ibP18p3s0:1'
export GPUAFFINITY_GPU='3'
export GPUAFFINITY_NICS='ibP16p3s0'
export GPUAFFINITY_CPUS='72-143'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='ibP16p3s0:1'
