package discover

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// kernelRelease is the running kernel's release ("5.15.0-1042-nvidia").
const kernelRelease = "proc/sys/kernel/osrelease"

// KernelModules are the kernel modules discovery reports as loaded
// (topology.KernelInfo.Modules) when <root>/sys/module/<name> is a
// directory: the ones health checks and outputs care about. nvidia_peermem
// (GPUDirect RDMA, topo.gdr), nvidia_fs (GPUDirect Storage) and nvidia_uvm
// beside the nvidia driver; the RDMA core (ib_core, ib_uverbs) and the
// mlx5 and EFA RDMA drivers; amdgpu for AMD accelerators. Sorted.
var KernelModules = []string{
	"amdgpu",
	"efa",
	"ib_core",
	"ib_uverbs",
	"mlx5_ib",
	"nvidia",
	"nvidia_fs",
	"nvidia_peermem",
	"nvidia_uvm",
}

// kernelInfo reads the kernel release and which of KernelModules are
// loaded. A missing file or directory is an answer (no release, not
// loaded); any other read error is a warning naming the file.
func kernelInfo(root *rootfs.Root, warn func(...error)) topology.KernelInfo {
	var k topology.KernelInfo
	if s, err := root.String(kernelRelease); err == nil {
		k.Release = s
	} else if !errors.Is(err, fs.ErrNotExist) {
		warn(fmt.Errorf("read /%s: %w", kernelRelease, err))
	}
	for _, m := range KernelModules {
		rel := "sys/module/" + m
		fi, err := root.Stat(rel)
		switch {
		case err == nil && fi.IsDir():
			k.Modules = append(k.Modules, m)
		case err == nil:
			warn(fmt.Errorf("/%s is not a directory; module %s taken as not loaded", rel, m))
		case !errors.Is(err, fs.ErrNotExist):
			warn(fmt.Errorf("stat /%s: %w", rel, err))
		}
	}
	return k
}
