package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// leaves adds every GPU, NIC and PCIe NVMe controller with the PCI chain
// above it.
func (b *builder) leaves() {
	for _, g := range b.n.GPUs {
		lines := []string{fmt.Sprintf("GPU%d", g.Index)}
		if g.Model != "" {
			lines = append(lines, g.Model)
		}
		lines = append(lines, g.BusID)
		if g.State != "" && g.State != topology.GPUOK {
			lines = append(lines, "state "+string(g.State))
		}
		b.leaf(gnode{key: gpuKey(g.Index), kind: kindGPU, lines: lines}, g.BusID, g.NUMANode, gpuCPUs(g))
	}
	for i, nic := range b.n.NICs {
		title := fmt.Sprintf("NIC%d %s", i, nic.Name)
		if len(nic.Netdevs) > 0 && !slices.Equal(nic.Netdevs, []string{nic.Name}) {
			title += " (" + strings.Join(nic.Netdevs, ", ") + ")"
		}
		desc := strings.TrimSpace(strings.Join([]string{string(nic.Fabric), rate(nic), string(nic.Role)}, " "))
		lines := []string{title}
		if desc != "" {
			lines = append(lines, strings.Join(strings.Fields(desc), " "))
		}
		if nic.BusID != "" {
			lines = append(lines, nic.BusID)
		}
		b.leaf(gnode{key: nicKey(i), kind: kindNIC, lines: lines, storage: nic.Role == topology.RoleStorage}, nic.BusID, nic.NUMANode, nic.LocalCPUs)
	}
	for i, d := range b.n.Storage.NVMe {
		if d.BusID == "" {
			continue // NVMe over fabrics: no PCI function of its own
		}
		lines := []string{d.Name}
		if d.Model != "" {
			lines = append(lines, d.Model)
		}
		lines = append(lines, d.BusID)
		if d.Use != "" {
			lines = append(lines, string(d.Use))
		}
		b.leaf(gnode{key: nvmeKey(i), kind: kindNVMe, lines: lines}, d.BusID, d.NUMANode, b.pci[d.BusID].LocalCPUs)
	}
}

// leaf adds one GPU, NIC or NVMe controller and walks its Parent chain up to the host
// bridge, adding each bridge (switch ports collapsed) and tree edge. The
// NUMA node is the first one known along the chain; where none is (VMs),
// it is the one NUMA node whose CPUs meet the device's CPUs, as
// `nvidia-smi topo -m` prints NUMA Affinity, and the picture says so.
func (b *builder) leaf(node gnode, busID string, numa *int, cpus cpuset.Set) {
	dev, onBus := b.pci[busID]
	if cpus.IsEmpty() {
		cpus = dev.LocalCPUs
	}
	hb := dev.HostBridge
	if numa == nil {
		numa = dev.NUMANode
	}
	child := node.key
	chain := []string{node.key}
	seen := map[string]bool{busID: true}
	for parent := dev.Parent; onBus && parent != "" && !seen[parent]; {
		seen[parent] = true
		p, ok := b.pci[parent]
		if !ok {
			break // the chain leaves the model: hang the rest on the host bridge
		}
		if hb == "" {
			hb = p.HostBridge
		}
		if numa == nil {
			numa = p.NUMANode
		}
		key, up := b.bridge(p)
		if key != child {
			b.edges[gedge{from: key, to: child, kind: edgeTree}] = true
			chain = append(chain, key)
		}
		child = key
		parent = up
	}
	guess := numa == nil
	if guess {
		numa = b.numaByCPUs(cpus)
	}
	if hb == "" {
		// Not on the PCI tree the model holds: place it by its own NUMA node.
		if guess && numa != nil {
			node.lines = append(node.lines, inferredNUMA)
		}
		b.nodes[node.key] = node
		b.numaOf[node.key] = numaID(numa)
		return
	}
	b.nodes[node.key] = node
	hbKey := "hb:" + hb
	b.nodes[hbKey] = gnode{key: hbKey, kind: kindHostBridge, lines: []string{"host bridge", hb}}
	b.edges[gedge{from: hbKey, to: child, kind: edgeTree}] = true
	b.hbOf[hbKey] = hb
	for _, key := range chain {
		b.hbOf[key] = hb
	}
	if numa != nil && *numa >= 0 {
		m := b.hbNUMA
		if guess {
			m = b.hbGuess
		}
		if cur, ok := m[hb]; !ok || *numa < cur {
			m[hb] = *numa
		}
	}
}

// inferredNUMA marks a box placed in its NUMA node by CPU list.
const inferredNUMA = "NUMA node from CPU list"

// numaByCPUs returns the one NUMA node whose CPUs meet cpus; nil when none
// or several do.
func (b *builder) numaByCPUs(cpus cpuset.Set) *int {
	var found *int
	for _, nn := range b.n.NUMANodes {
		if nn.CPUs.Intersect(cpus).IsEmpty() {
			continue
		}
		if found != nil {
			return nil
		}
		found = &nn.ID
	}
	return found
}

// bridge adds the node for bridge p and returns its key and the bus id
// to continue the walk from. A switch downstream port below an upstream
// port is drawn as the upstream port's switch.
func (b *builder) bridge(p topology.PCIDevice) (key, up string) {
	if p.Kind == topology.KindSwitchDownstream {
		if usp, ok := b.pci[p.Parent]; ok && usp.Kind == topology.KindSwitchUpstream {
			p = usp
		}
	}
	key = "pci:" + p.BusID
	var lines []string
	kind := kindBridge
	switch p.Kind {
	case topology.KindSwitchUpstream:
		kind, lines = kindSwitch, []string{"PCIe switch", p.BusID}
	case topology.KindRootPort:
		lines = []string{"root port", p.BusID}
	case topology.KindSwitchDownstream:
		lines = []string{"switch port", p.BusID}
	default:
		lines = []string{"bridge", p.BusID}
	}
	b.nodes[key] = gnode{key: key, kind: kind, lines: lines}
	return key, p.Parent
}
