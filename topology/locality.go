package topology

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
)

// LocalitySource names the fact that decided a GPU's Locality.
type LocalitySource string

const (
	// LocalityNUMANode: the PCI function's numa_node, a node with CPUs.
	LocalityNUMANode LocalitySource = "numa_node"
	// LocalityMemoryNode: the PCI function's numa_node has no CPUs (a
	// memory-only node); the nearest node with CPUs by its distance table.
	LocalityMemoryNode LocalitySource = "numa_node_nearest_cpus"
	// LocalityGPUMemory: numa_node is unknown and NVML names the GPU's own
	// memory node (GetNumaNodeId, Grace C2C); the nearest node with CPUs.
	LocalityGPUMemory LocalitySource = "gpu_numa_id"
	// LocalityNVML: numa_node is unknown; NVML's CPU affinity.
	LocalityNVML LocalitySource = "nvml_cpu_affinity"
	// LocalityLocalCPUs: numa_node is unknown and NVML gives no affinity;
	// the PCI function's local_cpulist.
	LocalityLocalCPUs LocalitySource = "local_cpulist"
	// LocalityOnlyNode: no source says, and one NUMA node has CPUs.
	LocalityOnlyNode LocalitySource = "only_cpu_node"
	// LocalityNone: no source says; CPUs is empty.
	LocalityNone LocalitySource = "none"
)

// Locality is where a GPU sits among the CPUs and memory: the one answer
// every output (topo, env, cpumap, exec, gres, metrics) gives for the
// GPU's CPUs and NUMA node. ResolveLocality decides it, in the order of
// docs/topology-json.md ("Locality").
type Locality struct {
	// CPUs are the GPU's local CPUs, online ones only: the CPUs of Node,
	// or the CPU set the source gave where no single node holds it.
	// Empty when unknown. The process's allowed CPUs are not applied.
	CPUs cpuset.Set `json:"cpus"`
	// NUMANodes are the nodes with CPUs that hold CPUs, ascending.
	NUMANodes []int `json:"numa_nodes"`
	// Node is the one NUMA node the GPU's CPUs and memory come from; nil
	// where CPUs span several nodes or nothing is known.
	Node *int `json:"node"`
	// Source is the fact that decided.
	Source LocalitySource `json:"source"`
}

// ResolveLocality sets every GPU's Locality from its numa_node, NVML's
// CPU affinity and GPU memory node, and its local_cpulist, and returns a
// warning for each GPU whose sources disagree (naming both values) or
// whose locality is unknown or ambiguous. It does no I/O.
func ResolveLocality(n *Node) []string {
	r := localityResolver{n: n, on: make([]cpuset.Set, len(n.NUMANodes))}
	for j, nd := range n.NUMANodes {
		r.on[j] = r.online(nd.CPUs)
	}
	var warns []string
	for i := range n.GPUs {
		loc, ws := r.resolve(n.GPUs[i])
		n.GPUs[i].Locality = loc
		warns = append(warns, ws...)
	}
	return warns
}

type localityResolver struct {
	n  *Node
	on []cpuset.Set // the online CPUs of each of n.NUMANodes, by index
}

// node is the NUMA node id and its index in n.NUMANodes.
func (r localityResolver) node(id int) (NUMANode, int, bool) {
	i := slices.IndexFunc(r.n.NUMANodes, func(nd NUMANode) bool { return nd.ID == id })
	if i < 0 {
		return NUMANode{}, -1, false
	}
	return r.n.NUMANodes[i], i, true
}

// online drops offline CPUs from s.
func (r localityResolver) online(s cpuset.Set) cpuset.Set {
	s = s.Difference(r.n.CPU.Offline)
	if on := r.n.CPU.Online; !on.IsEmpty() {
		s = s.Intersect(on)
	}
	return s
}

// holders is the IDs of the nodes with online CPUs that meet s.
func (r localityResolver) holders(s cpuset.Set) []int {
	var out []int
	for j, nd := range r.n.NUMANodes {
		if r.on[j].Intersects(s) {
			out = append(out, nd.ID)
		}
	}
	slices.Sort(out)
	return out
}

// cpuNodes is the IDs of the nodes with online CPUs.
func (r localityResolver) cpuNodes() []int {
	var out []int
	for j, nd := range r.n.NUMANodes {
		if !r.on[j].IsEmpty() {
			out = append(out, nd.ID)
		}
	}
	return out
}

// nearestCPUNode is the node with online CPUs nearest to node from by
// from's distance table (ties: lowest ID), and that distance.
func (r localityResolver) nearestCPUNode(from NUMANode) (int, int, bool) {
	best, bestD := -1, 0
	for j, nd := range r.n.NUMANodes {
		if r.on[j].IsEmpty() {
			continue
		}
		d := 1 << 30 // unknown distance: after every known one
		if j < len(from.Distances) {
			d = from.Distances[j]
		}
		if best < 0 || d < bestD {
			best, bestD = nd.ID, d
		}
	}
	return best, bestD, best >= 0
}

func (r localityResolver) atNode(id int, src LocalitySource) Locality {
	var cpus cpuset.Set
	if _, j, known := r.node(id); known {
		cpus = r.on[j]
	}
	return Locality{CPUs: cpus, NUMANodes: []int{id}, Node: &id, Source: src}
}

func (r localityResolver) fromCPUs(s cpuset.Set, src LocalitySource) Locality {
	s = r.online(s)
	loc := Locality{CPUs: s, NUMANodes: r.holders(s), Source: src}
	if len(loc.NUMANodes) == 1 {
		id := loc.NUMANodes[0]
		loc.Node = &id
	}
	return loc
}

func (r localityResolver) resolve(g GPU) (Locality, []string) {
	name := fmt.Sprintf("GPU %d (%s)", g.Index, g.BusID)
	var warns []string
	warn := func(format string, args ...any) {
		warns = append(warns, name+": "+fmt.Sprintf(format, args...))
	}
	loc, ok := Locality{Source: LocalityNone}, false
	if g.NUMANode != nil {
		id := *g.NUMANode
		switch nd, j, known := r.node(id); {
		case !known:
			warn("numa_node %d names no NUMA node of this machine; ignored", id)
		case !r.on[j].IsEmpty():
			loc, ok = r.atNode(id, LocalityNUMANode), true
		default:
			if near, d, found := r.nearestCPUNode(nd); found {
				loc, ok = r.atNode(near, LocalityMemoryNode), true
				warn("numa_node %d has no CPUs (memory-only); its CPUs and memory are those of the nearest node with CPUs, node %d (distance %d)", id, near, d)
			} else {
				warn("numa_node %d has no CPUs and no node has any; locality unknown", id)
			}
		}
	}
	if !ok && g.GPUNUMAID != nil {
		if nd, j, known := r.node(*g.GPUNUMAID); known && r.on[j].IsEmpty() {
			if near, _, found := r.nearestCPUNode(nd); found {
				loc, ok = r.atNode(near, LocalityGPUMemory), true
			}
		}
	}
	if !ok && !g.NVMLCPUAffinity.IsEmpty() {
		loc, ok = r.fromCPUs(g.NVMLCPUAffinity, LocalityNVML), true
	}
	if !ok && !g.LocalCPUs.IsEmpty() {
		loc, ok = r.fromCPUs(g.LocalCPUs, LocalityLocalCPUs), true
	}
	if !ok {
		if withCPUs := r.cpuNodes(); len(withCPUs) == 1 {
			return r.atNode(withCPUs[0], LocalityOnlyNode), warns
		}
		warn("no source gives its CPUs (numa_node -1, no NVML CPU affinity, no local_cpulist); locality unknown")
		return loc, warns
	}
	// One warning per GPU whose locality is not its numa_node's, on a
	// machine where that matters (several NUMA nodes with CPUs), naming
	// every source that disagrees.
	var disagree []string
	for _, o := range []struct {
		src  LocalitySource
		cpus cpuset.Set
	}{{LocalityNVML, g.NVMLCPUAffinity}, {LocalityLocalCPUs, g.LocalCPUs}} {
		if o.src == loc.Source || o.cpus.IsEmpty() {
			continue
		}
		if h := r.holders(r.online(o.cpus)); !slices.Equal(h, loc.NUMANodes) {
			disagree = append(disagree, describeCPUs(o.src, o.cpus, h))
		}
	}
	switch {
	case len(disagree) > 0:
		msg := fmt.Sprintf("sources disagree: using %s; %s", describe(loc.Source, g, loc), strings.Join(disagree, "; "))
		if loc.Node == nil {
			msg += "; no single NUMA node for its CPUs and memory"
		}
		warn("%s", msg)
	case loc.Source == LocalityNUMANode || loc.Source == LocalityMemoryNode || len(r.cpuNodes()) < 2:
	case loc.Node == nil:
		warn("numa_node is -1; %s spans NUMA nodes %s: no single NUMA node for its CPUs and memory", describeCPUs(loc.Source, loc.CPUs, nil), cpuset.Of(loc.NUMANodes...))
	default:
		warn("numa_node is -1; locality from %s", describe(loc.Source, g, loc))
	}
	return loc, warns
}

// describe says what the deciding source gave.
func describe(src LocalitySource, g GPU, loc Locality) string {
	switch src {
	case LocalityNUMANode, LocalityMemoryNode:
		return fmt.Sprintf("numa_node %d (CPUs %s)", *g.NUMANode, loc.CPUs)
	case LocalityGPUMemory:
		return fmt.Sprintf("gpu_numa_id %d (CPUs %s)", *g.GPUNUMAID, loc.CPUs)
	}
	return describeCPUs(src, loc.CPUs, loc.NUMANodes)
}

func describeCPUs(src LocalitySource, cpus cpuset.Set, nodes []int) string {
	if nodes == nil {
		return fmt.Sprintf("%s %s", src, cpus)
	}
	where := "no NUMA node"
	switch len(nodes) {
	case 0:
	case 1:
		where = fmt.Sprintf("NUMA node %d", nodes[0])
	default:
		where = "NUMA nodes " + cpuset.Of(nodes...).String()
	}
	return fmt.Sprintf("%s %s (%s)", src, cpus, where)
}

// GPUWarnings returns the node's warnings about GPU g: those that name it
// as "GPU <index> (<bus id>): ", as ResolveLocality and discovery write
// them. Outputs for one GPU (a rank's env, its binding) repeat them.
func (n Node) GPUWarnings(g GPU) []string {
	prefix := fmt.Sprintf("GPU %d (%s): ", g.Index, g.BusID)
	var out []string
	for _, w := range n.Warnings {
		if strings.HasPrefix(w, prefix) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}
