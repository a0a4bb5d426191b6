package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/pci"
	"github.com/gpuaffinity/gpuaffinity/rdma"
	"github.com/gpuaffinity/gpuaffinity/storage"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// storageSource is what discovery reads of the storage layer, on its own
// goroutine beside the PCI bus.
type storageSource struct {
	ctrls  []storage.Controller
	mounts []storage.Mount
	kernel storage.Kernel
	// disks maps each mount's source to the whole disks below it.
	disks map[string][]string
	errs  []error
}

func readStorage(root *rootfs.Root) storageSource {
	var s storageSource
	var errs []error
	s.ctrls, errs = storage.Controllers(root)
	s.errs = append(s.errs, errs...)
	s.mounts, errs = storage.Mounts(root)
	s.errs = append(s.errs, errs...)
	s.kernel, errs = storage.ReadKernel(root)
	s.errs = append(s.errs, errs...)
	s.disks = map[string][]string{}
	for _, m := range s.mounts {
		if s.disks[m.Source] != nil {
			continue
		}
		dev, ok, err := storage.BlockName(root, m.Source)
		if err != nil {
			// A /dev/disk/by-* or /dev/md/NAME source, or a mapper
			// name no dm-N carries: what is below it stays unknown.
			s.errs = append(s.errs, fmt.Errorf("mount %s: drives below it not known: %w", m.Target, err))
			continue
		}
		if !ok {
			continue // not a block device node (NFS, Lustre, tmpfs)
		}
		ds, err := storage.Disks(root, dev)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				s.errs = append(s.errs, fmt.Errorf("mount %s: %w", m.Target, err))
			}
			continue
		}
		s.disks[m.Source] = ds
	}
	return s
}

// systemMounts hold the operating system: a drive under one of them is
// not a checkpoint target.
var systemMounts = []string{"/", "/boot", "/boot/efi", "/usr", "/var"}

// fillStorage builds n.Storage from what was read, gives every bridge its
// ACS state, and reads the IOMMU groups of the GPUs, NVMe and NICs.
func fillStorage(n *topology.Node, root *rootfs.Root, src storageSource, devs []pci.Device, warn func(...error)) {
	warn(src.errs...)
	st := &n.Storage
	st.NVMe, st.Mounts = []topology.NVMe{}, []topology.Mount{}
	byBus := map[string]*topology.PCIDevice{}
	for i := range n.PCIDevices {
		byBus[n.PCIDevices[i].BusID] = &n.PCIDevices[i]
	}
	nsOwner := map[string]string{} // block device -> controller
	for _, c := range src.ctrls {
		d := topology.NVMe{Name: c.Name, Transport: c.Transport, Model: c.Model, Serial: c.Serial,
			Firmware: c.Firmware, State: c.State, NUMANode: c.NUMANode, Use: topology.NVMeUnmounted,
			Namespaces: []topology.NVMeNamespace{}}
		if c.PCI != nil {
			d.BusID = c.PCI.String()
			if pd := byBus[d.BusID]; pd != nil {
				d.Link = pd.Link
				if d.NUMANode == nil {
					d.NUMANode = pd.NUMANode
				}
			}
		}
		for _, ns := range c.Namespaces {
			d.Namespaces = append(d.Namespaces, topology.NVMeNamespace{Block: ns.Block, Path: ns.Path, SizeBytes: ns.SizeBytes})
			nsOwner[ns.Block] = c.Name
		}
		st.NVMe = append(st.NVMe, d)
	}
	use := map[string]topology.NVMeUse{}
	rankUse := map[topology.NVMeUse]int{topology.NVMeUnmounted: 0, topology.NVMeOther: 1, topology.NVMeData: 2, topology.NVMeSystem: 3}
	for _, m := range src.mounts {
		var ctrls []string
		for _, disk := range src.disks[m.Source] {
			if c, ok := nsOwner[disk]; ok && !slices.Contains(ctrls, c) {
				ctrls = append(ctrls, c)
			}
		}
		slices.Sort(ctrls)
		kind, ok := topology.ClassifyMount(m.FSType, m.Options, len(ctrls) > 0)
		u := topology.NVMeOther
		switch {
		case slices.Contains(systemMounts, m.Target):
			u = topology.NVMeSystem
		case ok && kind == topology.MountNVMe:
			u = topology.NVMeData
		}
		for _, c := range ctrls {
			if rankUse[u] > rankUse[use[c]] {
				use[c] = u
			}
		}
		if !ok || u == topology.NVMeSystem {
			// Not a file system GDS serves, or the operating system's
			// own: no checkpoint target.
			continue
		}
		tm := topology.Mount{Source: m.Source, Target: m.Target, FSType: m.FSType, Kind: kind,
			Options: slices.Clone(m.Options), Devices: ctrls, NICs: []string{}}
		if tm.Options == nil {
			tm.Options = []string{}
		}
		tm.Servers = topology.MountServers(kind, m.Source, m.Options)
		st.Mounts = append(st.Mounts, tm)
	}
	for i := range st.NVMe {
		if u, ok := use[st.NVMe[i].Name]; ok {
			st.NVMe[i].Use = u
		}
	}

	k := src.kernel
	st.GDS.NvidiaFS, st.GDS.NvidiaFSVersion = k.NvidiaFS, k.NvidiaFSVersion
	st.GDS.NVMeMultipath = k.Multipath
	st.GDS.IOMMU = topology.IOMMU{Units: k.IOMMUUnits, Cmdline: iommuOptions(k.Cmdline)}
	if st.GDS.IOMMU.Units == nil {
		st.GDS.IOMMU.Units = []string{}
	}
	st.GDS.OpenKernelModule = openKernelModule(root, warn)

	// The IOMMU group of each device GDS moves data between.
	want := map[string]bool{}
	for _, g := range n.GPUs {
		want[g.BusID] = true
	}
	for _, d := range st.NVMe {
		if d.BusID != "" {
			want[d.BusID] = true
		}
	}
	for _, nic := range n.NICs {
		if nic.Fabric.RDMA() {
			want[nic.BusID] = true
		}
	}
	for _, d := range devs {
		bus := d.Address.String()
		if d.IsBridge() {
			byBus[bus].ACS = acs(d.ACS)
		}
		if !want[bus] {
			continue
		}
		t, err := storage.IOMMUGroupType(root, d.SysPath)
		warn(err)
		if t != "" {
			st.GDS.IOMMU.Groups = append(st.GDS.IOMMU.Groups, topology.IOMMUGroup{BusID: bus, Type: t})
		}
	}
}

func acs(a pci.ACS) *topology.ACS {
	t := &topology.ACS{State: string(a.State), Enabled: a.Enabled(), Reason: a.Reason}
	if a.State == pci.ACSOn || a.State == pci.ACSOff {
		t.Control = fmt.Sprintf("0x%04x", a.Control)
	}
	return t
}

// iommuOptions are the command-line options that set the IOMMU, as
// written.
func iommuOptions(cmdline string) []string {
	out := []string{}
	for _, f := range strings.Fields(cmdline) {
		k, _, _ := strings.Cut(f, "=")
		switch k {
		case "iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict", "arm-smmu-v3.disable_bypass":
			out = append(out, f)
		}
	}
	return out
}

// openKernelModule reads whether the NVIDIA driver is the open kernel
// module from the first line of proc/driver/nvidia/version ("NVRM
// version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01 ..."); nil
// where the file is absent.
func openKernelModule(root *rootfs.Root, warn func(...error)) *bool {
	b, err := root.ReadFile(procDriverVersion, maxProcFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		warn(fmt.Errorf("read /%s: %w", procDriverVersion, err))
		return nil
	}
	line, _, _ := strings.Cut(string(b), "\n")
	open := strings.Contains(line, "Open Kernel Module")
	return &open
}

// fillIPv4 gives each NIC interface its IPv4 addresses: netlink's on a
// live root, the recorded addresses.json elsewhere.
func fillIPv4(n *topology.Node, root *rootfs.Root, nl rdma.Netlink, warn func(...error)) {
	var recorded map[string][]string
	if nl == nil {
		var errs []error
		recorded, errs = rdma.ReadAddresses(root)
		warn(errs...)
	}
	fill := func(it *topology.Interface) {
		if nl == nil {
			it.IPv4 = recorded[it.Name]
			return
		}
		a, err := nl.IPv4(it.Name)
		if err != nil {
			warn(fmt.Errorf("netdev %q: netlink addresses: %w", it.Name, err))
			return
		}
		if len(a) > 0 {
			it.IPv4 = a
		}
	}
	for i := range n.NICs {
		for j := range n.NICs[i].Interfaces {
			fill(&n.NICs[i].Interfaces[j])
		}
		if b := n.NICs[i].Bond; b != nil {
			for j := range b.Members {
				fill(&b.Members[j].Interface)
			}
		}
	}
}
