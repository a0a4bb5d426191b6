# cgroup-half, local rank 7 (last). By hand: GPU 7 (node 1, CPUs 56-111,168-223) has no allowed CPU and NVML's affinity is the same set, so every allowed CPU (0-55, with a warning); its NUMA node stays 1; mlx5_3 shares its switch.
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1'
export GPUAFFINITY_GPU='7'
export GPUAFFINITY_NICS='mlx5_3'
export GPUAFFINITY_CPUS='0-55'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_3:1'
