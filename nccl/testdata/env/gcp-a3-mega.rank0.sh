# gcp-a3-mega, local rank 0. By hand: host gVNIC enp0s12 (00:0c.0) is the front end and TCPXO control device (gke gpudirect-tcpxo README: NCCL_SOCKET_IFNAME=eth0, NCCL_FASTRAK_CTRL_DEV=eth0); NCCL_FASTRAK_IFNAME = the 8 GPU NICs in GPU order, Debian names enp6s0..enp142s0 (Cluster Toolkit a3-megagpu-8g examples); tuning left to Google's nccl-env-profile.sh; GPU 0 <-> enp6s0 (spec expect); numa0 CPUs 0-51,104-155 (tcpgpudmarxd a3vm, research 2.6).
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp0s12'
export NCCL_FASTRAK_CTRL_DEV='enp0s12'
export NCCL_FASTRAK_IFNAME='enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='enp6s0'
export GPUAFFINITY_CPUS='0-51,104-155'
export GPUAFFINITY_NUMA='0'
