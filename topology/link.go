package topology

import (
	"cmp"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"
	"strings"
)

// Link fills every GPU's Locality, Paths, GPUPaths, NIC roles and Pairs
// from the other fields.
// It does no I/O and is deterministic; calling it again recomputes them.
func Link(n *Node, opts RoleOptions) {
	n.Warnings = append(n.Warnings, ResolveLocality(n)...)
	n.Warnings = append(n.Warnings, linkDataDirect(n)...)
	tree := newTree(localizedDevices(n))
	c := newRoleCtx(n, tree)
	n.Paths = n.Paths[:0]
	for gi, g := range n.GPUs {
		for ni, nic := range n.NICs {
			p := c.cells[gi][ni]
			path := Path{GPU: g.Index, NIC: nic.Name, Class: p.class, Inferred: p.inferred}
			if nic.DataDirect != nil {
				path.PFClass, _ = tree.classWith(g.BusID, nic.BusID, c.ancestors)
			}
			n.Paths = append(n.Paths, path)
		}
	}
	n.GPUPaths = n.GPUPaths[:0]
	for i, a := range n.GPUs {
		for _, b := range n.GPUs[i+1:] {
			c, _ := tree.class(a.BusID, b.BusID)
			n.GPUPaths = append(n.GPUPaths, GPUPath{A: a.Index, B: b.Index, Class: c, NVLinks: nvlinksBetween(a, b), XGMI: xgmiBetween(a, b)})
		}
	}
	n.Warnings = append(n.Warnings, assignRoles(n, opts, c)...)
	n.Pairs = c.pair()
	n.Warnings = append(n.Warnings, c.downWarnings()...)
	n.Warnings = append(n.Warnings, c.linkStorage()...)
	n.linkFabric()
}

// localizedDevices is n.PCIDevices where a GPU whose numa_node is unknown
// has its resolved Locality's CPUs as local CPUs: the path classes to it
// (NODE or SYS, marked inferred) then follow the one answer for its
// locality (NVML's CPU affinity) instead of a local_cpulist of every CPU.
// n.PCIDevices itself keeps what sysfs says.
func localizedDevices(n *Node) []PCIDevice {
	devs := n.PCIDevices
	cloned := false
	for _, g := range n.GPUs {
		if g.NUMANode != nil || g.Locality.CPUs.IsEmpty() {
			continue
		}
		i := slices.IndexFunc(devs, func(d PCIDevice) bool { return d.BusID == g.BusID })
		if i < 0 || devs[i].LocalCPUs.Equal(g.Locality.CPUs) {
			continue
		}
		if !cloned {
			devs, cloned = slices.Clone(devs), true
		}
		devs[i].LocalCPUs = g.Locality.CPUs
	}
	return devs
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

// BridgesBetween returns the bridges on the PCIe path between functions
// a and b below their common ancestor bridge (a's side nearest a first,
// then b's): the ports peer traffic between them crosses without going
// up to the root complex, where ACS would redirect it. ok is false where
// either function is not in n.PCIDevices or they share no bridge (a path
// through the root complex).
func (n *Node) BridgesBetween(a, b string) (bridges []PCIDevice, ok bool) {
	t := newTree(n.PCIDevices)
	if t[a] == nil || t[b] == nil {
		return nil, false
	}
	upA, upB := t.ancestors(a), t.ancestors(b)
	for j, x := range upB {
		if i := slices.IndexFunc(upA, func(y *PCIDevice) bool { return y.BusID == x.BusID }); i >= 0 {
			for _, d := range append(slices.Clone(upA[:i]), upB[:j]...) {
				bridges = append(bridges, *d)
			}
			return bridges, true
		}
	}
	return nil, false
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
	return t.classWith(a, b, t.ancestors)
}

// classWith is class with the ancestors function given (a memo).
func (t tree) classWith(a, b string, ancestors func(string) []*PCIDevice) (c Class, inferred bool) {
	da, db := t[a], t[b]
	if da == nil || db == nil {
		return ClassUnknown, false
	}
	if a == b {
		return ClassPIX, false
	}
	upA, upB := ancestors(a), ancestors(b)
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

// pair gives each GPU the compute NICs nearest to it (class, then NUMA
// distance; only exact ties are split by bus order) and spreads GPUs that
// share the same nearest set evenly over it, in GPU index and NIC bus
// order: the pairing the layout was built for. A GPU whose NICs have no
// port up then uses the healthy compute NIC(s) nearest to it instead, as
// many as it had, the least shared first.
func (c *roleCtx) pair() []Pair {
	n := c.n
	var compute []int // n.NICs indexes, bus order
	for i, nic := range n.NICs {
		if nic.Role == RoleCompute {
			compute = append(compute, i)
		}
	}
	pairs := make([]Pair, len(n.GPUs))
	type group struct {
		gpus []int // positions in n.GPUs
		nics []string
		r    rank
	}
	groups := map[string]*group{}
	var order []string
	for gi, g := range n.GPUs {
		pairs[gi] = Pair{GPU: g.Index, NICs: []string{}, DownNICs: []string{}}
		if len(compute) == 0 {
			pairs[gi].Note = "no compute NIC on this node (no RDMA NIC, no NIC beside a GPU)"
			continue
		}
		set, best := c.nearest(gi, compute)
		if len(set) == 0 {
			pairs[gi].Note = "no PCI path to any compute NIC"
			continue
		}
		names := c.names(set)
		key := fmt.Sprintf("%d|%d|%s", best.class, best.dist, strings.Join(names, ","))
		if groups[key] == nil {
			groups[key] = &group{nics: names, r: best}
			order = append(order, key)
		}
		groups[key].gpus = append(groups[key].gpus, gi)
	}
	for _, key := range order {
		grp := groups[key]
		g, k := len(grp.gpus), len(grp.nics)
		for i, gi := range grp.gpus {
			p := &pairs[gi]
			p.Class = grp.r.class
			if k >= g {
				p.NICs = slices.Clone(grp.nics[i*k/g : (i+1)*k/g])
			} else {
				p.NICs = []string{grp.nics[i*k/g]}
			}
			chose := len(p.NICs) < k // a choice among tied NICs was made
			p.Decided = !chose || grp.r.class <= ClassPXB
			p.Note = c.pairNote(gi, grp.r, g, k, chose, p.Decided, p.NICs)
		}
	}
	c.avoidDown(pairs, compute)
	return pairs
}

func (c *roleCtx) names(nics []int) []string {
	out := make([]string, len(nics))
	for i, ni := range nics {
		out[i] = c.n.NICs[ni].Name
	}
	return out
}

// nearest returns the NICs (n.NICs indexes, in that bus order) of nics
// nearest to the GPU at position gi, and their rank.
func (c *roleCtx) nearest(gi int, nics []int) ([]int, rank) {
	var best rank
	var set []int
	for _, ni := range nics {
		r := c.cells[gi][ni].rank
		switch {
		case r.class == ClassUnknown:
		case best.class == ClassUnknown || r.less(best):
			best, set = r, []int{ni}
		case r == best:
			set = append(set, ni)
		}
	}
	slices.Sort(set)
	return set, best
}

// avoidDown replaces, in each pair, the NICs that have no port up.
func (c *roleCtx) avoidDown(pairs []Pair, compute []int) {
	n := c.n
	index := map[string]int{}
	var healthy []int
	up := make([]bool, len(n.NICs))
	for _, ni := range compute {
		index[n.NICs[ni].Name] = ni
		up[ni] = n.NICs[ni].Healthy()
		if up[ni] {
			healthy = append(healthy, ni)
		}
	}
	load := map[int]int{}
	for _, p := range pairs {
		for _, name := range p.NICs {
			if ni := index[name]; up[ni] {
				load[ni]++
			}
		}
	}
	for gi := range pairs {
		p := &pairs[gi]
		var keep []string
		var downs []string
		for _, name := range p.NICs {
			ni := index[name]
			if up[ni] {
				keep = append(keep, name)
			} else {
				p.DownNICs = append(p.DownNICs, name)
				downs = append(downs, fmt.Sprintf("%s (%s) is down: %s", name, p.Class, strings.Join(n.NICs[ni].DownPorts(), ", ")))
			}
		}
		if len(p.DownNICs) == 0 {
			continue
		}
		if len(keep) > 0 {
			p.NICs = keep
			p.Note = joinNote(p.Note, strings.Join(downs, "; ")+"; uses the rest")
			continue
		}
		set, best := c.nearest(gi, healthy)
		if len(set) == 0 {
			p.NICs = []string{}
			p.Note = joinNote(p.Note, strings.Join(downs, "; ")+"; no compute NIC with a port up is left")
			continue
		}
		want := min(len(p.DownNICs), len(set))
		sortfn.SortStable(set, func(a, b int) int { return cmp.Compare(load[a], load[b]) })
		chosen := slices.Clone(set[:want])
		slices.Sort(chosen)
		for _, ni := range chosen {
			load[ni]++
		}
		p.NICs = c.names(chosen)
		p.Class = best.class
		p.Note = fmt.Sprintf("%s; uses %s instead (%s)", strings.Join(downs, "; "), strings.Join(p.NICs, ","), c.classWords(gi, best))
	}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// downWarnings name every compute NIC port that is down, and what the
// GPUs that should use it use instead.
func (c *roleCtx) downWarnings() []string {
	var out []string
	for _, nic := range c.n.NICs {
		if nic.Role != RoleCompute {
			continue
		}
		down := nic.DownPorts()
		if len(down) == 0 {
			continue
		}
		var uses []string
		for _, p := range c.n.Pairs {
			if slices.Contains(p.DownNICs, nic.Name) {
				uses = append(uses, fmt.Sprintf("GPU %d uses %s", p.GPU, orWord(strings.Join(p.NICs, ","), "no NIC")))
			}
		}
		what := "it is left out of NCCL_IB_HCA and UCX_NET_DEVICES"
		if len(uses) > 0 {
			what = strings.Join(uses, "; ")
		}
		if nic.Healthy() {
			what = "its other ports carry on"
		}
		out = append(out, fmt.Sprintf("compute NIC %s (%s) %s: %s", nic.Name, orWord(nic.BusID, "no PCI function"), strings.Join(down, ", "), what))
	}
	return out
}

// classWords says what a class and distance mean between the GPU at
// position gi and a NIC.
func (c *roleCtx) classWords(gi int, r rank) string {
	switch r.class {
	case ClassPIX:
		return "shares a PCIe switch"
	case ClassPXB:
		return "behind a common PCIe switch tree"
	case ClassPHB:
		return "same PCIe host bridge, no common switch"
	case ClassNODE:
		return "same NUMA node, different host bridges"
	case ClassSYS:
		if r.dist == unknownDist {
			return "another NUMA node (distance unknown)"
		}
		if c.sameSocketAt(gi, r) {
			return fmt.Sprintf("same socket, other SNC node (NUMA distance %d)", r.dist)
		}
		return fmt.Sprintf("crosses sockets (NUMA distance %d)", r.dist)
	}
	return r.class.String()
}

// sameSocketAt reports whether the compute NICs at rank r from the GPU at
// position gi sit on a NUMA node of its socket.
func (c *roleCtx) sameSocketAt(gi int, r rank) bool {
	gs := c.socketOf(c.anchorNUMA(c.anchors[gi]))
	if gs == nil {
		return false
	}
	for ni, nic := range c.n.NICs {
		if nic.Role == RoleCompute && c.cells[gi][ni].rank == r {
			s := c.socketOf(c.numaOf(nic.BusID))
			return s != nil && *s == *gs
		}
	}
	return false
}

func (c *roleCtx) socketOf(node *int) *int {
	if node == nil {
		return nil
	}
	for _, nn := range c.n.NUMANodes {
		if nn.ID == *node {
			return nn.Socket
		}
	}
	return nil
}

// switchesHidden reports whether GPU g sits under no PCIe switch on a
// virtual machine: the hypervisor hides the switches.
func (c *roleCtx) switchesHidden(g GPU) bool {
	if !c.n.Platform.Virtual {
		return false
	}
	for _, a := range c.tree.ancestors(g.BusID) {
		if a.Kind == KindSwitchUpstream || a.Kind == KindSwitchDownstream {
			return false
		}
	}
	return true
}

func (c *roleCtx) pairNote(gi int, r rank, gpus, nics int, chose, decided bool, chosen []string) string {
	g := c.n.GPUs[gi]
	parts := []string{c.classWords(gi, r)}
	if dd := c.dataDirectNote(chosen); dd != "" {
		parts = append(parts, dd)
	}
	if nics < gpus {
		parts = append(parts, fmt.Sprintf("%d GPUs share %d NIC(s)", gpus, nics))
	}
	switch {
	case !decided && c.switchesHidden(g):
		parts = append(parts, fmt.Sprintf("undecided: %d NICs tie at %s (PCIe switches not visible: virtual machine); chosen by bus order; a vendor topology file can decide", nics, r.class))
	case !decided:
		parts = append(parts, fmt.Sprintf("undecided: %d NICs tie at %s; chosen by bus order", nics, r.class))
	case chose:
		parts = append(parts, fmt.Sprintf("%d NICs at %s spread over %d GPUs", nics, r.class, gpus))
	}
	return strings.Join(parts, "; ")
}
