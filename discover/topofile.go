package discover

import (
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
	"github.com/gpuaffinity/gpuaffinity/ncclxml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// maxTopoFileSize bounds a vendor topology file (Azure's are ~3 KiB).
const maxTopoFileSize = 4 << 20

// applyTopoFile makes a vendor NCCL topology file (Azure's, AWS's p4d
// file; NCCL_TOPO_FILE format) the authority for the PCIe placement of
// the GPUs and NICs it names: each such device, and each switch above it
// in the file, is re-parented as the file says (switches the VM hides,
// such as Azure's ffff:ff:NN.0, become virtual PCI devices), so paths and
// pairs follow the file. data and readErr are what reading it gave, path
// how it is named in messages (its path on the host, without --root). Devices
// the file does not name keep their sysfs placement. It returns a warning
// for every disagreement between file and sysfs and for every device only
// one of them has.
//
// It returns an error naming the file, and leaves n as it was, when the
// file does not fit this node: it cannot be read or parsed, is larger
// than maxTopoFileSize, or names none of the node's GPUs and NICs. found
// is true for a file the platform installed (not one the user named):
// such a file also does not fit when it lists a GPU or NIC the node does
// not have, which for a file the user named is only a warning.
func applyTopoFile(n *topology.Node, data []byte, err error, path string, found bool) ([]string, error) {
	// The read was bounded and non-blocking: /dev/zero or a FIFO given
	// as the file is refused, not read for ever (Stat says 0 bytes for a
	// device).
	switch {
	case errors.Is(err, sysattr.ErrTooLarge):
		return nil, fmt.Errorf("topology file %s: more than %d bytes: %w", path, maxTopoFileSize, sysattr.ErrTooLarge)
	case errors.Is(err, sysattr.ErrNotRegular):
		return nil, fmt.Errorf("topology file %s: %w", path, sysattr.ErrNotRegular)
	case err != nil:
		return nil, fmt.Errorf("topology file %s: %w", path, err)
	}
	root, err := ncclxml.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("topology file %s: %w", path, err)
	}
	if root.Name != "system" {
		return nil, fmt.Errorf("topology file %s: root element is <%s>, want <system>", path, root.Name)
	}

	// Our GPU and NIC functions by the bus id NCCL names them with: GPUs
	// by their own, NIC functions by their own or NIC.NCCLBusID.
	byFileBus := map[string][]string{}
	for _, g := range n.GPUs {
		byFileBus[g.BusID] = append(byFileBus[g.BusID], g.BusID)
	}
	for _, nic := range n.NICs {
		for _, b := range []string{nic.BusID, nic.NCCLBusID()} {
			if !slices.Contains(byFileBus[b], nic.BusID) {
				byFileBus[b] = append(byFileBus[b], nic.BusID)
			}
		}
	}
	// The file is applied to a copy of the PCI devices, which replaces
	// n's only once the file is known to fit.
	pci := slices.Clone(n.PCIDevices)
	devs := map[string]*topology.PCIDevice{}
	inSysfs := map[string]bool{}
	for i := range pci {
		devs[pci[i].BusID] = &pci[i]
		inSysfs[pci[i].BusID] = true
	}

	var warnings []string
	var added []*topology.PCIDevice
	var lacking []string // GPUs and NICs the file lists and the node lacks
	covered := map[string]bool{}
	// place puts one function below parent ("" = directly below the cpu)
	// in the file's tree of NUMA node numa.
	place := func(busID, parent, hostBridge string, numa *int) {
		d := devs[busID]
		// A switch the VM hides (not in sysfs) is what the file is for;
		// a different real parent is a disagreement.
		if d.Parent != parent && (parent == "" || inSysfs[parent]) {
			warnings = append(warnings, fmt.Sprintf("topology file %s: %s is below %s; sysfs says below %s", path, busID, orCPU(parent), orCPU(d.Parent)))
		}
		if numa != nil && d.NUMANode != nil && *numa != *d.NUMANode {
			warnings = append(warnings, fmt.Sprintf("topology file %s: %s on NUMA node %d; sysfs says %d (keeping sysfs's)", path, busID, *numa, *d.NUMANode))
		}
		d.Parent, d.HostBridge = parent, hostBridge
	}
	var walk func(e *ncclxml.Element, parent, hostBridge string, numa *int) error
	walk = func(e *ncclxml.Element, parent, hostBridge string, numa *int) error {
		for _, c := range e.Children {
			if c.Name != "pci" {
				continue
			}
			bus := strings.ToLower(attr(c, "busid"))
			if bus == "" {
				return fmt.Errorf("topology file %s: <pci> without busid", path)
			}
			if ours := byFileBus[bus]; len(ours) > 0 {
				for _, b := range ours {
					place(b, parent, hostBridge, numa)
					covered[b] = true
				}
				continue
			}
			if !hasPCIChild(c) {
				if cls := attr(c, "class"); strings.HasPrefix(cls, "0x03") || strings.HasPrefix(cls, "0x02") {
					lacking = append(lacking, fmt.Sprintf("%s (class %s)", bus, cls))
				}
				continue
			}
			// A switch: a real one is re-parented, a hidden one is added.
			if d, ok := devs[bus]; ok {
				place(bus, parent, hostBridge, numa)
				d.Kind = topology.KindSwitchUpstream
			} else {
				nd := &topology.PCIDevice{
					BusID: bus, Parent: parent, HostBridge: hostBridge, Kind: topology.KindSwitchUpstream,
					Class: orDefault(attr(c, "class"), "0x060400"), Vendor: attr(c, "vendor"), Device: attr(c, "device"),
					SubsystemVendor: attr(c, "subsystem_vendor"), SubsystemDevice: attr(c, "subsystem_device"),
					NUMANode: numa, Link: topology.PCILink{Speed: attr(c, "link_speed"), Width: atoi(attr(c, "link_width")),
						MaxSpeed: attr(c, "link_speed"), MaxWidth: atoi(attr(c, "link_width"))},
				}
				added = append(added, nd)
				devs[bus] = nd
			}
			if err := walk(c, bus, hostBridge, numa); err != nil {
				return err
			}
		}
		return nil
	}
	for _, cpu := range root.Children {
		if cpu.Name != "cpu" {
			continue
		}
		id, err := strconv.Atoi(attr(cpu, "numaid"))
		if err != nil {
			return nil, fmt.Errorf("topology file %s: <cpu numaid=%q>: %w", path, attr(cpu, "numaid"), err)
		}
		var numa *int
		if id >= 0 {
			numa = &id
		}
		if err := walk(cpu, "", "topo-file:cpu"+strconv.Itoa(id), numa); err != nil {
			return nil, err
		}
	}

	gpus, nics := 0, 0
	for _, g := range n.GPUs {
		if covered[g.BusID] {
			gpus++
		}
	}
	for _, nic := range n.NICs {
		if covered[nic.BusID] {
			nics++
		}
	}
	named := fmt.Sprintf("%d of %d GPUs, %d of %d NICs", gpus, len(n.GPUs), nics, len(n.NICs))
	if len(covered) == 0 {
		return nil, fmt.Errorf("topology file %s: names none of this node's devices (%s)", path, named)
	}
	if len(lacking) > 0 && found {
		return nil, fmt.Errorf("topology file %s: lists %s, which this node does not have (it names %s)", path, listSome(lacking, 4), named)
	}
	for _, l := range lacking {
		warnings = append(warnings, fmt.Sprintf("topology file %s: lists %s, which this node does not have", path, l))
	}
	for _, g := range n.GPUs {
		if !covered[g.BusID] {
			warnings = append(warnings, fmt.Sprintf("topology file %s does not name GPU %s; placed from sysfs", path, g.BusID))
		}
	}
	for _, nic := range n.NICs {
		if nic.Fabric.RDMA() && !covered[nic.BusID] {
			warnings = append(warnings, fmt.Sprintf("topology file %s does not name NIC %s (%s); placed from sysfs", path, nic.Name, nic.BusID))
		}
	}
	for _, d := range added {
		pci = append(pci, *d)
	}
	sortfn.Sort(pci, func(a, b topology.PCIDevice) int { return strings.Compare(a.BusID, b.BusID) })
	n.PCIDevices = pci
	n.TopoFile = path
	n.TopoFileDevices = nil
	for b := range covered {
		n.TopoFileDevices = append(n.TopoFileDevices, b)
	}
	slices.Sort(n.TopoFileDevices)
	return warnings, nil
}

// listSome joins the first limit items and counts the rest.
func listSome(items []string, limit int) string {
	if len(items) <= limit {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:limit], ", "), len(items)-limit)
}

// azureTopoFiles are where Azure's HPC images install their NCCL
// topology files (azhpc-images components/customizations/nd*.sh), newest
// VM family first.
var azureTopoFiles = []string{
	"/opt/microsoft/ndv5/topo.xml",
	"/opt/microsoft/ndv4/topo.xml",
	"/opt/microsoft/ncv4/topo.xml",
	"/opt/microsoft/ndv2/topo.xml",
}

// installedAzureTopoFile returns the path (as seen on the host) of the
// first Azure topology file installed under root, or "".
func installedAzureTopoFile(root *rootfs.Root) string {
	for _, p := range azureTopoFiles {
		if fi, err := root.Stat(strings.TrimPrefix(p, "/")); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// awsTopoDirs are where aws-ofi-nccl installs its static topology files
// (${pkgdatadir}/xml: the RPM and DEB packages, then NGC containers'
// build), and awsTopoFiles which file the plugin itself gives NCCL for
// which instance type (aws-ofi-nccl src/platform-aws.cpp: only the
// instances whose hypervisor flattens the PCIe switches have one).
var (
	awsTopoDirs = []string{
		"/opt/amazon/ofi-nccl/share/aws-ofi-nccl/xml",
		"/opt/amazon/aws-ofi-nccl/share/aws-ofi-nccl/xml",
	}
	awsTopoFiles = map[string]string{
		"p4d.24xlarge":  "p4d-24xl-topo.xml",
		"p4de.24xlarge": "p4de-24xl-topo.xml",
		"g5.48xlarge":   "g5.48xl-topo.xml",
	}
)

// installedAWSTopoFile returns the path (as seen on the host) of the
// aws-ofi-nccl topology file for the instance type installed under root,
// or "".
func installedAWSTopoFile(root *rootfs.Root, instanceType string) string {
	name := awsTopoFiles[instanceType]
	if name == "" {
		return ""
	}
	for _, d := range awsTopoDirs {
		p := d + "/" + name
		if fi, err := root.Stat(strings.TrimPrefix(p, "/")); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

func attr(e *ncclxml.Element, name string) string {
	for _, a := range e.Attrs {
		if a.Name == name {
			return a.Value
		}
	}
	return ""
}

func hasPCIChild(e *ncclxml.Element) bool {
	return slices.ContainsFunc(e.Children, func(c *ncclxml.Element) bool { return c.Name == "pci" })
}

func orCPU(parent string) string {
	if parent == "" {
		return "the CPU"
	}
	return parent
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func atoi(s string) int {
	v, _ := strconv.Atoi(strings.TrimSpace(s))
	return v
}
