package kfd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuaffinity/gpuaffinity/pci"
)

// DRM is what amdgpu's sysfs says of a GPU node's PCI function, under
// sys/bus/pci/devices/<address>. A file the device does not have (a GPU
// outside an XGMI hive has no xgmi_* files; partition modes exist on
// MI300-class GPUs only) leaves its field unset, without an error.
type DRM struct {
	// XGMIDeviceID is xgmi_device_id: the GPU's node id in its hive
	// (amdgpu_xgmi.c, "%llu"); 0 where absent.
	XGMIDeviceID uint64
	// XGMIPhysicalID is xgmi_physical_id: the GPU's socket number in the
	// hive (0..7 on an 8-GPU board); nil where absent (older kernels).
	XGMIPhysicalID *uint32
	// XGMIHiveID is xgmi_hive_info/xgmi_hive_id. xgmi_hive_info is a
	// directory under the first GPU of the hive and a link to it from
	// the others (amdgpu_xgmi_sysfs_add_dev_info). 0 where absent. It
	// equals the KFD hive_id unless amdgpu.use_xgmi_p2p=0, where KFD
	// writes 0 (kfd_device.c kgd2kfd_device_init).
	XGMIHiveID uint64
	// RenderMinor is N of the drm/renderDN directory: the render node of
	// the GPU's first partition. 0 where there is none, and for a node of
	// a later partition, whose render node belongs to an amdgpu_xcp
	// platform device (amdgpu_xcp.c amdgpu_xcp_dev_alloc).
	RenderMinor uint32
	// ComputePartition is current_compute_partition: "SPX", "DPX",
	// "TPX", "QPX", "CPX" or "UNKNOWN" (amdgpu_gfx.h
	// amdgpu_gfx_compute_mode_desc); "" where absent.
	ComputePartition string
	// MemoryPartition is current_memory_partition: "NPS1", "NPS2",
	// "NPS4", "NPS8"... or "UNKNOWN" (amdgpu_gmc.c nps_desc); "" where
	// absent.
	MemoryPartition string
	// Health is the function's RAS error counts, PCIe replay count and
	// XGMI link counts (see Health); nil where it has none of those
	// files, and on the nodes of a partitioned GPU's later partitions,
	// whose counters are the function's, read once on partition 0's
	// node (ReadHealth reads them by address).
	Health *Health
}

// ErrMismatch is wrapped when KFD and DRM disagree on a GPU: the two
// files are named and the KFD value is kept.
var ErrMismatch = errors.New("KFD and DRM disagree")

// PCIAddress decodes a GPU node's PCI function from domain and
// location_id. KFD writes location_id = pci_dev_id(pdev), that is
// PCI_DEVID(bus, devfn) = bus<<8 | devfn (include/linux/pci.h), and on
// a GPU split into compute partitions (CPX) ORs in the partition's node
// number: into bits 31:28 in some kernels ("node id =
// location_id[31:28]", the form ROCm/rccl's alt_rsmi.cc decodes), into
// devfn in others (kfd_topology.c kfd_topology_add_device, "location_id
// |= node_id"). partition is bits 31:28; the reader also tells the devfn
// form by which PCI function exists. Bits 27:16 are never set; a value
// with them is an error. It does no I/O.
func (p Properties) PCIAddress() (addr pci.Address, partition int, err error) {
	loc := p.LocationID
	if loc&0x0fff0000 != 0 {
		return pci.Address{}, 0, fmt.Errorf("location_id %#x is not a PCI bus and devfn: %w", loc, errSyntax)
	}
	devfn := uint8(loc)
	return pci.Address{Domain: p.Domain, Bus: uint8(loc >> 8), Device: devfn >> 3, Function: devfn & 7}, int(loc >> 28), nil
}

// resolvePCI finds the PCI function of a GPU node under
// sys/bus/pci/devices: the decoded address, or where that does not
// exist and its function is not 0, function 0 with the function bits as
// the partition (the devfn form of a partitioned GPU).
func resolvePCI(r fsys, addr pci.Address, partition int) (pci.Address, int, error) {
	exists := func(a pci.Address) (bool, error) {
		_, err := r.Stat(path.Join(pci.BusDir, a.String()))
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, fs.ErrNotExist):
			return false, nil
		}
		return false, err
	}
	ok, err := exists(addr)
	if err != nil || ok {
		return addr, partition, err
	}
	if addr.Function != 0 {
		fn0 := addr
		fn0.Function = 0
		if ok, err := exists(fn0); err != nil || ok {
			return fn0, partition | int(addr.Function), err
		}
	}
	return addr, partition, fmt.Errorf("no PCI function %s under %s: %w", addr, r.Path(pci.BusDir), fs.ErrNotExist)
}

// readDRM reads amdgpu's attributes of the PCI function dev (a path
// relative to the root). errs name the file; a missing file is no error.
func readDRM(r fsys, dev string, partition int) (DRM, []error) {
	var (
		d    DRM
		errs []error
	)
	read := func(rel string) (string, bool) {
		b, err := r.ReadFile(path.Join(dev, rel), maxAttr)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", false
		case errors.Is(err, syscall.EPERM) && strings.HasPrefix(rel, "current_"):
			// amdgpu_gfx.c and amdgpu_gmc.c refuse these while the GPU
			// is in reset; not a device cgroup.
			errs = append(errs, fmt.Errorf("%w (amdgpu refuses it while the GPU is in reset)", err))
			return "", false
		case err != nil:
			errs = append(errs, err)
			return "", false
		}
		return strings.TrimSpace(string(b)), true
	}
	number := func(rel string, bits int) (uint64, bool) {
		s, ok := read(rel)
		if !ok {
			return 0, false
		}
		v, err := strconv.ParseUint(s, 10, bits)
		if err != nil || !validNumber([]byte(s)) {
			errs = append(errs, fmt.Errorf("parse %s: %q is not a decimal: %w", r.Path(path.Join(dev, rel)), clip([]byte(s)), errSyntax))
			return 0, false
		}
		return v, true
	}
	mode := func(rel string) string {
		s, ok := read(rel)
		if ok && !validMode(s) {
			errs = append(errs, fmt.Errorf("parse %s: %q is not a partition mode: %w", r.Path(path.Join(dev, rel)), clip([]byte(s)), errSyntax))
			return ""
		}
		return s
	}

	d.XGMIDeviceID, _ = number("xgmi_device_id", 64)
	if v, ok := number("xgmi_physical_id", 32); ok {
		id := uint32(v)
		d.XGMIPhysicalID = &id
	}
	d.XGMIHiveID, _ = number("xgmi_hive_info/xgmi_hive_id", 64)
	d.ComputePartition = mode("current_compute_partition")
	d.MemoryPartition = mode("current_memory_partition")
	if partition == 0 {
		minor, err := renderMinor(r, dev)
		if err != nil {
			errs = append(errs, err)
		}
		d.RenderMinor = minor
		h, herrs := readHealth(r, dev)
		d.Health = h
		errs = append(errs, herrs...)
	}
	return d, errs
}

// maxRenderEntries bounds a PCI function's drm/ directory: a card and
// a render node, a few connectors on a display GPU.
const maxRenderEntries = 64

// renderMinor finds the renderDN entry of dev's drm/ directory (the
// DRM core names render nodes renderD128 and up). A drm/ with two
// render nodes is an error naming both.
func renderMinor(r fsys, dev string) (uint32, error) {
	dir := path.Join(dev, "drm")
	ents, err := r.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(ents) > maxRenderEntries {
		return 0, fmt.Errorf("%s: %d entries, more than %d", r.Path(dir), len(ents), maxRenderEntries)
	}
	var minor uint32
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "renderD")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(n, 10, 20)
		if err != nil || !validNumber([]byte(n)) {
			return minor, fmt.Errorf("%s: %q is not a render node: %w", r.Path(dir), e.Name(), errSyntax)
		}
		if minor != 0 {
			return minor, fmt.Errorf("%s: two render nodes, renderD%d and renderD%d", r.Path(dir), minor, v)
		}
		minor = uint32(v)
	}
	return minor, nil
}

// validMode accepts a partition mode's spelling: upper-case letters and
// digits ("CPX", "NPS4"), as amdgpu writes them.
func validMode(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
