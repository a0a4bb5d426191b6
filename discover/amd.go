package discover

import (
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"

	"github.com/gpuaffinity/gpuaffinity/kfd"
	"github.com/gpuaffinity/gpuaffinity/pci"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// isAMDGPU: an AMD (0x1002) processing accelerator (class 0x12: MI300X,
// MI325X, MI350X, their VFs) or "other display" / 3D controller (0x0380,
// 0x0302: MI200, MI100), the classes amdgpu gives Instinct parts. A VGA
// controller (0x0300) is a Radeon or a server's display, not a compute
// GPU gpuaffinity pairs with NICs.
func isAMDGPU(d *pci.Device) bool {
	sub := d.Class >> 8
	return d.Vendor == 0x1002 && (d.Class>>16 == 0x12 || sub == 0x0380 || sub == 0x0302)
}

// amdGPUs builds the AMD GPUs: each PCI function of isAMDGPU, matched to
// its KFD nodes by PCI address, in KFD node order (the order HIP and
// ROCr number devices in); GPUs KFD does not list follow in bus order.
// Indexes start at first (after the NVIDIA GPUs).
func amdGPUs(devs []pci.Device, t kfd.Topology, first int, warn func(...error)) []topology.GPU {
	type kgpu struct {
		nodes []kfd.Node
	}
	byAddr := map[pci.Address]*kgpu{}
	var order []pci.Address // by first KFD node
	denied, unplaced := 0, 0
	ordinal := map[int]int{} // KFD node id -> HIP ordinal
	next := 0
	for _, n := range t.Nodes {
		if !n.IsGPU() {
			continue
		}
		switch {
		case n.Denied:
			denied++
			continue
		case n.PCI == nil:
			unplaced++
			ordinal[n.ID] = next
			next++
			continue
		}
		ordinal[n.ID] = next
		next++
		k := byAddr[*n.PCI]
		if k == nil {
			k = &kgpu{}
			byAddr[*n.PCI] = k
			order = append(order, *n.PCI)
		}
		k.nodes = append(k.nodes, n)
	}
	if unplaced > 0 {
		warn(fmt.Errorf("KFD lists %d GPU node(s) whose PCI address does not decode: not matched to a GPU, HIP device ordinals may not be what they say", unplaced))
	}

	rank := map[pci.Address]int{}
	for i, a := range order {
		rank[a] = i
	}
	var out []topology.GPU
	addrOf := map[string]pci.Address{} // bus id -> address, of out's GPUs
	for i := range devs {
		d := &devs[i]
		if !isAMDGPU(d) {
			continue
		}
		g := topology.GPU{
			BusID: d.Address.String(), Vendor: fmt.Sprintf("0x%04x", d.Vendor), Device: fmt.Sprintf("0x%04x", d.DeviceID),
			Model:    acceleratorNames[fmt.Sprintf("0x%04x:0x%04x", d.Vendor, d.DeviceID)],
			NUMANode: d.NUMANode, LocalCPUs: d.LocalCPUs, NVLinks: []topology.NVLink{},
			PCIe: topology.PCIe{Gen: pci.Gen(d.CurrentLinkSpeed), Width: d.CurrentLinkWidth,
				MaxGen: pci.Gen(d.MaxLinkSpeed), MaxWidth: d.MaxLinkWidth},
		}
		if g.Model == "" {
			g.Model = fmt.Sprintf("AMD GPU %04x", d.DeviceID)
		}
		if k := byAddr[d.Address]; k != nil {
			g.State = topology.GPUOK
			g.InfoSource = "kfd"
			g.AMD = amdInfo(k.nodes, ordinal)
			fillAMDHealth(g.AMD, k.nodes[0].DRM.Health)
			if u := k.nodes[0].Props.UniqueID; u != 0 {
				// ROCr's agent UUID (rocminfo "Uuid", amd-smi): "GPU-" and
				// KFD's unique_id in hex.
				g.UUID = fmt.Sprintf("GPU-%016x", u)
			}
		} else {
			g.State = topology.GPUNotInKFD
		}
		addrOf[g.BusID] = d.Address
		out = append(out, g)
	}
	// Denied nodes cannot be placed (their properties answer EPERM). Where
	// they are as many as the GPUs KFD does not otherwise list, those are
	// the denied ones; otherwise which is which cannot be told, and none
	// is called denied.
	unlisted := 0
	for _, g := range out {
		if g.State == topology.GPUNotInKFD {
			unlisted++
		}
	}
	if denied > 0 && denied != unlisted {
		warn(fmt.Errorf("KFD denies %d GPU node(s) (EPERM: the device cgroup) and lists no node for %d GPU(s) on the bus: which GPUs are denied cannot be told", denied, unlisted))
	}
	for i := range out {
		switch {
		case out[i].State != topology.GPUNotInKFD:
		case denied > 0 && denied == unlisted:
			out[i].State = topology.GPUKFDDenied
			warn(fmt.Errorf("GPU %s: KFD denies it (EPERM on its KFD node): the device cgroup does not give this process the GPU, so it is not usable here", out[i].BusID))
		case len(t.Nodes) == 0:
			warn(fmt.Errorf("GPU %s (%s) is on the PCI bus but %s does not exist: amdgpu/amdkfd is not loaded or not bound to it", out[i].BusID, out[i].Model, kfd.NodesDir))
		default:
			warn(fmt.Errorf("GPU %s (%s) is on the PCI bus but KFD lists no node for it (%s)", out[i].BusID, out[i].Model, kfd.NodesDir))
		}
	}
	for _, a := range order {
		if _, ok := addrOf[a.String()]; !ok {
			warn(fmt.Errorf("KFD node %d names GPU %s, which the PCI bus does not show", byAddr[a].nodes[0].ID, a))
		}
	}
	// KFD-listed GPUs in KFD order, then the rest in bus order.
	sortfn.SortStable(out, func(a, b topology.GPU) int {
		ra, oka := rank[addrOf[a.BusID]]
		rb, okb := rank[addrOf[b.BusID]]
		switch {
		case oka && okb:
			return ra - rb
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
	for i := range out {
		out[i].Index = first + i
	}
	partitionGaps(out, warn)
	// XGMI links name their peer by KFD node: resolve to bus ids.
	busOf := map[int]string{}
	for a, k := range byAddr {
		for _, n := range k.nodes {
			busOf[n.ID] = a.String()
		}
	}
	for i := range out {
		if a := out[i].AMD; a != nil {
			nodes := byAddr[addrOf[out[i].BusID]].nodes
			a.XGMILinks = xgmiLinks(nodes[0], len(nodes) > 1, busOf)
		}
	}
	return out
}

// amdInfo gathers a GPU's KFD nodes (one per partition).
func amdInfo(nodes []kfd.Node, ordinal map[int]int) *topology.AMDGPU {
	sortfn.Sort(nodes, func(a, b kfd.Node) int { return a.Partition - b.Partition })
	first := nodes[0]
	a := &topology.AMDGPU{KFDNodes: []int{}, Ordinals: []int{}, GPUID: first.GPUID,
		GFXTarget: first.Props.GFXTarget(), XGMILinks: []topology.XGMILink{},
		ComputePartition: first.DRM.ComputePartition, MemoryPartition: first.DRM.MemoryPartition,
		RAS: []topology.RASCount{}}
	for _, n := range nodes {
		a.KFDNodes = append(a.KFDNodes, n.ID)
		a.Ordinals = append(a.Ordinals, ordinal[n.ID])
		cus := 0
		if n.Props.SIMDPerCU > 0 {
			cus = int(n.Props.SIMDCount / n.Props.SIMDPerCU)
		}
		a.ComputeUnits += cus
		a.XCCs += int(n.Props.NumXCC)
		p := topology.AMDPartition{Partition: n.Partition, KFDNode: n.ID, Ordinal: ordinal[n.ID], GPUID: n.GPUID,
			ComputeUnits: cus, XCCs: int(n.Props.NumXCC)}
		if m := n.Props.DRMRenderMinor; m != 0 {
			v := int(m)
			p.RenderMinor = &v
		}
		a.Partitions = append(a.Partitions, p)
	}
	if len(a.Partitions) < 2 {
		// SPX: the GPU is its one node; the list is for split GPUs.
		a.Partitions = nil
	}
	if m := first.Props.DRMRenderMinor; m != 0 {
		v := int(m)
		a.RenderMinor = &v
	}
	if h := first.Props.HiveID; h != 0 {
		a.HiveID = fmt.Sprintf("0x%016x", h)
	} else if h := first.DRM.XGMIHiveID; h != 0 {
		a.HiveID = fmt.Sprintf("0x%016x", h)
	}
	if p := first.DRM.XGMIPhysicalID; p != nil {
		v := int(*p)
		a.XGMIPhysicalID = &v
	}
	return a
}

// partitionGaps warns about a GPU whose KFD nodes are fewer than those of
// the other GPUs in its compute partition mode: a partition KFD did not
// add (a capture of a real CPX node lists 7 nodes for its last MI300X),
// so HIP has a device less and the ordinals after it move down.
func partitionGaps(gpus []topology.GPU, warn func(...error)) {
	most := map[string]int{}
	for _, g := range gpus {
		if g.AMD != nil && g.AMD.ComputePartition != "" {
			most[g.AMD.ComputePartition] = max(most[g.AMD.ComputePartition], len(g.AMD.KFDNodes))
		}
	}
	for _, g := range gpus {
		if g.AMD == nil || g.AMD.ComputePartition == "" {
			continue
		}
		if n, m := len(g.AMD.KFDNodes), most[g.AMD.ComputePartition]; n < m {
			warn(fmt.Errorf("GPU %s is in %s with %d KFD node(s), other %s GPUs have %d (%s): a compute partition is missing, so HIP sees a device less and local ranks per partition do not apply",
				g.BusID, g.AMD.ComputePartition, n, g.AMD.ComputePartition, m, kfd.NodesDir))
		}
	}
}

// KFD's io_link weights (kfd_crat.c): KFD_CRAT_XGMI_WEIGHT per XGMI
// hop between GPUs, and between compute partitions KFD_CRAT_INTRA_SOCKET_WEIGHT
// inside one GPU, twice that plus the XGMI weight per hop to a partition
// of another (13 and 41 on a CPX MI300X).
const (
	kfdXGMIWeight        = 15
	kfdIntraSocketWeight = 13
)

// xgmiLinks are a GPU node's XGMI io_links to other GPUs' nodes, by peer
// bus id. Links between partitions of one GPU (CPX) are inside it and
// left out; a partition's weight to another GPU carries the two
// intra-socket legs.
func xgmiLinks(n kfd.Node, partitioned bool, busOf map[int]string) []topology.XGMILink {
	self := busOf[n.ID]
	out := []topology.XGMILink{}
	for _, l := range n.IOLinks {
		peer, ok := busOf[l.To]
		if !l.XGMI() || !ok || peer == self {
			continue
		}
		w := int(l.Weight)
		if partitioned && w > 2*kfdIntraSocketWeight {
			w -= 2 * kfdIntraSocketWeight
		}
		hops := max(1, (w+kfdXGMIWeight/2)/kfdXGMIWeight)
		out = append(out, topology.XGMILink{Peer: peer, Hops: hops, Weight: int(l.Weight), MaxBandwidth: int(l.MaxBandwidth)})
	}
	sortfn.SortStable(out, func(a, b topology.XGMILink) int { return strings.Compare(a.Peer, b.Peer) })
	return slices.CompactFunc(out, func(a, b topology.XGMILink) bool { return a.Peer == b.Peer })
}

// Where AMD's DKMS amdgpu writes its version (the in-tree module has
// none); amdkfd's peer-memory client is kfd.PeerMemory's.
const amdgpuVersion = "sys/module/amdgpu/version"

// readROCm reads the ROCm stack's files; nil where the node has no AMD
// GPU. A file that is there but unreadable or not a version is a
// warning naming it.
func readROCm(root *rootfs.Root, gpus []topology.GPU, warn func(...error)) *topology.ROCmInfo {
	if !slices.ContainsFunc(gpus, topology.GPU.IsAMD) {
		return nil
	}
	info := &topology.ROCmInfo{}
	read := func(rel string) string {
		v, err := root.String(rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return ""
		case err != nil:
			warn(fmt.Errorf("read /%s: %w", rel, err))
			return ""
		case v == "" || len(v) > 64 || strings.ContainsFunc(v, func(c rune) bool { return c <= ' ' || c > '~' }):
			warn(fmt.Errorf("/%s: %q is not a version", rel, v))
			return ""
		}
		return v
	}
	info.DriverVersion = read(amdgpuVersion)
	v, _, err := kfd.PeerMemory(root)
	warn(err)
	info.PeerMemory = v
	return info
}

// fillAMDHealth copies amdgpu's counters of the GPU's PCI function.
func fillAMDHealth(a *topology.AMDGPU, h *kfd.Health) {
	if h == nil {
		return
	}
	for _, r := range h.RAS {
		// Same fields: the conversion stops compiling if they drift apart.
		a.RAS = append(a.RAS, topology.RASCount(r))
	}
	a.PCIeReplayCount = h.PCIeReplayCount
	if h.XGMINumLinks != nil {
		peers, links := h.XGMILinkedPeers()
		a.XGMILinkedPeers, a.XGMINumLinks = &peers, &links
	}
}
