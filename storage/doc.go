// Package storage reads the storage layer of a node under a root: NVMe
// controllers and their namespaces (sys/class/nvme), the block devices
// below a mount (sys/class/block slaves), the mount table (proc/mounts),
// and what GPUDirect Storage depends on in the kernel: the nvidia-fs
// driver (proc/driver/nvidia-fs), NVMe multipath
// (sys/module/nvme_core/parameters/multipath), the IOMMU
// (sys/class/iommu, sys/kernel/iommu_groups) and the kernel command line
// (proc/cmdline).
//
// It is a source: it hands plain data up and never imports the model;
// deciding what the data means (which mounts GDS serves, which GPU a
// drive is nearest) is the model's job (package topology).
package storage
