package nccl

import (
	"cmp"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/ncclxml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// XMLOptions tunes TopologyXML.
type XMLOptions struct {
	// SynthesizeSwitches puts each GPU and its paired NIC(s) under a
	// virtual PCIe switch (busid ffff:ff:NN.0, the form of Azure's
	// topology files) where the pair does not already share a switch
	// (class PHB or NODE): NCCL then sees them as PIX and uses GPUDirect
	// RDMA between them. The grouping is gpuaffinity's pairing, not
	// something the bus showed; a comment above each switch says so.
	SynthesizeSwitches bool
}

// TopologyXML writes the NCCL topology XML of n (for NCCL_TOPO_FILE).
//
// It is the tree NCCL itself builds from sysfs, trimmed to what NCCL
// cannot get wrong: one <cpu> per NUMA node holding a GPU or compute NIC
// and the <pci> path down to each of them, as NCCL's upward walk finds it
// (one pci per PCIe switch, named by its upstream port), with the
// attributes NCCL reads from sysfs. It leaves out <gpu>, <nvlink>, <nic>,
// <net>, host_hash and keep: NCCL fills those itself and would trust a
// wrong value in the file (docs/nccl-topo.md). The tree is checked with
// ncclxml.CheckElementFor before anything is written.
//
// The file is for the library XMLDialect names. On a node whose GPUs
// are all AMD ones it is RCCL's (<system version="2">, RCCL's own sysfs
// rules; RCCL fills <gpu> and <xgmi> from HIP and KFD itself, as NCCL
// does <gpu> and <nvlink>). On a node with NVIDIA and AMD GPUs it is
// NCCL's, with the AMD GPUs left out and a comment that says so: one file
// cannot be read by both.
func TopologyXML(w io.Writer, n topology.Node, opts XMLOptions) error {
	root, err := xmlTree(n, opts)
	if err != nil {
		return err
	}
	if err := ncclxml.CheckElementFor(root, XMLDialect(n)); err != nil {
		return fmt.Errorf("nccl: topology XML of %s: %w", xmlHost(n), err)
	}
	if err := root.Write(w); err != nil {
		return fmt.Errorf("nccl: topology XML of %s: %w", xmlHost(n), err)
	}
	return nil
}

func xmlHost(n topology.Node) string { return cmp.Or(n.Hostname, "node") }

// XMLDialect is the library TopologyXML writes n's file for: RCCL where
// n has GPUs and every one is an AMD GPU, NCCL otherwise (NVIDIA GPUs,
// NVIDIA and AMD GPUs together, or no GPU).
func XMLDialect(n topology.Node) ncclxml.Dialect {
	if len(n.GPUs) > 0 && !slices.ContainsFunc(n.GPUs, func(g topology.GPU) bool { return !g.IsAMD() }) {
		return ncclxml.RCCL
	}
	return ncclxml.NCCL
}

// xmlLeaf is one GPU or NIC the file places.
type xmlLeaf struct {
	busID string // the busid NCCL looks the device up by
	dev   *topology.PCIDevice
	gpu   *topology.GPU // nil for a NIC
	nics  []string      // NIC names merged onto this busid
	numa  int           // numaid of its cpu
	top   string        // busid of the pci right under the cpu
}

type xmlBuilder struct {
	n       *topology.Node
	dialect ncclxml.Dialect
	devs    map[string]*topology.PCIDevice
	pci     map[string]*ncclxml.Element // by busid
	parent  map[string]string           // busid → parent pci busid, "" for a cpu
	numa    map[string]int              // busid of a pci under a cpu → numaid
	cpus    map[int]*ncclxml.Element
	leaves  map[string]*xmlLeaf // by busid
	order   []*xmlLeaf          // GPUs in GPU order, then NICs in NIC order
}

func xmlTree(n topology.Node, opts XMLOptions) (*ncclxml.Element, error) {
	b := &xmlBuilder{
		n:       &n,
		dialect: XMLDialect(n),
		devs:    make(map[string]*topology.PCIDevice, len(n.PCIDevices)),
		pci:     map[string]*ncclxml.Element{},
		parent:  map[string]string{},
		numa:    map[string]int{},
		cpus:    map[int]*ncclxml.Element{},
		leaves:  map[string]*xmlLeaf{},
	}
	for i := range n.PCIDevices {
		b.devs[n.PCIDevices[i].BusID] = &n.PCIDevices[i]
	}
	var leftOut []string // AMD GPUs on a node with NVIDIA GPUs
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if b.dialect == ncclxml.NCCL && g.IsAMD() {
			leftOut = append(leftOut, fmt.Sprintf("%d (%s)", g.Index, g.BusID))
			continue
		}
		d := b.devs[g.BusID]
		if d == nil {
			return nil, fmt.Errorf("nccl: topology XML: GPU %d (%s) is not among the PCI devices", g.Index, g.BusID)
		}
		b.addLeaf(&xmlLeaf{busID: g.BusID, dev: d, gpu: g})
	}
	for _, nic := range n.NICs {
		if nic.Role != topology.RoleCompute {
			continue
		}
		bus := nic.NCCLBusID()
		if l := b.leaves[bus]; l != nil {
			if l.gpu == nil {
				l.nics = append(l.nics, nic.Name)
			}
			continue
		}
		d := b.devs[bus]
		if d == nil {
			d = b.devs[nic.BusID]
		}
		if d == nil {
			return nil, fmt.Errorf("nccl: topology XML: NIC %s (%s) is not among the PCI devices", nic.Name, nic.BusID)
		}
		b.addLeaf(&xmlLeaf{busID: bus, dev: d, nics: []string{nic.Name}})
	}
	if opts.SynthesizeSwitches {
		b.synthesize()
	}
	root := &ncclxml.Element{Name: "system", Attrs: []ncclxml.Attr{{Name: "version", Value: strconv.Itoa(b.dialect.Version())}}}
	if len(leftOut) > 0 {
		root.Comment = "NCCL's file (version 1), for the NVIDIA GPUs. Left out: AMD GPU(s) " + strings.Join(leftOut, ", ") + ".\n" +
			"RCCL reads only version 2 files (rccl src/graph/xml.h NCCL_TOPO_XML_VERSION) and fails on this one;\n" +
			"one file cannot serve both libraries, and none is written for RCCL on a node with NVIDIA GPUs."
	}
	for _, id := range slices.Sorted(maps.Keys(b.cpus)) {
		c := b.cpus[id]
		xmlSortRec(c)
		root.Children = append(root.Children, c)
	}
	return root, nil
}

// xmlSortRec orders the children of e by busid, as NCCL keeps them.
func xmlSortRec(e *ncclxml.Element) {
	sortfn.SortStable(e.Children, func(a, b *ncclxml.Element) int {
		x, _ := a.Value("busid")
		y, _ := b.Value("busid")
		return strings.Compare(x, y)
	})
	for _, c := range e.Children {
		xmlSortRec(c)
	}
}

// addLeaf places a leaf and the pci path above it as NCCL's sysfs walk
// (ncclTopoGetXmlFromSys in src/graph/xml.cc) does.
func (b *xmlBuilder) addLeaf(l *xmlLeaf) {
	b.leaves[l.busID] = l
	b.order = append(b.order, l)
	bus, dev := l.busID, l.dev
	b.pci[bus] = b.pciElement(bus, dev)
	chain := map[string]bool{bus: true}
	for {
		next := b.ncclParent(dev)
		if next == nil || chain[next.BusID] {
			numa := -1
			if dev.NUMANode != nil {
				numa = *dev.NUMANode
			}
			if numa == -1 && b.dialect == ncclxml.RCCL {
				// RCCL keeps NCCL's old "Workaround kernel bug":
				// numa_node -1 is read as 0 (rccl@0cbce2a
				// src/graph/xml.cc ncclTopoGetXmlFromSys).
				numa = 0
			}
			b.parent[bus] = ""
			b.numa[bus] = numa
			xmlAdopt(b.cpu(numa), b.pci[bus])
			break
		}
		chain[next.BusID] = true
		b.parent[bus] = next.BusID
		e, placed := b.pci[next.BusID]
		if !placed {
			e = b.pciElement(next.BusID, next)
			b.pci[next.BusID] = e
		}
		xmlAdopt(e, b.pci[bus])
		if placed {
			break
		}
		bus, dev = next.BusID, next
	}
	l.top = b.topOf(l.busID)
	l.numa = b.numa[l.top]
}

// ncclParent is the device whose pci NCCL hangs d under, nil for a cpu.
// NCCL looks at the sysfs directory above d: if it is not a PCI function
// (a root bus pciDDDD:BB, a VMBus or ACPI node) d hangs off the cpu of
// its numa_node; otherwise it skips that level and takes the function two
// levels up, or the cpu if that one is not a function either. With
// ancestors a1 (nearest), a2, a3, … the pci parents are a2, a4, …: one
// pci per PCIe switch, named by its upstream port; root ports and
// downstream ports never appear. A parent not among the devices ends the
// walk (the model knows nothing above it).
//
// A device right below a switch upstream port that is not itself a
// downstream port is one a vendor topology file placed (--topo-file: the
// file's tree is already NCCL's, one level per switch); on a real bus only
// downstream ports sit there. Its parent is that switch.
func (b *xmlBuilder) ncclParent(d *topology.PCIDevice) *topology.PCIDevice {
	a1 := b.devs[d.Parent]
	switch {
	case d.Parent == "" || a1 == nil:
		return nil
	case a1.Kind == topology.KindSwitchUpstream && d.Kind != topology.KindSwitchDownstream:
		return a1
	case a1.Parent == "":
		return nil
	}
	return b.devs[a1.Parent]
}

// topOf is the busid of the pci right under the cpu above busid.
func (b *xmlBuilder) topOf(busid string) string {
	for range len(b.parent) + 1 {
		p := b.parent[busid]
		if p == "" {
			break
		}
		busid = p
	}
	return busid
}

func xmlAdopt(parent, child *ncclxml.Element) {
	if !slices.Contains(parent.Children, child) {
		parent.Children = append(parent.Children, child)
	}
}

// pciElement gives a pci the attributes NCCL reads from sysfs, in NCCL's
// order. Empty sysfs values are left out as NCCL leaves them out, except
// link_speed and link_width, which NCCL always sets.
func (b *xmlBuilder) pciElement(busid string, d *topology.PCIDevice) *ncclxml.Element {
	e := &ncclxml.Element{Name: "pci"}
	add := func(name, value string) {
		if value != "" {
			e.Attrs = append(e.Attrs, ncclxml.Attr{Name: name, Value: value})
		}
	}
	add("busid", busid)
	add("class", d.Class)
	add("vendor", d.Vendor)
	add("device", d.Device)
	add("subsystem_vendor", d.SubsystemVendor)
	add("subsystem_device", d.SubsystemDevice)
	speed, width := b.link(d)
	e.Attrs = append(e.Attrs, ncclxml.Attr{Name: "link_speed", Value: speed}, ncclxml.Attr{Name: "link_width", Value: strconv.Itoa(width)})
	return e
}

// link computes link_speed and link_width as NCCL does: the lower of the
// device's max_link_* and those of the directory above it (its parent
// bridge). A function on a root bus has pciDDDD:BB above it, which has no
// link files: NCCL reads "" there, so the width is min(w, 0) = 0 (NCCL
// treats 0 as x16) and the speed is the device's own. Speeds compare by
// their leading number ("%f GT/s"); one that does not parse loses.
//
// A device a vendor topology file put at the top (HostBridge
// "topo-file:…", no parent) has no directory above it that NCCL could
// read: the file's own link is kept.
//
// RCCL differs on the width: where the directory above gives no
// max_link_width it takes the device's own (rccl@0cbce2a
// src/graph/xml.cc: portWidth = deviceWidth when "../max_link_width" is
// empty), so a root-bus GPU is x16 there, as RCCL's own MI300X VM model
// shows (tools/topo_expl/models/topo_8p_940vm.xml).
func (b *xmlBuilder) link(d *topology.PCIDevice) (speed string, width int) {
	var port topology.PCILink
	if p := b.devs[d.Parent]; d.Parent != "" && p != nil {
		port = p.Link
	} else if strings.HasPrefix(d.HostBridge, "topo-file:") {
		port = d.Link
	}
	speed = d.Link.MaxSpeed
	if xmlGTs(port.MaxSpeed) < xmlGTs(d.Link.MaxSpeed) {
		speed = port.MaxSpeed
	}
	if b.dialect == ncclxml.RCCL && port.MaxWidth == 0 {
		return speed, d.Link.MaxWidth
	}
	return speed, min(d.Link.MaxWidth, port.MaxWidth)
}

// xmlGTs reads the number at the start of a link speed; +Inf when none.
func xmlGTs(s string) float64 {
	s = strings.TrimLeft(s, " \t\n")
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' || end == 0 && (s[0] == '+' || s[0] == '-')) {
		end++
	}
	f, err := strconv.ParseFloat(s[:end], 64)
	if err != nil {
		return math.Inf(1)
	}
	return f
}

// cpu returns the cpu element of a NUMA node, creating it with NCCL's
// attributes in NCCL's order: numaid, affinity (nodeN/cpumap: the node's
// CPUs as a mask as wide as the machine's CPU ids; left out for numaid -1
// or a node the model does not know, as NCCL leaves it out when it cannot
// read the file), arch, and on x86_64 vendor, familyid and modelid (CPUID
// family: base + extended<<4, so cpuinfo family f ≥ 15 is
// 15 + (f-15)<<4; model as /proc/cpuinfo prints it). On x86_64 without a
// known vendor and family all four are left to NCCL's CPUID.
func (b *xmlBuilder) cpu(numa int) *ncclxml.Element {
	if c, ok := b.cpus[numa]; ok {
		return c
	}
	c := &ncclxml.Element{Name: "cpu"}
	add := func(name, value string) { c.Attrs = append(c.Attrs, ncclxml.Attr{Name: name, Value: value}) }
	add("numaid", strconv.Itoa(numa))
	if numa >= 0 {
		if i := slices.IndexFunc(b.n.NUMANodes, func(m topology.NUMANode) bool { return m.ID == numa }); i >= 0 {
			add("affinity", b.n.NUMANodes[i].CPUs.Mask(xmlCPUWidth(b.n.CPU)))
		}
	}
	ci := b.n.CPU
	switch {
	case ci.Arch == "x86_64" && ci.Vendor != "" && ci.Family > 0:
		add("arch", ci.Arch)
		add("vendor", ci.Vendor)
		add("familyid", strconv.Itoa(xmlCPUIDFamily(ci.Family)))
		add("modelid", strconv.Itoa(ci.Model))
	case ci.Arch != "" && ci.Arch != "x86_64":
		add("arch", ci.Arch)
	}
	b.cpus[numa] = c
	return c
}

// xmlCPUWidth is the number of CPU ids (the kernel's nr_cpu_ids as the
// online and offline lists show it), the width of nodeN/cpumap.
func xmlCPUWidth(ci topology.CPUInfo) int {
	w := 0
	for _, s := range [][]int{ci.Online.CPUs(), ci.Offline.CPUs()} {
		if len(s) > 0 {
			w = max(w, s[len(s)-1]+1)
		}
	}
	return w
}

// xmlCPUIDFamily turns /proc/cpuinfo's family into NCCL's familyid.
func xmlCPUIDFamily(f int) int {
	if f < 15 {
		return f
	}
	return 15 + (f-15)<<4
}

// synthesize groups GPUs and their paired NICs under virtual switches.
// The unit moved is the whole subtree right under the cpu that holds the
// GPU or NIC, so that a real switch keeps what is below it. Pairs of
// class PHB and NODE are grouped; PIX and PXB already share a switch, and
// a SYS pair is left alone (a switch cannot span two NUMA nodes, and
// claiming PIX across sockets would turn GPUDirect RDMA on over the SMP
// link). Nor is a GPU with its own memory NUMA node (C2C-attached, Grace
// Hopper and Blackwell), whose NIC path NCCL computes over C2C, nor a
// GPU that uses another NIC while its own is down (the file describes the
// machine, not the stopgap).
func (b *xmlBuilder) synthesize() {
	up := map[string]string{} // union-find over the busids of the units
	var find func(string) string
	find = func(x string) string {
		for up[x] != "" && up[x] != x {
			x = up[x]
		}
		return x
	}
	notes := map[string][]string{} // unit → pair lines
	first := map[string]int{}      // unit → position of its first GPU
	gpuPos := map[int]int{}
	for i, g := range b.n.GPUs {
		gpuPos[g.Index] = i
	}
	nicBus := map[string]string{}
	for _, nic := range b.n.NICs {
		nicBus[nic.Name] = nic.NCCLBusID()
	}
	for _, p := range b.n.Pairs {
		if p.Class != topology.ClassPHB && p.Class != topology.ClassNODE || len(p.DownNICs) > 0 {
			continue
		}
		pos, ok := gpuPos[p.GPU]
		if !ok {
			continue
		}
		if b.n.GPUs[pos].GPUNUMAID != nil {
			// A C2C GPU (Grace Hopper/Blackwell): NCCL reaches its NICs
			// through the CPU over C2C (path P2C, GDR on); a PCIe switch
			// would hide that.
			continue
		}
		gl := b.leaves[b.n.GPUs[pos].BusID]
		for _, name := range p.NICs {
			nl := b.leaves[nicBus[name]]
			if gl == nil || nl == nil || nl.gpu != nil || gl.numa != nl.numa || gl.top == nl.top {
				continue
			}
			for _, u := range []string{gl.top, nl.top} {
				if up[u] == "" {
					up[u] = u
				}
			}
			ra, rb := find(gl.top), find(nl.top)
			if ra != rb {
				up[rb] = ra
			}
			decided := "decided"
			if !p.Decided {
				decided = "undecided, chosen by bus order"
			}
			line := fmt.Sprintf("GPU %d %s + %s %s: pair class %s, %s", p.GPU, gl.busID, name, nl.busID, p.Class, decided)
			notes[gl.top] = append(notes[gl.top], line)
			if _, ok := first[gl.top]; !ok {
				first[gl.top] = pos
			}
		}
	}
	type group struct {
		units []string
		lines []string
		first int
	}
	groups := map[string]*group{}
	for u := range up {
		r := find(u)
		g := groups[r]
		if g == nil {
			g = &group{first: math.MaxInt}
			groups[r] = g
		}
		g.units = append(g.units, u)
	}
	var list []*group
	for _, g := range groups {
		slices.Sort(g.units)
		for _, u := range g.units {
			g.lines = append(g.lines, notes[u]...)
			if f, ok := first[u]; ok {
				g.first = min(g.first, f)
			}
		}
		list = append(list, g)
	}
	sortfn.Sort(list, func(a, b *group) int { return cmp.Compare(a.first, b.first) })
	for k, g := range list {
		gpu := b.n.GPUs[g.first]
		numa := b.leaves[gpu.BusID].numa
		cpu := b.cpus[numa]
		d := b.devs[gpu.BusID]
		speed, width := d.Link.MaxSpeed, d.Link.MaxWidth
		if speed == "" || width == 0 {
			speed, width = b.link(d)
		}
		sw := &ncclxml.Element{Name: "pci", Attrs: []ncclxml.Attr{
			{Name: "busid", Value: xmlVirtualBusID(k)},
			{Name: "class", Value: "0x060400"},
			{Name: "vendor", Value: "0x0000"},
			{Name: "device", Value: "0x0000"},
			{Name: "subsystem_vendor", Value: "0x0000"},
			{Name: "subsystem_device", Value: "0x0000"},
			{Name: "link_speed", Value: speed},
			{Name: "link_width", Value: strconv.Itoa(width)},
		}}
		sw.Comment = "Virtual switch, not on the PCI bus: inferred from gpuaffinity's GPU-NIC pairing\n" + strings.Join(g.lines, "\n")
		for _, u := range g.units {
			e := b.pci[u]
			cpu.Children = slices.DeleteFunc(cpu.Children, func(c *ncclxml.Element) bool { return c == e })
			sw.Children = append(sw.Children, e)
		}
		cpu.Children = append(cpu.Children, sw)
	}
}

// xmlVirtualBusID names the k-th virtual switch (k from 0): ffff:ff:01.0
// to ffff:ff:1f.0, then on down the buses.
func xmlVirtualBusID(k int) string {
	return fmt.Sprintf("ffff:%02x:%02x.0", 0xff-k/31, k%31+1)
}
