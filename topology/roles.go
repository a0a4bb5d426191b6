package topology

import (
	"cmp"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/pci"
)

// RoleOptions pins NIC roles. Each entry names a NIC by RDMA device,
// netdev or PCI bus id.
type RoleOptions struct {
	ComputeNICs []string // only these are compute
	ExcludeNICs []string // never compute, never paired: role other
	StorageNICs []string // storage, whatever the layout says
}

func (nic NIC) matches(names []string) bool {
	for _, s := range names {
		if s == nic.Name || s == nic.RDMADevice || s == nic.BusID || slices.Contains(nic.Netdevs, s) || nic.hasMember(s) {
			return true
		}
	}
	return false
}

// hasMember reports whether a RoCE LAG NIC's bond has a member of that
// netdev name or PCI bus id: the member is part of this NIC, never one of
// its own.
func (nic NIC) hasMember(s string) bool {
	if nic.Bond == nil {
		return false
	}
	return slices.ContainsFunc(nic.Bond.Members, func(m BondMember) bool { return m.Name == s || m.BusID == s })
}

// nicKind is the kind of adapter a NIC is: its fabric, PCI id and shape
// (ports per adapter, or a VF). The NICs of one compute fabric are one
// kind; a storage card of the same chip is another when its shape differs
// (the DGX's dual-port storage ConnectX-7 beside single-port compute ones).
type nicKind struct {
	fabric         Fabric
	vendor, device string
	shape          string
}

func (k nicKind) String() string {
	return fmt.Sprintf("%s %s:%s, %s", k.fabric, strings.TrimPrefix(k.vendor, "0x"), strings.TrimPrefix(k.device, "0x"), k.shape)
}

// anchor is a device NICs are placed by: a GPU, or an accelerator
// gpuaffinity does not drive (its NICs have roles all the same).
type anchor struct {
	name  string // "GPU 0", "accelerator 0000:05:00.0"
	busID string
	idx   int // position in roleCtx.anchors: GPUs first, in n.GPUs order
}

// rank is how near a NIC is to an anchor: path class first, then the
// SLIT distance between their NUMA nodes.
type rank struct {
	class Class
	dist  int
}

func (r rank) less(o rank) bool { return r.class < o.class || r.class == o.class && r.dist < o.dist }

// unknownDist stands for a distance no table gives (a NUMA node of -1);
// all unknown distances tie.
const unknownDist = 1 << 20

// roleCtx holds what the role and pairing rules read.
type roleCtx struct {
	n       *Node
	tree    tree
	anchors []anchor
	kinds   []nicKind // per NIC, in n.NICs order
	pcie    []float64 // per NIC: Gb/s its PCIe link carries; 0 unknown
	// cells[a][i] is the rank of NIC i (n.NICs order) from anchor a.
	cells [][]cell
	anc   map[string][]*PCIDevice
}

// cell is the path between an anchor and a NIC.
type cell struct {
	rank
	inferred bool // Path.Inferred
}

// ancestors is tree.ancestors, computed once per function.
func (c *roleCtx) ancestors(bus string) []*PCIDevice {
	if a, ok := c.anc[bus]; ok {
		return a
	}
	a := c.tree.ancestors(bus)
	c.anc[bus] = a
	return a
}

func newRoleCtx(n *Node, t tree) *roleCtx {
	c := &roleCtx{n: n, tree: t, anc: map[string][]*PCIDevice{}}
	for _, g := range n.GPUs {
		c.anchors = append(c.anchors, anchor{name: fmt.Sprintf("GPU %d", g.Index), busID: g.BusID, idx: len(c.anchors)})
	}
	for _, a := range n.Unsupported {
		c.anchors = append(c.anchors, anchor{name: "accelerator " + a.BusID, busID: a.BusID, idx: len(c.anchors)})
	}
	c.cells = make([][]cell, len(c.anchors))
	for ai, a := range c.anchors {
		c.cells[ai] = make([]cell, len(n.NICs))
		for ni, nic := range n.NICs {
			cl, inf := t.classWith(a.busID, nic.DataPathBusID(), c.ancestors)
			c.cells[ai][ni] = cell{rank{class: cl, dist: c.dist(c.anchorNUMA(a), c.numaOf(nic.BusID))}, inf}
		}
	}
	ports := map[string]int{} // adapter slot -> ports
	for _, nic := range n.NICs {
		if s := adapterSlot(nic); s != "" {
			ports[s+"|"+nic.Vendor+nic.Device] += max(1, len(nic.Ports))
		}
	}
	for i, nic := range n.NICs {
		shape := "no PCI function"
		switch {
		case nic.Virtual:
			shape = "virtual function"
		case adapterSlot(nic) != "":
			p := ports[adapterSlot(nic)+"|"+nic.Vendor+nic.Device]
			shape = plural(p, "port") + " per adapter"
		}
		c.kinds = append(c.kinds, nicKind{fabric: nic.Fabric, vendor: nic.Vendor, device: nic.Device, shape: shape})
		c.pcie = append(c.pcie, c.pcieGbps(nic.BusID))
		n.NICs[i].CapabilityGbps = capability(nic, c.pcie[i])
	}
	return c
}

// adapterSlot is the PCI slot (domain:bus:device) of the NIC's function:
// the functions of one multi-port adapter share it.
func adapterSlot(nic NIC) string {
	if i := strings.LastIndexByte(nic.BusID, '.'); i > 0 {
		return nic.BusID[:i]
	}
	return ""
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// dist is the SLIT distance between two NUMA nodes; unknownDist when
// either is unknown or the table does not say.
func (c *roleCtx) dist(a, b *int) int {
	if a == nil || b == nil {
		return unknownDist
	}
	for _, nn := range c.n.NUMANodes {
		if nn.ID == *a {
			if *b >= 0 && *b < len(nn.Distances) {
				return nn.Distances[*b]
			}
			if *a == *b {
				return 10
			}
		}
	}
	return unknownDist
}

// rank is how near NIC nic (n.NICs index) is to anchor a: their class,
// and the distance between the NUMA nodes the PCI tree gives them.
func (c *roleCtx) rank(a anchor, nic int) rank { return c.cells[a.idx][nic].rank }

// anchorNUMA is an anchor's NUMA node: its function's numa_node, else,
// for a GPU, the node its Locality resolved (NVML's CPU affinity where
// numa_node is -1).
func (c *roleCtx) anchorNUMA(a anchor) *int {
	if nd := c.numaOf(a.busID); nd != nil || a.idx >= len(c.n.GPUs) {
		return nd
	}
	return c.n.GPUs[a.idx].Locality.Node
}

// numaOf is a function's NUMA node in the PCI tree; nil when unknown.
func (c *roleCtx) numaOf(bus string) *int {
	if d := c.tree[bus]; d != nil {
		return d.NUMANode
	}
	return nil
}

// pcieGbps is what a function's PCIe link carries in Gb/s: lanes ×
// transfer rate × line-code efficiency, from the current link (the
// trained one), else the maximum; 0 when neither is reported.
func (c *roleCtx) pcieGbps(busID string) float64 {
	d := c.tree[busID]
	if d == nil {
		return 0
	}
	speed, width := d.Link.Speed, d.Link.Width
	if speed == "" || width == 0 {
		speed, width = d.Link.MaxSpeed, d.Link.MaxWidth
	}
	gt, ok := pci.ParseSpeed(speed)
	if !ok || width <= 0 {
		return 0
	}
	eff := 128.0 / 130 // 8, 16, 32 GT/s
	switch {
	case gt <= 5:
		eff = 0.8 // 8b/10b
	case gt >= 64:
		eff = 242.0 / 256 // PCIe 6 FLIT mode
	}
	return gt * float64(width) * eff
}

// adapterMaxGbps is the most one port of an adapter carries, by PCI
// vendor:device (linux mlx5_core_pci_table and the vendors' product
// briefs; research/frontier.md §1, /tmp research notes cited in
// docs/topology-json.md).
var adapterMaxGbps = map[string]float64{
	"0x15b3:0x1017": 100, // ConnectX-5
	"0x15b3:0x1018": 100, // ConnectX-5 VF
	"0x15b3:0x1019": 100, // ConnectX-5 Ex
	"0x15b3:0x101a": 100, // ConnectX-5 Ex VF
	"0x15b3:0x101b": 200, // ConnectX-6
	"0x15b3:0x101c": 200, // ConnectX-6 VF
	"0x15b3:0x101d": 200, // ConnectX-6 Dx
	"0x15b3:0x101f": 50,  // ConnectX-6 Lx
	"0x15b3:0x1021": 400, // ConnectX-7
	"0x15b3:0x1023": 800, // ConnectX-8
	"0x15b3:0xa2d6": 200, // BlueField-2
	"0x15b3:0xa2dc": 400, // BlueField-3
	"0x8086:0x1592": 100, // Intel E810-C
	"0x8086:0x1593": 100, // Intel E810-C
	"0x8086:0x159b": 100, // Intel E810-XXV
	"0x14e4:0x1760": 400, // Broadcom BCM57608 (Thor 2)
}

// standardRates are the port rates Ethernet and InfiniBand ports run at.
var standardRates = []float64{800, 400, 200, 100, 50, 40, 25, 10, 1}

// capability is the most one port of the NIC can carry: the adapter's
// maximum by PCI id, or its best up port or interface where higher, else
// the standard rate its PCIe link can feed. A down port's rate (10 Gb/s
// SDR on InfiniBand, 40 Gb/s QDR on RoCE) never counts.
func capability(nic NIC, pcie float64) float64 {
	c := adapterMaxGbps[nic.Vendor+":"+nic.Device]
	c = max(c, nic.UpRateGbps())
	for _, i := range nic.Interfaces {
		if i.SpeedMbps > 0 && i.OperState == "up" {
			c = max(c, float64(i.SpeedMbps)/1000)
		}
	}
	if c > 0 || pcie == 0 {
		return c
	}
	for _, r := range standardRates {
		if r <= pcie {
			return r
		}
	}
	return 0
}

// fabricPreference orders fabrics where the layout cannot tell: the
// fabric kind built for GPU traffic first (on Grace systems, where PCIe
// proximity cannot tell compute from storage NICs, link layer does:
// InfiniBand compute, Ethernet storage and front end).
func fabricPreference(f Fabric) int {
	switch f {
	case FabricInfiniBand:
		return 3
	case FabricEFA:
		return 2
	case FabricRoCE:
		return 1
	}
	return 0
}

// coverage is how well one kind of NIC serves the anchors: how many have
// one of its NICs behind their PCIe switch (PXB or better), on their host
// bridge, on their NUMA node, or anywhere.
type coverage struct {
	kind   nicKind
	nics   []int           // NIC indexes
	best   map[string]rank // anchor bus id -> nearest NIC of the kind
	counts [4]int          // ≤PXB, ≤PHB, ≤NODE, known
}

func (c *roleCtx) cover(kind nicKind, nics []int) coverage {
	cv := coverage{kind: kind, nics: nics, best: map[string]rank{}}
	for _, a := range c.anchors {
		var b rank
		for _, i := range nics {
			r := c.rank(a, i)
			if r.class == ClassUnknown {
				continue
			}
			if b.class == ClassUnknown || r.less(b) {
				b = r
			}
		}
		if b.class == ClassUnknown {
			continue
		}
		cv.best[a.busID] = b
		for j, limit := range []Class{ClassPXB, ClassPHB, ClassNODE, ClassSYS} {
			if b.class <= limit {
				cv.counts[j]++
			}
		}
	}
	return cv
}

// close reports the anchors the kind has a NIC for at PXB or better.
func (cv coverage) close() map[string]bool {
	out := map[string]bool{}
	for bus, r := range cv.best {
		if r.class <= ClassPXB {
			out[bus] = true
		}
	}
	return out
}

// better orders kinds for the compute fabric: more anchors served
// closer, then higher capability, then the fabric built for GPU
// traffic, then more NICs, then bus order.
func (c *roleCtx) better(a, b coverage) int {
	for j := range a.counts {
		if a.counts[j] != b.counts[j] {
			return cmp.Compare(b.counts[j], a.counts[j])
		}
	}
	capA, capB := c.kindCapability(a), c.kindCapability(b)
	return cmp.Or(cmp.Compare(capB, capA),
		cmp.Compare(fabricPreference(b.kind.fabric), fabricPreference(a.kind.fabric)),
		cmp.Compare(len(b.nics), len(a.nics)),
		strings.Compare(c.n.NICs[a.nics[0]].BusID, c.n.NICs[b.nics[0]].BusID))
}

// tieNote says what decided where another kind covers the GPUs as well
// and is as capable (on Grace every device has a root complex of its own,
// so InfiniBand ConnectX-7 and Ethernet BlueField-3 serve every GPU
// alike): the fabric preference, or "" where coverage or capability did.
func (c *roleCtx) tieNote(primary coverage, covs []coverage) string {
	for _, cv := range covs {
		if cv.kind == primary.kind || cv.kind.fabric == primary.kind.fabric ||
			cv.counts != primary.counts || c.kindCapability(cv) != c.kindCapability(primary) {
			continue
		}
		return fmt.Sprintf("; %s serves them alike, and %s goes before %s", cv.kind, primary.kind.fabric, cv.kind.fabric)
	}
	return ""
}

func (c *roleCtx) kindCapability(cv coverage) float64 {
	var m float64
	for _, i := range cv.nics {
		m = max(m, c.n.NICs[i].CapabilityGbps)
	}
	return m
}

func fmtGbps(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + " Gb/s" }

// assignRoles gives every NIC its role (docs/topology-json.md, "Roles"):
//
//  1. --exclude-nics: other; --storage-nics: storage.
//  2. Compute: --compute-nics when given. Otherwise, among RDMA NICs, the
//     kind of adapter that gives the most GPUs (and unsupported
//     accelerators) a NIC closest to them: behind their PCIe switch, else
//     on their host bridge, else their NUMA node; then capability, then
//     InfiniBand before EFA before RoCE. Kinds of the same fabric that
//     give a NIC to GPUs the first kind leaves without one join it. A NIC
//     of those kinds that is no GPU's nearest is a storage NIC. Without
//     RDMA NICs, Ethernet NICs at PXB or better to a GPU (GPUDirect-TCPX).
//  3. Management, decided before compute: RDMA NICs whose PCIe link, as
//     wired, carries less than half of what their port runs at (the
//     NVSwitch-side ConnectX-7 of HGX B200 on PCIe x2).
//  4. Front end: the NIC holding the default route (its netdev, or the
//     bond or netvsc interface it is enslaved to), and NICs of the same
//     kind.
//  5. Storage: the other RDMA NICs. Other: the rest.
//
// It returns warnings for flags that name no NIC.
func assignRoles(n *Node, opts RoleOptions, c *roleCtx) (warnings []string) {
	for _, list := range [][]string{opts.ComputeNICs, opts.ExcludeNICs, opts.StorageNICs} {
		for _, s := range list {
			if !slices.ContainsFunc(n.NICs, func(nic NIC) bool { return nic.matches([]string{s}) }) {
				warnings = append(warnings, fmt.Sprintf("NIC %q named on the command line is not on this node", s))
			}
		}
	}
	decided := make([]bool, len(n.NICs))
	set := func(i int, r Role, why string, also ...Role) {
		n.NICs[i].Role, n.NICs[i].RoleReason = r, why
		n.NICs[i].Roles = append([]Role{r}, also...)
		decided[i] = true
	}
	for i, nic := range n.NICs {
		switch {
		case nic.matches(opts.ExcludeNICs):
			set(i, RoleOther, "excluded by --exclude-nics")
		case nic.matches(opts.StorageNICs):
			set(i, RoleStorage, "named by --storage-nics")
		}
	}
	if len(opts.ComputeNICs) > 0 {
		for i, nic := range n.NICs {
			if !decided[i] && nic.matches(opts.ComputeNICs) {
				set(i, RoleCompute, "named by --compute-nics")
			}
		}
	}
	for i := range n.NICs {
		if decided[i] {
			continue
		}
		if why, w := c.management(i); why != "" {
			set(i, RoleManagement, why)
		} else if w != "" {
			warnings = append(warnings, w)
		}
	}
	if len(opts.ComputeNICs) == 0 {
		c.computeByLayout(set, decided)
	}
	c.frontEnd(set, decided)
	for i, nic := range n.NICs {
		if decided[i] {
			continue
		}
		switch {
		case nic.Fabric.RDMA():
			set(i, RoleStorage, "RDMA NIC outside the compute fabric: "+c.whyNotCompute(i))
		case len(opts.ComputeNICs) > 0:
			set(i, RoleOther, "not named by --compute-nics; Ethernet NIC without RDMA, not the front end")
		default:
			set(i, RoleOther, "Ethernet NIC without RDMA, not the front end")
		}
	}
	return warnings
}

// management applies rule 3 to NIC i: an RDMA NIC wired with a PCIe link
// (trained to its maximum width and speed) that carries less than half of
// what its port runs at (an ACTIVE port's rate, else the adapter's
// capability) is no data NIC. A link trained below its maximum is a
// fault, not a design: it gets a warning instead.
func (c *roleCtx) management(i int) (why, warning string) {
	nic := c.n.NICs[i]
	d := c.tree[nic.BusID]
	if !nic.Fabric.RDMA() || d == nil || c.pcie[i] == 0 {
		return "", ""
	}
	rate, what := nic.UpRateGbps(), "ACTIVE port's"
	if rate == 0 {
		rate, what = nic.CapabilityGbps, "port's capability of"
	}
	if c.pcie[i]*2 >= rate {
		return "", ""
	}
	l := d.Link
	link := fmt.Sprintf("x%d at %s", l.Width, strings.TrimSuffix(l.Speed, " PCIe"))
	if (l.MaxWidth > 0 && l.Width < l.MaxWidth) || (l.MaxSpeed != "" && l.MaxSpeed != l.Speed) {
		return "", fmt.Sprintf("NIC %s (%s): its PCIe link trained down to %s (it can do x%d at %s): about %s for a %s port",
			nic.Name, nic.BusID, link, l.MaxWidth, strings.TrimSuffix(l.MaxSpeed, " PCIe"), fmtGbps(float64(int(c.pcie[i]))), fmtGbps(rate))
	}
	return fmt.Sprintf("its PCIe link (%s) carries about %s, less than half its %s %s: a fabric-management port, not a data NIC (as the NVSwitch-side ConnectX-7 of HGX B200 systems)",
		link, fmtGbps(float64(int(c.pcie[i]))), what, fmtGbps(rate)), ""
}

// computeByLayout chooses the compute NICs from the layout (rule 2).
func (c *roleCtx) computeByLayout(set func(int, Role, string, ...Role), decided []bool) {
	n := c.n
	byKind := map[nicKind][]int{}
	var kinds []nicKind
	for i, nic := range n.NICs {
		if decided[i] || !nic.Fabric.RDMA() {
			continue
		}
		k := c.kinds[i]
		if byKind[k] == nil {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], i)
	}
	if len(kinds) == 0 {
		c.computeTCPX(set, decided)
		return
	}
	var covs []coverage
	for _, k := range kinds {
		covs = append(covs, c.cover(k, byKind[k]))
	}
	sortfn.Sort(covs, c.better)
	primary := covs[0]
	members := slices.Clone(primary.nics)
	joined := []nicKind{}
	taken := primary.close()
	for _, cv := range covs[1:] {
		close := cv.close()
		if cv.kind.fabric != primary.kind.fabric || len(close) == 0 || len(taken) == 0 {
			continue
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(close)), func(b string) bool { return taken[b] }) {
			members = append(members, cv.nics...)
			joined = append(joined, cv.kind)
			for b := range close {
				taken[b] = true
			}
		}
	}
	all := c.cover(primary.kind, members)
	anchors := len(c.anchors)
	for _, i := range members {
		// The first anchor this NIC is a nearest NIC of.
		nearest, class := "", ClassUnknown
		for _, a := range c.anchors {
			if b, ok := all.best[a.busID]; ok && c.rank(a, i) == b {
				nearest, class = a.name, b.class
				break
			}
		}
		kindNote := fmt.Sprintf("its kind (%s)", c.kinds[i])
		gpus := "GPUs"
		if len(n.Unsupported) > 0 {
			gpus = "GPUs and accelerators"
		}
		switch {
		case anchors == 0:
			set(i, RoleCompute, fmt.Sprintf("no GPU on the node to place NICs by: RDMA NIC of the most capable kind (%s, %s)", c.kinds[i], fmtGbps(c.kindCapability(primary))))
		case nearest == "":
			set(i, RoleStorage, fmt.Sprintf("same kind as the compute NICs (%s) but no GPU's nearest NIC", c.kinds[i]))
		case primary.counts[0] > 0:
			why := fmt.Sprintf("GPU-side NIC: nearest NIC of %s (%s); %s gives %d of %d %s a NIC behind their PCIe switch",
				nearest, class, kindNote, primary.counts[0], anchors, gpus)
			if slices.Contains(joined, c.kinds[i]) {
				why = fmt.Sprintf("GPU-side NIC: nearest NIC of %s (%s); %s gives a NIC to GPUs the %s NICs leave without one",
					nearest, class, kindNote, primary.kind)
			}
			set(i, RoleCompute, why)
		default:
			hidden := ""
			if n.Platform.Virtual {
				hidden = " (a virtual machine: its PCIe switches are not visible)"
			}
			set(i, RoleCompute, fmt.Sprintf("nearest NIC of %s (%s); no NIC shares a PCIe switch with a GPU%s, so the kind serving the most %s closest decides: %s serves %d of %d on their host bridge, %d on their NUMA node, %s capable%s",
				nearest, class, hidden, gpus, kindNote, primary.counts[1], anchors, primary.counts[2], fmtGbps(c.kindCapability(primary)), c.tieNote(primary, covs)))
		}
	}
}

// computeTCPX: a node without RDMA NICs uses its Ethernet NICs that share
// a PCIe switch with a GPU (Google's GPUDirect-TCPX(O) gVNICs), never the
// default route's.
func (c *roleCtx) computeTCPX(set func(int, Role, string, ...Role), decided []bool) {
	for i := range c.n.NICs {
		if decided[i] || c.holdsRoute(i) != "" {
			continue
		}
		for _, a := range c.anchors {
			if r := c.rank(a, i); r.class != ClassUnknown && r.class <= ClassPXB {
				set(i, RoleCompute, fmt.Sprintf("no RDMA NIC on the node; Ethernet NIC sharing a PCIe switch with %s (%s)", a.name, r.class))
				break
			}
		}
	}
}

// holdsRoute says how NIC i holds the default route: "" when it does not.
func (c *roleCtx) holdsRoute(i int) string {
	route := c.n.DefaultRouteInterface
	if route == "" {
		return ""
	}
	for _, itf := range c.n.NICs[i].Interfaces {
		switch {
		case itf.Name == route:
			return "holds the default route (" + route + ")"
		case itf.Master == route:
			return fmt.Sprintf("its netdev %s is enslaved to %s, which holds the default route", itf.Name, route)
		}
	}
	return ""
}

// bonded reports whether NIC i reaches the default route as a member of
// a bond.
func (c *roleCtx) bonded(i int) bool {
	for _, itf := range c.n.NICs[i].Interfaces {
		if itf.Master != "" && itf.Master == c.n.DefaultRouteInterface && itf.MasterKind == "bond" {
			return true
		}
	}
	return false
}

// frontEnd applies rule 4.
func (c *roleCtx) frontEnd(set func(int, Role, string, ...Role), decided []bool) {
	n := c.n
	var front []int
	for i := range n.NICs {
		how := c.holdsRoute(i)
		if how == "" {
			continue
		}
		if decided[i] {
			if n.NICs[i].Role == RoleCompute && !slices.Contains(n.NICs[i].Roles, RoleFrontend) {
				n.NICs[i].Roles = append(n.NICs[i].Roles, RoleFrontend)
			}
			continue
		}
		front = append(front, i)
		if n.NICs[i].Fabric.RDMA() && c.bonded(i) {
			set(i, RoleFrontend, how+"; an RDMA port in the bond, so it also carries storage traffic (in-band and storage on one bond)", RoleStorage)
		} else {
			set(i, RoleFrontend, how)
		}
	}
	if n.DefaultRouteInterface == "" && len(front) == 0 {
		// No route table under the root (a capture without one): the front
		// end is the first Ethernet NIC without RDMA that is up, as
		// NCCL_SOCKET_IFNAME's fallback picks it. Where the node's
		// addresses are known (netlink, addresses.json), one with an
		// IPv4 address: a bond member or a down port's netdev holds none
		// and carries no socket.
		known := AddressesKnown(*n)
		why := "no route table under the root: the first Ethernet NIC without RDMA that is up"
		if known {
			why += " and has an IPv4 address"
		}
		for i, nic := range n.NICs {
			if decided[i] || nic.Fabric.RDMA() || nic.RDMADevice != "" {
				continue
			}
			if slices.ContainsFunc(nic.Interfaces, func(itf Interface) bool { return socketReady(itf, known) }) {
				set(i, RoleFrontend, why)
				front = append(front, i)
				break
			}
		}
	}
	for i := range n.NICs {
		if decided[i] {
			continue
		}
		for _, f := range front {
			if c.kinds[i] == c.kinds[f] {
				set(i, RoleFrontend, fmt.Sprintf("same kind of adapter (%s) as the front-end NIC %s", c.kinds[i], n.NICs[f].Name))
				break
			}
		}
	}
}

// whyNotCompute says why an RDMA NIC left out of the compute fabric is
// not GPU-side.
func (c *roleCtx) whyNotCompute(i int) string {
	cv := c.cover(c.kinds[i], []int{i})
	var best rank
	who := ""
	for _, a := range c.anchors {
		if r, ok := cv.best[a.busID]; ok && (best.class == ClassUnknown || r.less(best)) {
			best, who = r, a.name
		}
	}
	compute := 0
	for _, nic := range c.n.NICs {
		if nic.Role == RoleCompute {
			compute++
		}
	}
	switch {
	case who == "":
		return fmt.Sprintf("kind %s; no GPU to place it by", c.kinds[i])
	case compute == 0:
		return fmt.Sprintf("kind %s, nearest %s (%s)", c.kinds[i], who, best.class)
	case best.class <= ClassPXB:
		return fmt.Sprintf("kind %s, behind %s's PCIe switch (%s), but another kind of NIC serves every GPU", c.kinds[i], who, best.class)
	}
	return fmt.Sprintf("kind %s, under no GPU's PCIe switch (nearest %s, %s)", c.kinds[i], who, best.class)
}

// AddressesKnown reports whether the node's IPv4 addresses were read
// (netlink on a live root, addresses.json elsewhere): some interface of
// some NIC holds one. A node whose every interface is bare is taken as
// one whose addresses are unknown.
func AddressesKnown(n Node) bool {
	for _, nic := range n.NICs {
		for _, itf := range nic.Interfaces {
			if len(itf.IPv4) > 0 {
				return true
			}
		}
	}
	return false
}

// socketReady reports whether itf can carry the node's sockets: up, and
// holding an IPv4 address where addresses are known.
func socketReady(itf Interface, addressesKnown bool) bool {
	return itf.OperState == "up" && (!addressesKnown || len(itf.IPv4) > 0)
}

// SocketInterface is the one answer to "which interface carries the
// node's bootstrap sockets" (NCCL_SOCKET_IFNAME, UCX's and Gloo's
// socket interfaces): the default route's interface where the node has
// a route table; otherwise the interface of the NIC rule 4 made the
// front end (role or roles frontend), the first of its interfaces that
// is up and, where addresses are known, holds an IPv4 address. nic names
// the NIC ("" for the default route, whose NIC may be a bond or a
// virtual interface); both are "" when the node has no front end.
func SocketInterface(n Node) (name, nic string) {
	if n.DefaultRouteInterface != "" {
		return n.DefaultRouteInterface, ""
	}
	known := AddressesKnown(n)
	for _, c := range n.NICs {
		if !c.HasRole(RoleFrontend) {
			continue
		}
		for _, itf := range c.Interfaces {
			if socketReady(itf, known) {
				return itf.Name, c.Name
			}
		}
	}
	return "", ""
}
