# dgx-b300, local rank 0. Written by hand: front end enp100s0 = spec default_route (the 10 GbE host port); compute HCAs = the eight ConnectX-8 PFs (InfiniBand, port 1) in bus order 18,40,4f,5e,9a,c0,ce,dc = mlx5_0,3,4,5,6,9,10,11 (the BlueField-3 ports mlx5_1-2 and mlx5_7-8 are storage, never listed); GPU 0 (1b:00.0) sits behind mlx5_0's ConnectX switch (PXB, spec expect); CPUs of socket 0 = 0-63 + SMT siblings 128-191 (2x64 cores, DeepEP#590).
export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp100s0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1'
export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-63,128-191'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
