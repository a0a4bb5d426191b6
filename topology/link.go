package topology

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Link fills Paths, GPUPaths, NIC roles and Pairs from the other fields.
// It does no I/O and is deterministic; calling it again recomputes them.
func Link(n *Node, opts RoleOptions) {
	tree := newTree(n.PCIDevices)
	n.Paths = n.Paths[:0]
	for _, g := range n.GPUs {
		for _, nic := range n.NICs {
			c, inferred := tree.class(g.BusID, nic.BusID)
			n.Paths = append(n.Paths, Path{GPU: g.Index, NIC: nic.Name, Class: c, Inferred: inferred})
		}
	}
	n.GPUPaths = n.GPUPaths[:0]
	for i, a := range n.GPUs {
		for _, b := range n.GPUs[i+1:] {
			c, _ := tree.class(a.BusID, b.BusID)
			n.GPUPaths = append(n.GPUPaths, GPUPath{A: a.Index, B: b.Index, Class: c, NVLinks: nvlinksBetween(a, b)})
		}
	}
	n.Warnings = append(n.Warnings, assignRoles(n, opts)...)
	n.Pairs = pair(n)
}

// PathClass returns the class between a GPU index and a NIC name from
// n.Paths; ClassUnknown when absent.
func (n *Node) PathClass(gpu int, nic string) Class {
	for _, p := range n.Paths {
		if p.GPU == gpu && p.NIC == nic {
			return p.Class
		}
	}
	return ClassUnknown
}

// tree indexes the PCI devices by bus id.
type tree map[string]*PCIDevice

func newTree(devs []PCIDevice) tree {
	t := make(tree, len(devs))
	for i := range devs {
		t[devs[i].BusID] = &devs[i]
	}
	return t
}

// ancestors returns the bridges above busID, nearest first. A parent
// missing from the tree ends the chain; a loop (corrupt input) is cut.
func (t tree) ancestors(busID string) []*PCIDevice {
	var out []*PCIDevice
	d := t[busID]
	for d != nil && d.Parent != "" && len(out) <= len(t) {
		p := t[d.Parent]
		if p == nil {
			break
		}
		out = append(out, p)
		d = p
	}
	return out
}

// switchKey names the PCIe switch a bridge belongs to: a downstream port
// belongs to its upstream port's switch.
func switchKey(d *PCIDevice) string {
	if d.Kind == KindSwitchDownstream && d.Parent != "" {
		return d.Parent
	}
	return d.BusID
}

// class computes the nvidia-smi path class between two functions.
//
// With a common bridge above both, the class counts the PCIe switches on
// the path (a switch's upstream and downstream ports are one switch): one
// switch is PIX, more is PXB. Without one, both sit on one root bus (PHB),
// on two root buses of one NUMA node (NODE) or of two (SYS). Where a NUMA
// node is unknown (numa_node -1), the local CPU lists decide and inferred
// is set.
func (t tree) class(a, b string) (c Class, inferred bool) {
	da, db := t[a], t[b]
	if da == nil || db == nil {
		return ClassUnknown, false
	}
	if a == b {
		return ClassPIX, false
	}
	upA, upB := t.ancestors(a), t.ancestors(b)
	onA := make(map[string]int, len(upA))
	for i, x := range upA {
		onA[x.BusID] = i
	}
	for j, x := range upB {
		i, ok := onA[x.BusID]
		if !ok {
			continue
		}
		switches := map[string]bool{}
		for _, br := range append(slices.Clone(upA[:i+1]), upB[:j]...) {
			switches[switchKey(br)] = true
		}
		if len(switches) <= 1 {
			return ClassPIX, false
		}
		return ClassPXB, false
	}
	if da.HostBridge != "" && da.HostBridge == db.HostBridge {
		return ClassPHB, false
	}
	if da.NUMANode != nil && db.NUMANode != nil {
		if *da.NUMANode == *db.NUMANode {
			return ClassNODE, false
		}
		return ClassSYS, false
	}
	// numa_node -1 on at least one side: fall back on local_cpulist.
	switch {
	case da.LocalCPUs.IsEmpty() || db.LocalCPUs.IsEmpty():
		return ClassNODE, true
	case da.LocalCPUs.Intersect(db.LocalCPUs).IsEmpty():
		return ClassSYS, true
	default:
		return ClassNODE, true
	}
}

// nvlinksBetween counts the active NVLinks joining two GPUs: direct links
// to each other, plus, where both reach NVSwitches, the links each has into
// the switch fabric (the smaller count: that is what `nvidia-smi topo -m`
// prints as NV# on NVSwitch systems).
func nvlinksBetween(a, b GPU) int {
	direct := 0
	swA, swB := 0, 0
	for _, l := range a.NVLinks {
		if !l.Active {
			continue
		}
		switch {
		case l.RemoteType == RemoteGPU && strings.EqualFold(l.RemoteBusID, b.BusID):
			direct++
		case l.RemoteType == RemoteNVSwitch:
			swA++
		}
	}
	for _, l := range b.NVLinks {
		if l.Active && l.RemoteType == RemoteNVSwitch {
			swB++
		}
	}
	return direct + min(swA, swB)
}

// RoleOptions pins NIC roles. Each entry names a NIC by RDMA device,
// netdev or PCI bus id.
type RoleOptions struct {
	ComputeNICs []string // only these are compute
	ExcludeNICs []string // never compute
}

func (nic NIC) matches(names []string) bool {
	for _, s := range names {
		if s == nic.Name || s == nic.RDMADevice || s == nic.BusID || slices.Contains(nic.Netdevs, s) {
			return true
		}
	}
	return false
}

// assignRoles applies the role rule (documented in docs/topology-json.md):
//
//  1. --compute-nics, when given, names the compute NICs; --exclude-nics
//     removes NICs from consideration.
//  2. Otherwise the compute NICs are the RDMA NICs (InfiniBand, RoCE,
//     EFA) whose best port rate is the highest among RDMA NICs (front-end
//     and storage NICs are slower or not RDMA).
//  3. A node without RDMA NICs (Google's gVNIC GPUDirect-TCPX(O) nodes)
//     uses its Ethernet NICs that share a PCIe switch with a GPU (PXB or
//     better).
//
// It returns warnings for flags that name no NIC.
func assignRoles(n *Node, opts RoleOptions) (warnings []string) {
	for _, list := range [][]string{opts.ComputeNICs, opts.ExcludeNICs} {
		for _, s := range list {
			if !slices.ContainsFunc(n.NICs, func(nic NIC) bool { return nic.matches([]string{s}) }) {
				warnings = append(warnings, fmt.Sprintf("NIC %q named on the command line is not on this node", s))
			}
		}
	}
	var top float64
	anyRDMA := false
	for _, nic := range n.NICs {
		if nic.Fabric.RDMA() && !nic.matches(opts.ExcludeNICs) {
			anyRDMA = true
			top = max(top, nic.RateGbps())
		}
	}
	for i := range n.NICs {
		nic := &n.NICs[i]
		role, why := RoleOther, ""
		switch {
		case nic.matches(opts.ExcludeNICs):
			why = "excluded by --exclude-nics"
		case len(opts.ComputeNICs) > 0:
			if nic.matches(opts.ComputeNICs) {
				role, why = RoleCompute, "named by --compute-nics"
			} else {
				why = "not named by --compute-nics"
			}
		case nic.Fabric.RDMA() && nic.RateGbps() >= top:
			role, why = RoleCompute, fmt.Sprintf("RDMA NIC in the highest rate class (%g Gb/s)", top)
		case nic.Fabric.RDMA():
			why = fmt.Sprintf("RDMA NIC below the highest rate class (%g < %g Gb/s)", nic.RateGbps(), top)
		case anyRDMA:
			why = "not an RDMA NIC"
		case bestClass(n, nic.Name) <= ClassPXB && bestClass(n, nic.Name) != ClassUnknown:
			role, why = RoleCompute, "no RDMA NIC on the node; Ethernet NIC sharing a PCIe switch with a GPU"
		default:
			why = "not an RDMA NIC and not beside a GPU"
		}
		nic.Role, nic.RoleReason = role, why
	}
	return warnings
}

// bestClass is the closest class between the named NIC and any GPU.
func bestClass(n *Node, nic string) Class {
	best := ClassUnknown
	for _, p := range n.Paths {
		if p.NIC == nic && p.Class != ClassUnknown && (best == ClassUnknown || p.Class < best) {
			best = p.Class
		}
	}
	return best
}

// pair gives each GPU the compute NICs of its best class and spreads GPUs
// that share the same best set evenly over it, in GPU index and NIC bus
// order.
func pair(n *Node) []Pair {
	compute := map[string]NIC{}
	for _, nic := range n.NICs {
		if nic.Role == RoleCompute {
			compute[nic.Name] = nic
		}
	}
	pairs := make([]Pair, len(n.GPUs))
	type group struct {
		gpus  []int // positions in n.GPUs
		nics  []string
		class Class
	}
	groups := map[string]*group{}
	var order []string
	for gi, g := range n.GPUs {
		pairs[gi] = Pair{GPU: g.Index, NICs: []string{}}
		if len(compute) == 0 {
			pairs[gi].Note = "no compute NIC on this node (no RDMA NIC, no NIC beside a GPU)"
			continue
		}
		best := ClassUnknown
		var set []NIC
		for _, p := range n.Paths {
			nic, ok := compute[p.NIC]
			if p.GPU != g.Index || !ok || p.Class == ClassUnknown {
				continue
			}
			switch {
			case best == ClassUnknown || p.Class < best:
				best, set = p.Class, []NIC{nic}
			case p.Class == best:
				set = append(set, nic)
			}
		}
		if len(set) == 0 {
			pairs[gi].Note = "no PCI path to any compute NIC"
			continue
		}
		slices.SortFunc(set, func(a, b NIC) int {
			return cmp.Or(strings.Compare(a.BusID, b.BusID), strings.Compare(a.Name, b.Name))
		})
		names := make([]string, len(set))
		for i, nic := range set {
			names[i] = nic.Name
		}
		key := best.String() + "|" + strings.Join(names, ",")
		if groups[key] == nil {
			groups[key] = &group{nics: names, class: best}
			order = append(order, key)
		}
		groups[key].gpus = append(groups[key].gpus, gi)
	}
	for _, key := range order {
		grp := groups[key]
		g, k := len(grp.gpus), len(grp.nics)
		for i, gi := range grp.gpus {
			p := &pairs[gi]
			p.Class = grp.class
			if k >= g {
				p.NICs = slices.Clone(grp.nics[i*k/g : (i+1)*k/g])
			} else {
				p.NICs = []string{grp.nics[i*k/g]}
			}
			chose := len(p.NICs) < k // a choice among tied NICs was made
			p.Decided = !chose || grp.class <= ClassPXB
			p.Note = pairNote(grp.class, g, k, chose, p.Decided)
		}
	}
	return pairs
}

func pairNote(c Class, gpus, nics int, chose, decided bool) string {
	var parts []string
	switch c {
	case ClassPIX:
		parts = append(parts, "shares a PCIe switch")
	case ClassPXB:
		parts = append(parts, "behind a common PCIe switch tree")
	case ClassPHB:
		parts = append(parts, "same PCIe host bridge, no common switch")
	case ClassNODE:
		parts = append(parts, "same NUMA node, different host bridges")
	case ClassSYS:
		parts = append(parts, "no compute NIC on the GPU's NUMA node: traffic crosses sockets")
	}
	if nics < gpus {
		parts = append(parts, fmt.Sprintf("%d GPUs share %d NIC(s)", gpus, nics))
	}
	if !decided {
		parts = append(parts, fmt.Sprintf("undecided: %d NICs tie at %s (PCIe switches not visible, as in VMs); chosen by bus order; a vendor topology file can decide", nics, c))
	} else if chose {
		parts = append(parts, fmt.Sprintf("%d NICs at %s spread over %d GPUs", nics, c, gpus))
	}
	return strings.Join(parts, "; ")
}
