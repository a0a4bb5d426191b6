package render

import (
	"cmp"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// graph is the picture DOT and Mermaid both draw: NUMA clusters holding
// host bridges, the bridges and switches on the way to each GPU and NIC,
// the GPUs and NICs as leaves, the pairs, and the NVLinks. It is built once
// from the Node, in a deterministic order, and holds raw (unescaped) text;
// each format escapes it its own way.
type graph struct {
	title    string
	clusters []cluster
	// loose are the nodes in no cluster (the NVSwitch fabric).
	loose []gnode
	edges []gedge
}

// cluster is one NUMA node, or the devices whose NUMA node is unknown.
type cluster struct {
	key   string // "numa0", "numa_unknown"
	lines []string
	nodes []gnode
}

type nodeKind int

const (
	kindHostBridge nodeKind = iota
	kindBridge              // root port or other PCI bridge
	kindSwitch              // a PCIe switch: upstream port and its downstream ports
	kindGPU
	kindNIC
	kindNVMe // an NVMe controller (storage.nvme)
	kindNVSwitch
	kindEmpty // placeholder for a NUMA node with nothing drawn in it
)

// gnode is one box of the picture.
type gnode struct {
	key   string // unique and stable: "gpu:0", "nic:3", "nvme:0", "pci:0000:17:00.0", "hb:pci0000:15"
	kind  nodeKind
	lines []string
	// storage marks a NIC whose role is storage, drawn in its own colour.
	storage bool
}

type edgeKind int

const (
	edgeTree      edgeKind = iota // PCI parent -> child
	edgePair                      // a decided GPU -> NIC pair
	edgeUndecided                 // a pair chosen by order among tied NICs
	edgeNVLink                    // GPU -- GPU or GPU -- NVSwitch
)

type gedge struct {
	from, to string
	kind     edgeKind
	label    string
}

// numaUnknown is the cluster key of devices without a NUMA node.
const numaUnknown = -1

// buildGraph draws n. Only the PCI functions on the way from a host bridge
// to a GPU, NIC or PCIe NVMe controller appear; a switch's upstream and downstream ports are one
// node named for the upstream port.
func buildGraph(n topology.Node) graph {
	b := &builder{
		n:       n,
		pci:     make(map[string]topology.PCIDevice, len(n.PCIDevices)),
		nodes:   map[string]gnode{},
		numaOf:  map[string]int{},
		hbOf:    map[string]string{},
		edges:   map[gedge]bool{},
		hbNUMA:  map[string]int{},
		hbGuess: map[string]int{},
	}
	for _, d := range n.PCIDevices {
		b.pci[d.BusID] = d
	}
	b.leaves()
	b.pairs()
	b.nvlinks()
	return b.graph()
}

type builder struct {
	n      topology.Node
	pci    map[string]topology.PCIDevice
	nodes  map[string]gnode
	numaOf map[string]int    // node key -> NUMA node, for keys placed directly
	hbOf   map[string]string // node key -> its host bridge
	edges  map[gedge]bool
	hbNUMA map[string]int // host bridge -> lowest NUMA node seen below it
	// hbGuess is the NUMA node of host bridges whose devices have none,
	// from their CPU lists.
	hbGuess map[string]int
	loose   []gnode
}

func gpuKey(index int) string { return "gpu:" + strconv.Itoa(index) }
func nicKey(i int) string     { return "nic:" + strconv.Itoa(i) }
func nvmeKey(i int) string    { return "nvme:" + strconv.Itoa(i) }

// graph sorts what was built into clusters, nodes and edges.
func (b *builder) graph() graph {
	var g graph
	g.title = title(b.n)
	byNUMA := map[int][]gnode{}
	for key, node := range b.nodes {
		id, ok := b.numaOf[key]
		if !ok {
			hb := b.hbOf[key]
			id = numaUnknown
			if nn, known := b.hbNUMA[hb]; known {
				id = nn
			} else if nn, guessed := b.hbGuess[hb]; guessed {
				id = nn
				if node.kind == kindHostBridge {
					node.lines = append(slices.Clone(node.lines), inferredNUMA)
				}
			}
		}
		byNUMA[id] = append(byNUMA[id], node)
	}
	ids := make([]int, 0, len(b.n.NUMANodes)+len(byNUMA))
	described := map[int]topology.NUMANode{}
	for _, nn := range b.n.NUMANodes {
		described[nn.ID] = nn
		ids = append(ids, nn.ID)
	}
	for id := range byNUMA {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > 0 && ids[0] == numaUnknown {
		ids = append(ids[1:], numaUnknown) // unknown last
	}
	for _, id := range ids {
		c := cluster{key: "numa" + strconv.Itoa(id)}
		if id == numaUnknown {
			c.key, c.lines = "numa_unknown", []string{"NUMA node unknown"}
		} else {
			c.lines = numaLines(id, described[id])
		}
		c.nodes = byNUMA[id]
		sortfn.Sort(c.nodes, func(x, y gnode) int {
			return cmp.Or(cmp.Compare(x.kind, y.kind), compareKeys(x.key, y.key))
		})
		if len(c.nodes) == 0 {
			c.nodes = []gnode{{key: c.key + ":empty", kind: kindEmpty, lines: []string{"no GPU or NIC"}}}
		}
		g.clusters = append(g.clusters, c)
	}
	g.loose = b.loose
	if len(g.clusters) == 0 && len(g.loose) == 0 {
		g.loose = []gnode{{key: "empty", kind: kindEmpty, lines: []string{"no GPU or NIC"}}}
	}
	for e := range b.edges {
		g.edges = append(g.edges, e)
	}
	sortfn.Sort(g.edges, func(x, y gedge) int {
		return cmp.Or(cmp.Compare(x.kind, y.kind), compareKeys(x.from, y.from),
			compareKeys(x.to, y.to), strings.Compare(x.label, y.label))
	})
	return g
}

// compareKeys orders keys with numbers compared as numbers, so "gpu:10"
// follows "gpu:9".
func compareKeys(a, b string) int {
	pa, na, oka := splitNum(a)
	pb, nb, okb := splitNum(b)
	if oka && okb && pa == pb {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(a, b)
}

func splitNum(key string) (prefix string, n int, ok bool) {
	i := strings.LastIndexByte(key, ':')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(key[i+1:])
	return key[:i], n, err == nil
}

func numaLines(id int, nn topology.NUMANode) []string {
	lines := []string{fmt.Sprintf("NUMA node %d", id)}
	if !nn.CPUs.IsEmpty() {
		lines = append(lines, "CPUs "+nn.CPUs.String())
	} else if nn.MemoryBytes > 0 {
		lines = append(lines, "memory only")
	}
	if nn.MemoryBytes > 0 {
		lines = append(lines, "memory "+bytesHuman(nn.MemoryBytes))
	}
	return lines
}

func numaID(p *int) int {
	if p == nil || *p < 0 {
		return numaUnknown
	}
	return *p
}

// title names the machine: hostname and platform, where known.
func title(n topology.Node) string {
	var parts []string
	if n.Hostname != "" {
		parts = append(parts, n.Hostname)
	}
	if n.Platform.InstanceType != "" {
		parts = append(parts, n.Platform.InstanceType)
	} else if n.Platform.ProductName != "" {
		parts = append(parts, n.Platform.ProductName)
	}
	if len(parts) == 0 {
		return "gpuaffinity topology"
	}
	return strings.Join(parts, " ")
}
