package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// The kernel's files GPUDirect Storage depends on.
const (
	// ProcNvidiaFS is the nvidia-fs driver's procfs directory
	// (NVIDIA/gds-nvidia-fs nvfs-core.c): present while the module is
	// loaded.
	ProcNvidiaFS = "proc/driver/nvidia-fs"
	// NVMeMultipath is nvme_core's multipath parameter: Y where native
	// NVMe multipath is on (the kernel's default with
	// CONFIG_NVME_MULTIPATH), which GDS's P2PDMA mode does not support.
	NVMeMultipath = "sys/module/nvme_core/parameters/multipath"
	// ProcCmdline is the kernel command line (iommu=, intel_iommu=, ...).
	ProcCmdline = "proc/cmdline"
	// ClassIOMMU lists the IOMMU units the kernel drives (dmar0,
	// ivhd0, smmu3.0x...); empty or absent when the IOMMU is off.
	ClassIOMMU = "sys/class/iommu"
)

// Kernel is what the kernel says about GPUDirect Storage's prerequisites.
type Kernel struct {
	// NvidiaFS is set where proc/driver/nvidia-fs exists.
	NvidiaFS bool
	// NvidiaFSVersion is the driver's version from
	// proc/driver/nvidia-fs/version ("version: 2.17" -> "2.17"; the file
	// carries major.minor, nvfs-proc.c); "" where unreadable.
	NvidiaFSVersion string
	// Multipath is nvme_core's multipath parameter; nil where the
	// parameter file is absent (nvme_core not loaded, or built without
	// multipath).
	Multipath *bool
	// Cmdline is proc/cmdline; "" where unreadable.
	Cmdline string
	// IOMMUUnits are the entries of sys/class/iommu, sorted.
	IOMMUUnits []string
}

// ReadKernel reads Kernel. A missing file is an answer (not loaded, not
// set); any other failure is an error naming the file.
func ReadKernel(root *rootfs.Root) (Kernel, []error) {
	var (
		k    Kernel
		errs []error
	)
	note := func(rel string, err error) bool {
		if err == nil {
			return true
		}
		if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("read %s: %w", root.Path(rel), err))
		}
		return false
	}
	if fi, err := root.Stat(ProcNvidiaFS); note(ProcNvidiaFS, err) {
		k.NvidiaFS = fi.IsDir()
		if k.NvidiaFS {
			rel := path.Join(ProcNvidiaFS, "version")
			if s, err := root.String(rel); note(rel, err) {
				line, _, _ := strings.Cut(s, "\n")
				k.NvidiaFSVersion = strings.TrimSpace(strings.TrimPrefix(line, "version:"))
			}
		}
	}
	if s, err := root.String(NVMeMultipath); note(NVMeMultipath, err) {
		switch s {
		case "Y", "y", "1":
			on := true
			k.Multipath = &on
		case "N", "n", "0":
			off := false
			k.Multipath = &off
		default:
			errs = append(errs, fmt.Errorf("%s: %q is not Y or N", root.Path(NVMeMultipath), s))
		}
	}
	if b, err := root.ReadFile(ProcCmdline, 64<<10); note(ProcCmdline, err) {
		k.Cmdline = strings.TrimSpace(string(b))
	}
	if es, err := root.ReadDir(ClassIOMMU); note(ClassIOMMU, err) {
		for _, e := range es {
			k.IOMMUUnits = append(k.IOMMUUnits, e.Name())
		}
	}
	return k, errs
}

// IOMMUGroupType is the type of the IOMMU group of the PCI function at
// sysPath (its iommu_group link): "identity" (passthrough), "DMA" or
// "DMA-FQ" (translated), "blocked"; "" with no error where the function
// has no group (the IOMMU is off).
func IOMMUGroupType(root *rootfs.Root, sysPath string) (string, error) {
	link := path.Join(sysPath, "iommu_group")
	target, err := root.Readlink(link)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", root.Path(link), err)
	}
	rel := path.Join(path.Dir(link), target, "type")
	s, err := root.String(rel)
	if errors.Is(err, fs.ErrNotExist) {
		// Kernels before 5.11 have no type file: the group exists, its
		// type is not told.
		return "unknown", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", root.Path(rel), err)
	}
	return s, nil
}
