package nodeview

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"github.com/gpuaffinity/gpuaffinity/placement"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Describe is the fleet's view of one node as its own agent sees it: the
// discovery n, the placement the agent read (nil: none) and the node's
// name. The agent renders gpuaffinity_node_placement_info and
// gpuaffinity_node_layout_info from it; Target is left empty.
func Describe(n *topology.Node, pl *placement.Placement, name string) Node {
	layout, firmware := NodeFacts(n)
	out := Node{
		Name:     name,
		Model:    cmp.Or(n.Platform.InstanceType, instanceType(pl), n.Platform.ProductName),
		GPUModel: gpuModel(n),
		Cloud:    string(n.Platform.Cloud),
		Clique:   topology.NVLinkClique(*n),
		Layout:   Digest(layout),
		Firmware: Digest(firmware),
		Facts:    SortFacts(append(layout, firmware...)),
	}
	if c := n.NVLinkFabric.IMEX.Config; c != nil && c.Nodes != nil {
		out.IMEXNodes = *c.Nodes
	}
	out.ChassisSerial, out.Slot, out.Tray = chassis(n)
	if pl != nil {
		out.Tiers = slices.Clone(pl.Tiers)
		out.HostID = pl.Host
		out.GPUMemoryFabric = pl.NVLinkDomain
	}
	return out
}

// instanceType is the VM type the agent read from the metadata service
// (GCP, Azure, whose DMI names only the hypervisor).
func instanceType(pl *placement.Placement) string {
	if pl == nil {
		return ""
	}
	return pl.InstanceType
}

// gpuModel is the model name most of n's GPUs report (the first such in
// index order on a tie); "" without GPUs.
func gpuModel(n *topology.Node) string {
	counts := map[string]int{}
	best := ""
	for _, g := range n.GPUs {
		counts[g.Model]++
		if counts[g.Model] > counts[best] {
			best = g.Model
		}
	}
	return best
}

// chassis is the rack position NVML's platform info gives n's GPUs, where
// every GPU that reports one agrees; "" each where none reports it or
// they disagree (no one position to name).
func chassis(n *topology.Node) (serial, slot, tray string) {
	var p *topology.GPUPlatform
	for _, g := range n.GPUs {
		if g.Platform == nil {
			continue
		}
		if p != nil && (p.ChassisSerial != g.Platform.ChassisSerial || p.Slot != g.Platform.Slot || p.Tray != g.Platform.Tray) {
			return "", "", ""
		}
		p = g.Platform
	}
	if p == nil {
		return "", "", ""
	}
	return p.ChassisSerial, strconv.Itoa(p.Slot), strconv.Itoa(p.Tray)
}

// NodeFacts are the itemized facts of n that its layout and firmware
// digests cover, each as the agent's series show it, so that the fleet
// reader rebuilds the same facts from them (package fleet/prom):
//
//	gpus                  the number of GPUs (gpuaffinity_gpu_info series)
//	gpu<i>.model          GPU i's model (gpu_info's model)
//	gpu<i>.nics           GPU i's compute NICs and their class, "mlx5_0 PIX",
//	                      NICs comma-separated; "none" without one
//	                      (topology_pair_info, topology_best_nic_class 0)
//	nic.<dev>.role        the RDMA device's role (rdma_info's role)
//	nic.<dev>.fabric      its fabric (rdma_info's fabric)
//	nic.<dev>.firmware    its firmware version (rdma_info's firmware)
//
// The last is the firmware digest's; the others are the layout's. The
// GPU↔NIC facts are the pairing in use: a compute NIC whose port is down
// moves its GPU to another NIC, and the node then differs from its peers
// until the port is back (the health gate names the port).
func NodeFacts(n *topology.Node) (layout, firmware []Fact) {
	layout = append(layout, Fact{KeyGPUs, strconv.Itoa(len(n.GPUs))})
	pairs := map[int]*topology.Pair{}
	for i := range n.Pairs {
		pairs[n.Pairs[i].GPU] = &n.Pairs[i]
	}
	for _, g := range n.GPUs {
		gpu := strconv.Itoa(g.Index)
		layout = append(layout, Fact{GPUKey(gpu, "model"), g.Model})
		layout = append(layout, Fact{GPUKey(gpu, "nics"), PairFact(pairNICs(pairs[g.Index]))})
	}
	for _, c := range n.NICs {
		if c.RDMADevice == "" {
			continue
		}
		layout = append(layout, Fact{NICKey(c.RDMADevice, "role"), string(c.Role)}, Fact{NICKey(c.RDMADevice, "fabric"), string(c.Fabric)})
		firmware = append(firmware, Fact{NICKey(c.RDMADevice, "firmware"), c.FirmwareVersion})
	}
	return SortFacts(layout), SortFacts(firmware)
}

// Fact keys, NodeFacts' and the fleet reader's (fleet/prom), which
// rebuilds them from the series: "gpus", "gpu<i>.<field>",
// "nic.<device>.<field>".
const KeyGPUs = "gpus"

// GPUKey is the key of field (model, nics) of the GPU of index gpu.
func GPUKey(gpu, field string) string { return "gpu" + gpu + "." + field }

// NICKey is the key of field (role, fabric, firmware) of RDMA device dev.
func NICKey(dev, field string) string { return "nic." + dev + "." + field }

// pairNICs are the NICs and class the exporter's topology_pair_info
// series give p: none where it has no NIC or no class.
func pairNICs(p *topology.Pair) (nics []string, class string) {
	if p == nil || len(p.NICs) == 0 || p.Class == topology.ClassUnknown {
		return nil, ""
	}
	return p.NICs, p.Class.String()
}

// PairFact is the value of a gpu<i>.nics fact: the NICs sorted and
// comma-separated, a space, the class; "none" without NICs.
func PairFact(nics []string, class string) string {
	if len(nics) == 0 {
		return "none"
	}
	s := slices.Clone(nics)
	slices.Sort(s)
	return strings.Join(s, ",") + " " + class
}

// Digest is a short digest of facts: the first 8 bytes of the SHA-256 of
// their "key=value\n" lines in key order, in hex. Nodes with the same
// facts have the same digest.
func Digest(facts []Fact) string {
	h := sha256.New()
	for _, f := range SortFacts(slices.Clone(facts)) {
		h.Write([]byte(strconv.Quote(f.Key) + "=" + strconv.Quote(f.Value) + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// SortFacts sorts facts by key (then value) in place and returns them.
func SortFacts(facts []Fact) []Fact {
	sortfn.Sort(facts, func(a, b Fact) int { return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Value, b.Value)) })
	return facts
}
