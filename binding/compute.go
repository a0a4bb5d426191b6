package binding

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Schema names the JSON contract of Map (WriteJSON).
const Schema = "gpuaffinity.cpumap/v1"

var (
	// ErrOptions is wrapped when Options are invalid.
	ErrOptions = errors.New("invalid binding options")
	// ErrNoGPUs is wrapped when the node has no GPU to bind next to.
	ErrNoGPUs = errors.New("no GPUs")
	// ErrNoAllowedCPUs is wrapped when the process may run on no CPU.
	ErrNoAllowedCPUs = errors.New("no allowed CPUs")
	// ErrTooManyRanks is wrapped when exclusive mode cannot give every
	// rank a CPU of its own.
	ErrTooManyRanks = errors.New("more ranks than cores")
	// ErrNoRank is wrapped when a local rank is not in the map.
	ErrNoRank = errors.New("no such local rank")
)

// ParseMode reads a mode name; "" is the default, ModeExclusive.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeExclusive, nil
	case ModeNode, ModeSocket, ModeExclusive:
		return m, nil
	}
	return "", fmt.Errorf("%w: mode %q: want node, socket or exclusive", ErrOptions, s)
}

// Only returns the map cut down to local rank r of a process that drives
// the GPUs of sel (ForRank); Leftover and the map-wide warnings are kept.
func (m Map) Only(n topology.Node, sel topology.Selection, r int) (Map, error) {
	rk, err := m.ForRank(n, sel, r)
	if err != nil {
		return Map{}, err
	}
	if sel.Source != "" {
		m.Selection = sel.Source + "=" + sel.List
	}
	m.Ranks = []Rank{rk}
	return m, nil
}

// Compute returns the binding map of every local rank of node n: rank r
// drives GPU number r/RanksPerGPU in GPU index order. It never gives a
// rank a CPU outside n.CPU.Allowed (less the offline CPUs). The rules,
// fallbacks and warnings are those of docs/cpumap.md.
func Compute(n topology.Node, opts Options) (Map, error) {
	mode, err := ParseMode(string(opts.Mode))
	if err != nil {
		return Map{}, err
	}
	k := opts.RanksPerGPU
	switch {
	case k == 0:
		k = 1
	case k < 0:
		return Map{}, fmt.Errorf("%w: %d ranks per GPU: want at least 1", ErrOptions, k)
	}
	if len(n.GPUs) == 0 && n.NoPCIBus {
		return Map{}, fmt.Errorf("%w seen: the root has no PCI bus in sysfs (sys/bus/pci/devices), so no GPU could be placed: nothing to bind next to", ErrNoGPUs)
	}
	if len(n.GPUs) == 0 {
		return Map{}, fmt.Errorf("%w on this node: nothing to bind next to", ErrNoGPUs)
	}
	c := &computer{n: n, mode: mode, k: k, m: Map{Schema: Schema, Mode: mode, RanksPerGPU: k}}
	if err := c.usableCPUs(); err != nil {
		return Map{}, err
	}
	// Bound the ranks before making them: a GPU's ranks split or share
	// the usable CPUs, so more of them than there are usable CPUs can
	// never be placed (exclusive) or only ever stack up on the same CPUs
	// (node, socket). Exclusive mode's exact per-node count is split's.
	if u := c.usable.Len(); k > u {
		if mode == ModeExclusive {
			return Map{}, fmt.Errorf("%w: %d ranks per GPU for %d usable CPUs (%s)", ErrTooManyRanks, k, u, c.usable)
		}
		return Map{}, fmt.Errorf("%w: %d ranks per GPU: more than the %d usable CPUs (%s)", ErrOptions, k, u, c.usable)
	}
	c.nodeSets()
	gpus := slices.Clone(n.GPUs)
	sortfn.SortStable(gpus, func(a, b topology.GPU) int { return cmp.Compare(a.Index, b.Index) })
	c.places = make([]place, len(gpus))
	for i, g := range gpus {
		c.places[i] = c.locate(g)
	}
	if mode == ModeExclusive {
		if err := c.exclusive(); err != nil {
			return Map{}, err
		}
	} else {
		c.shared()
	}
	// Every rank's warnings once in the map-wide list, after the node's own.
	for i := range c.places {
		c.m.Warnings = append(c.m.Warnings, c.places[i].warnings...)
	}
	if c.m.Warnings == nil {
		c.m.Warnings = []string{}
	}
	for i := range c.m.Ranks {
		if c.m.Ranks[i].Warnings == nil {
			c.m.Ranks[i].Warnings = []string{}
		}
	}
	return c.m, nil
}

// place is where a GPU's CPUs come from.
type place struct {
	gpu int // GPU index
	// node is the NUMA node with CPUs the GPU is bound next to: its own,
	// the nearest one with CPUs for a memory-only node, or the one node
	// holding its CPU affinity when numa_node is -1; -1 when unknown.
	node int
	// affinity is the GPU's CPUs where node is -1 (NVML's CPU affinity,
	// local_cpulist or every usable CPU).
	affinity cpuset.Set
	warnings []string
}

func (p *place) warn(format string, args ...any) {
	p.warnings = append(p.warnings, fmt.Sprintf("GPU %d: ", p.gpu)+fmt.Sprintf(format, args...))
}

type computer struct {
	n    topology.Node
	mode Mode
	k    int
	m    Map
	// usable is the allowed CPUs less the offline ones.
	usable cpuset.Set
	// nodeCPUs is each NUMA node's online CPUs.
	nodeCPUs map[int]cpuset.Set
	// cpuNodes is the IDs of nodes with CPUs, ascending.
	cpuNodes []int
	places   []place
}

func (c *computer) warn(format string, args ...any) {
	c.m.Warnings = append(c.m.Warnings, fmt.Sprintf(format, args...))
}

// usableCPUs is Allowed less the CPUs that are offline.
func (c *computer) usableCPUs() error {
	cpu := c.n.CPU
	if cpu.Allowed.IsEmpty() {
		return fmt.Errorf("%w: Cpus_allowed_list is empty; refusing to bind to CPUs the process may not use", ErrNoAllowedCPUs)
	}
	u := cpu.Allowed.Difference(cpu.Offline)
	if !cpu.Online.IsEmpty() {
		u = u.Intersect(cpu.Online)
	}
	if u.IsEmpty() {
		return fmt.Errorf("%w: every allowed CPU (%s) is offline", ErrNoAllowedCPUs, cpu.Allowed)
	}
	if off := cpu.Allowed.Difference(u); !off.IsEmpty() {
		c.warn("allowed CPUs %s are offline; not used", off)
	}
	c.usable = u
	return nil
}

// online drops offline CPUs from s (a node's or socket's cpulist).
func (c *computer) online(s cpuset.Set) cpuset.Set {
	s = s.Difference(c.n.CPU.Offline)
	if on := c.n.CPU.Online; !on.IsEmpty() {
		s = s.Intersect(on)
	}
	return s
}

func (c *computer) nodeSets() {
	c.nodeCPUs = map[int]cpuset.Set{}
	for _, nd := range c.n.NUMANodes {
		on := c.online(nd.CPUs)
		if off := nd.CPUs.Difference(on); !off.IsEmpty() {
			c.warn("NUMA node %d lists offline CPUs %s in its cpulist; not used", nd.ID, off)
		}
		c.nodeCPUs[nd.ID] = on
		if !on.IsEmpty() {
			c.cpuNodes = append(c.cpuNodes, nd.ID)
		}
	}
	slices.Sort(c.cpuNodes)
}

func (c *computer) numaNode(id int) (topology.NUMANode, bool) {
	for _, nd := range c.n.NUMANodes {
		if nd.ID == id {
			return nd, true
		}
	}
	return topology.NUMANode{}, false
}

// nearest returns the node among cands nearest to node from by from's
// distance table (ties: lowest ID) and the distance; -1 when cands is
// empty. Without a distance table it is the lowest ID, distance 0.
func (c *computer) nearest(from int, cands []int) (int, int) {
	best, bestD := -1, 0
	nd, ok := c.numaNode(from)
	for _, id := range cands {
		d := 0
		if ok {
			d = -1
			for j, other := range c.n.NUMANodes {
				if other.ID == id && j < len(nd.Distances) {
					d = nd.Distances[j]
				}
			}
			if d < 0 {
				d = 1 << 30 // unknown distance: after every known one
			}
		}
		if best == -1 || d < bestD || (d == bestD && id < best) {
			best, bestD = id, d
		}
	}
	return best, bestD
}

// holders is the nodes with CPUs whose CPUs intersect s.
func (c *computer) holders(s cpuset.Set) []int {
	var out []int
	for _, id := range c.cpuNodes {
		if !c.nodeCPUs[id].Intersect(s).IsEmpty() {
			out = append(out, id)
		}
	}
	return out
}

// locate finds the node a GPU's CPUs come from: its resolved Locality
// (topology.ResolveLocality). The node's warnings about the GPU's
// locality go with its ranks.
func (c *computer) locate(g topology.GPU) place {
	p := place{gpu: g.Index, node: -1, warnings: c.n.GPUWarnings(g)}
	loc := g.Locality
	if loc.Node != nil {
		if _, ok := c.nodeCPUs[*loc.Node]; ok {
			p.node = *loc.Node
			return p
		}
		p.warn("its NUMA node %d is not a node of this machine; locality unknown", *loc.Node)
	}
	p.affinity = c.online(loc.CPUs)
	if p.affinity.IsEmpty() {
		p.affinity = c.usable
		p.warn("locality unknown (%s): using all allowed CPUs %s, no memory binding", loc.Source, c.usable)
		return p
	}
	p.warn("its CPUs %s (from %s) span several NUMA nodes: no memory binding", p.affinity, loc.Source)
	return p
}

// socketCPUs is the online CPUs of the socket of node id.
func (c *computer) socketCPUs(id int) (cpuset.Set, bool) {
	nd, ok := c.numaNode(id)
	if !ok || nd.Socket == nil {
		return cpuset.Set{}, false
	}
	for _, s := range c.n.CPU.Sockets {
		if s.ID == *nd.Socket {
			return c.online(s.CPUs), true
		}
	}
	return cpuset.Set{}, false
}

// mems is the memory nodes of a rank on cpus: the nodes holding them; for
// a GPU of unknown locality only when exactly one node does.
func (c *computer) mems(p place, cpus cpuset.Set) cpuset.Set {
	h := c.holders(cpus)
	if p.node < 0 && len(h) != 1 {
		return cpuset.Set{}
	}
	return cpuset.Of(h...)
}

// shared computes node and socket mode: every rank of a GPU gets the
// same set.
func (c *computer) shared() {
	for i := range c.places {
		p := &c.places[i]
		var want cpuset.Set
		var what string
		switch {
		case p.node >= 0 && c.mode == ModeSocket:
			if s, ok := c.socketCPUs(p.node); ok {
				want, what = s, fmt.Sprintf("the socket of node %d", p.node)
			} else {
				p.warn("no socket known for NUMA node %d; using the node's CPUs", p.node)
				want, what = c.nodeCPUs[p.node], fmt.Sprintf("node %d", p.node)
			}
		case p.node >= 0:
			want, what = c.nodeCPUs[p.node], fmt.Sprintf("node %d", p.node)
		case c.mode == ModeSocket:
			want, what = p.affinity, "its CPU affinity"
			var hit []cpuset.Set
			for _, s := range c.n.CPU.Sockets {
				if !s.CPUs.Intersect(p.affinity).IsEmpty() {
					hit = append(hit, c.online(s.CPUs))
				}
			}
			if len(hit) == 1 {
				want, what = hit[0], "the socket holding its CPU affinity"
			}
		default:
			want, what = p.affinity, "its CPU affinity"
		}
		cpus := want.Intersect(c.usable)
		if cpus.IsEmpty() {
			p.warn("none of the CPUs of %s (%s) are allowed (allowed: %s); falling back to the allowed set", what, want, c.usable)
			cpus = c.usable
		}
		mems := c.mems(*p, cpus)
		for range c.k {
			c.m.Ranks = append(c.m.Ranks, Rank{Rank: len(c.m.Ranks), GPU: p.gpu, Node: p.node,
				CPUs: cpus, Mems: mems, Mode: c.mode, Warnings: slices.Clone(p.warnings)})
		}
	}
}

// core is one physical core's usable CPUs.
type core struct{ cpus cpuset.Set }

// nodeCores is the cores of node id with at least one usable CPU, each
// with all its usable CPUs, ordered by first CPU. Usable CPUs of the node
// that no core lists count as cores of their own.
func (c *computer) nodeCores(id int) []core {
	on := c.nodeCPUs[id].Intersect(c.usable)
	var out []core
	var covered cpuset.Set
	for _, co := range c.n.CPU.Cores {
		s := co.CPUs.Intersect(on).Difference(covered)
		if s.IsEmpty() {
			continue
		}
		covered = covered.Union(s)
		out = append(out, core{s})
	}
	for _, cpu := range on.Difference(covered).CPUs() {
		out = append(out, core{cpuset.Of(cpu)})
	}
	sortfn.Sort(out, func(a, b core) int { return cmp.Compare(a.cpus.CPUs()[0], b.cpus.CPUs()[0]) })
	return out
}

// exclusive splits each node's allowed cores among the ranks of the GPUs
// bound to it.
func (c *computer) exclusive() error {
	if len(c.n.CPU.Cores) == 0 {
		c.warn("no core topology (thread_siblings_list); every CPU counts as a core")
	}
	cores := map[int][]core{}
	var withCores []int
	for _, id := range c.cpuNodes {
		cores[id] = c.nodeCores(id)
		if len(cores[id]) > 0 {
			withCores = append(withCores, id)
		}
	}
	if len(withCores) == 0 {
		return fmt.Errorf("%w: no allowed CPU (%s) belongs to a NUMA node", ErrNoAllowedCPUs, c.usable)
	}
	// pool[i] is the node GPU place i takes its share from.
	pool := make([]int, len(c.places))
	count := map[int]int{}
	for i := range c.places {
		p := &c.places[i]
		pool[i] = -1
		if p.node < 0 {
			continue
		}
		pool[i] = p.node
		if len(cores[p.node]) == 0 {
			near, _ := c.nearest(p.node, withCores)
			pool[i] = near
			p.warn("no CPU of NUMA node %d (%s) is allowed (allowed: %s); taking its share from node %d, the nearest with allowed CPUs (remote to the GPU)",
				p.node, c.nodeCPUs[p.node], c.usable, near)
		}
		count[pool[i]]++
	}
	// GPUs of unknown locality join, in index order, the node among those
	// their affinity touches where a rank gets the most cores.
	for i := range c.places {
		p := &c.places[i]
		if p.node >= 0 {
			continue
		}
		cands := slices.DeleteFunc(c.holders(p.affinity.Intersect(c.usable)), func(id int) bool { return len(cores[id]) == 0 })
		if len(cands) == 0 {
			cands = withCores
		}
		best := -1
		for _, id := range cands {
			// cores/(count+1) > best's, compared without division.
			if best < 0 || len(cores[id])*(count[best]+1) > len(cores[best])*(count[id]+1) {
				best = id
			}
		}
		pool[i] = best
		count[best]++
		p.warn("NUMA node unknown; exclusive mode takes its share from node %d (most allowed cores per rank)", best)
	}

	ranks := make([]Rank, len(c.places)*c.k)
	var given cpuset.Set
	for _, id := range withCores {
		var members []int // place indexes, in GPU index order
		for i := range c.places {
			if pool[i] == id {
				members = append(members, i)
			}
		}
		if len(members) == 0 {
			continue
		}
		chunks, err := c.split(id, cores[id], len(members)*c.k)
		if err != nil {
			return err
		}
		for j, i := range members {
			p := &c.places[i]
			for s := range c.k {
				cpus := chunks[j*c.k+s]
				given = given.Union(cpus)
				r := i*c.k + s
				ranks[r] = Rank{Rank: r, GPU: p.gpu, Node: p.node, CPUs: cpus, Mems: c.mems(*p, cpus),
					Mode: c.mode, Warnings: slices.Clone(p.warnings)}
			}
		}
	}
	c.m.Ranks = ranks
	c.m.Leftover = c.usable.Difference(given)
	return nil
}

// split cuts a node's cores into n contiguous chunks of equal size (whole
// cores); the remainder is left over with a warning. With fewer cores than
// chunks it splits the hardware threads instead, if there are enough.
func (c *computer) split(id int, cores []core, n int) ([]cpuset.Set, error) {
	units := make([]cpuset.Set, 0, len(cores))
	for _, co := range cores {
		units = append(units, co.cpus)
	}
	what := "cores"
	if len(cores) < n {
		var threads []cpuset.Set
		for _, co := range cores {
			for _, cpu := range co.cpus.CPUs() {
				threads = append(threads, cpuset.Of(cpu))
			}
		}
		if len(threads) < n {
			return nil, fmt.Errorf("%w on node %d: %d ranks (%d per GPU) for %d allowed cores (%d allowed CPUs: %s)",
				ErrTooManyRanks, id, n, c.k, len(cores), len(threads), c.nodeCPUs[id].Intersect(c.usable))
		}
		c.warn("node %d: %d ranks for only %d allowed cores; splitting hardware threads instead (SMT siblings go to different ranks)", id, n, len(cores))
		units, what = threads, "CPUs"
	}
	per := len(units) / n
	chunks := make([]cpuset.Set, n)
	for i := range n {
		var s cpuset.Set
		for _, u := range units[i*per : (i+1)*per] {
			s = s.Union(u)
		}
		chunks[i] = s
	}
	if rest := units[n*per:]; len(rest) > 0 {
		var s cpuset.Set
		for _, u := range rest {
			s = s.Union(u)
		}
		c.warn("node %d: %d allowed %s do not split evenly among %d ranks; %d %s left over (CPUs %s)", id, len(units), what, n, len(rest), what, s)
	}
	return chunks, nil
}

// ForRank returns the binding of local rank r of a process that drives
// the GPUs of sel (topology.VisibleGPUs): r drives the GPU sel.Rank gives
// and takes that GPU's slot r % RanksPerGPU of the map. The map is the
// node's (every GPU's share), so ranks of processes that see different
// GPUs never share a CPU in exclusive mode. The rank is renumbered r.
func (m Map) ForRank(n topology.Node, sel topology.Selection, r int) (Rank, error) {
	gpu, slot, err := sel.Rank(n, r, m.RanksPerGPU)
	if err != nil {
		return Rank{}, fmt.Errorf("%w: %w", ErrNoRank, err)
	}
	seen := 0
	for _, rk := range m.Ranks {
		if rk.GPU != gpu {
			continue
		}
		if seen == slot {
			rk.Rank = r
			rk.Warnings = slices.Clone(rk.Warnings)
			return rk, nil
		}
		seen++
	}
	return Rank{}, fmt.Errorf("%w: local rank %d: the %s map has no slot %d for GPU %d", ErrNoRank, r, m.Mode, slot, gpu)
}

// ForSelection returns the map with one rank per local rank of a process
// that drives the GPUs of sel, in local rank order (ForRank for each):
// RanksPerGPU ranks per GPU of sel. Every GPU of the node in index order
// gives the map unchanged.
func (m Map) ForSelection(n topology.Node, sel topology.Selection) (Map, error) {
	out := m
	if sel.Source != "" {
		out.Selection = sel.Source + "=" + sel.List
	}
	out.Ranks = make([]Rank, 0, sel.Count()*max(m.RanksPerGPU, 1))
	for r := range sel.Count() * max(m.RanksPerGPU, 1) {
		rk, err := m.ForRank(n, sel, r)
		if err != nil {
			return Map{}, err
		}
		out.Ranks = append(out.Ranks, rk)
	}
	return out, nil
}
