package topology

import (
	"slices"
	"strings"
)

// GPU vendors, as GPU.Vendor holds them (the PCI vendor id).
const (
	VendorNVIDIA = "0x10de"
	VendorAMD    = "0x1002"
)

// The states of an AMD GPU, which has no NVML: KFD (amdkfd's topology
// under /sys/class/kfd) is the source that says the driver has it.
const (
	// GPUNotInKFD: on the bus, but amdkfd lists no node for it (amdgpu not
	// loaded or not bound, or the GPU failed to initialise).
	GPUNotInKFD GPUState = "not-in-kfd"
	// GPUKFDDenied: KFD lists it, but the caller's device cgroup denies
	// it (KFD answers EPERM): a container not given this GPU.
	GPUKFDDenied GPUState = "kfd-denied"
)

// IsAMD reports whether the GPU is an AMD one (amdgpu, ROCm).
func (g GPU) IsAMD() bool { return strings.EqualFold(g.Vendor, VendorAMD) }

// Usable reports whether the GPU's driver has it and answers for it:
// NVML lists it (or NVML is absent from the node), or KFD lists it.
func (g GPU) Usable() bool { return g.State == GPUOK || g.State == GPUNoNVML }

// AMDGPU is what amdgpu and amdkfd say of an AMD Instinct GPU: its KFD
// nodes, ISA, render node, XGMI hive and links and partition modes.
type AMDGPU struct {
	// KFDNodes are the GPU's KFD topology nodes, one per compute
	// partition (one in SPX mode, eight in CPX mode on MI300X), in
	// partition order.
	KFDNodes []int `json:"kfd_nodes"`
	// Ordinals are the HIP/ROCr device ordinals of those nodes: the
	// position of each among all KFD GPU nodes in node order, which is
	// the order HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES count in.
	Ordinals []int `json:"ordinals"`
	// GPUID is KFD's gpu_id of the first partition.
	GPUID uint32 `json:"gpu_id"`
	// GFXTarget is the ISA ("gfx942"), RCCL's gcn.
	GFXTarget string `json:"gfx_target"`
	// ComputeUnits is the CU count over every partition (simd_count /
	// simd_per_cu): 304 on MI300X, what HIP calls multiProcessorCount.
	ComputeUnits int `json:"compute_units"`
	// XCCs is the number of XCDs (num_xcc) over every partition.
	XCCs int `json:"xccs"`
	// RenderMinor is N of /dev/dri/renderDN, the GPU's (first
	// partition's) render node; nil where KFD does not say.
	RenderMinor *int `json:"render_minor"`
	// HiveID is the XGMI hive ("0x" and 16 hex digits); "" outside a
	// hive.
	HiveID string `json:"xgmi_hive_id,omitempty"`
	// XGMIPhysicalID is the GPU's socket in its hive (xgmi_physical_id).
	XGMIPhysicalID *int `json:"xgmi_physical_id"`
	// ComputePartition and MemoryPartition are the partition modes
	// ("SPX", "CPX"; "NPS1", "NPS4"); "" where the GPU has none.
	ComputePartition string `json:"compute_partition,omitempty"`
	MemoryPartition  string `json:"memory_partition,omitempty"`
	// Partitions are the GPU's compute partitions as HIP and RCCL see
	// them, each a GPU of its own (a KFD node, a HIP device, a render
	// node), in partition order; set only where KFD lists more than one
	// node for the GPU (DPX, QPX, CPX). They share the GPU's PCI
	// function, so its NUMA node, PCIe paths, NICs and XGMI links.
	Partitions []AMDPartition `json:"partitions,omitempty"`
	// XGMILinks are the GPU's XGMI links to other GPUs (KFD io_links of
	// type XGMI between first partitions), in peer order.
	XGMILinks []XGMILink `json:"xgmi_links"`
	// XGMILinkedPeers and XGMINumLinks are what amdgpu's xgmi_num_links
	// says (one link count per hive member): the members the GPU has a
	// link to, and its links in all; nil where amdgpu does not say.
	XGMILinkedPeers *int `json:"xgmi_linked_peers"`
	XGMINumLinks    *int `json:"xgmi_num_links"`
	// RAS are amdgpu's RAS error counts per block (ras/<block>_err_count),
	// by block name; empty where RAS is off or not supported.
	RAS []RASCount `json:"ras"`
	// PCIeReplayCount is amdgpu's pcie_replay_count; nil where absent.
	PCIeReplayCount *uint64 `json:"pcie_replay_count"`
}

// AMDPartition is one compute partition of an AMD GPU: one KFD node.
type AMDPartition struct {
	// Partition is its number within the GPU (KFD's node id in the
	// GPU, location_id's low bits): 0..n-1.
	Partition int `json:"partition"`
	// KFDNode is its KFD topology node; Ordinal its HIP/ROCr device
	// ordinal (the node's position among all KFD GPU nodes).
	KFDNode int `json:"kfd_node"`
	Ordinal int `json:"ordinal"`
	// GPUID is KFD's gpu_id of the node.
	GPUID uint32 `json:"gpu_id"`
	// RenderMinor is N of its /dev/dri/renderDN (the GPU's own render
	// node for partition 0, an amdgpu_xcp platform device's for the
	// others); nil where KFD does not say.
	RenderMinor *int `json:"render_minor"`
	// ComputeUnits and XCCs are the partition's (simd_count /
	// simd_per_cu, num_xcc): 38 and 1 on a CPX MI300X.
	ComputeUnits int `json:"compute_units"`
	XCCs         int `json:"xccs"`
}

// PartitionsPerGPU is how many compute partitions each selected GPU is
// split into, where every GPU of sel is an AMD GPU split into the same
// number k > 1 of them (CPX: 8 per MI300X): HIP and RCCL then count
// partitions, so local ranks do too (rank r drives partition r%k of GPU
// r/k of sel). 1 otherwise, including a node of unequal modes (a warning
// at env says so).
func PartitionsPerGPU(n Node, sel Selection) int {
	byIndex := map[int]*AMDGPU{}
	for i := range n.GPUs {
		byIndex[n.GPUs[i].Index] = n.GPUs[i].AMD
	}
	k := 0
	for _, idx := range sel.GPUs {
		g := byIndex[idx]
		if g == nil || len(g.Partitions) < 2 {
			return 1
		}
		if k != 0 && len(g.Partitions) != k {
			return 1
		}
		k = len(g.Partitions)
	}
	return max(k, 1)
}

// RASCount is one amdgpu RAS block's error counts.
type RASCount struct {
	Block string `json:"block"` // "umc", "xgmi_wafl", "gfx", ...
	UE    uint64 `json:"ue"`    // uncorrectable
	CE    uint64 `json:"ce"`    // correctable
	// DE is the deferred count, where the kernel writes one.
	DE *uint64 `json:"de"`
}

// ROCmInfo is what the node says of AMD's stack: set only where the node
// has an AMD GPU.
type ROCmInfo struct {
	// DriverVersion is /sys/module/amdgpu/version (AMD's DKMS amdgpu;
	// the in-tree module has none): "" where absent.
	DriverVersion string `json:"driver_version,omitempty"`
	// PeerMemory is the version of amdkfd's peer-memory client
	// (/sys/kernel/mm/memory_peers/amdkfd/version), the path RDMA NICs
	// reach GPU memory through without dma-buf; "" where absent.
	PeerMemory string `json:"peer_memory,omitempty"`
}

// FullMeshXGMI reports whether the GPU is of a part whose XGMI hive joins
// every pair of GPUs directly: the MI300 series (gfx942: MI300X, MI300A,
// MI308X, MI325X, OAMs only, one x16 Infinity Fabric link to each of the
// 7 peers of an 8-OAM board, 3 of a 4-socket MI300A) and the MI350 series
// (gfx950). There a hive pair without a direct link is a fault; on
// earlier parts (MI250X's GCDs, MI210 bridge cards) it may be the design.
func (a *AMDGPU) FullMeshXGMI() bool {
	return a != nil && (a.GFXTarget == "gfx942" || a.GFXTarget == "gfx950")
}

// XGMILink is one KFD XGMI io_link from a GPU to another.
type XGMILink struct {
	Peer string `json:"peer"` // the peer GPU's bus id
	// Hops is the link's hop count (KFD weight / 15): 1 for a direct
	// link, more where the hive routes through other GPUs.
	Hops int `json:"hops"`
	// Weight is KFD's weight (15 per hop), what rocm-smi --showtopo
	// prints.
	Weight int `json:"weight"`
	// MaxBandwidth is KFD's max_bandwidth, MB/s; 0 where it is not
	// given.
	MaxBandwidth int `json:"max_bandwidth_mbs"`
}

// Direct reports whether the link is a direct (one-hop) one: the only
// XGMI link RCCL's topology keeps (an <xgmi> link needs hops == 1) and
// rocm-smi --showtopotype prints as XGMI. A link of more hops is the hive
// routing the pair through other GPUs.
func (l XGMILink) Direct() bool { return l.Hops == 1 }

// XGMIHops is the hop count of the GPU's XGMI link to the GPU at bus id
// peer (any case); 0 where it lists none (or a is nil).
func (a *AMDGPU) XGMIHops(peer string) int {
	if a == nil {
		return 0
	}
	for _, l := range a.XGMILinks {
		if strings.EqualFold(l.Peer, peer) {
			return l.Hops
		}
	}
	return 0
}

// directTo reports whether a lists a direct XGMI link to the GPU at bus
// id peer (any case); a nil a lists none.
func (a *AMDGPU) directTo(peer string) bool {
	return a != nil && slices.ContainsFunc(a.XGMILinks, func(l XGMILink) bool { return l.Direct() && strings.EqualFold(l.Peer, peer) })
}

// DirectXGMIPeers counts the GPUs a lists a direct XGMI link to: what
// its side says, whatever the peers list.
func (a *AMDGPU) DirectXGMIPeers() int {
	if a == nil {
		return 0
	}
	n := 0
	for _, l := range a.XGMILinks {
		if l.Direct() {
			n++
		}
	}
	return n
}

// XGMIDirect reports whether GPUs a and b share a direct (one-hop) XGMI
// link: the one rule for it, which GPUPath.XGMI, the health gate's XGMI
// check and the exporter's XGMI series all use.
//
// both says whose word counts. With both, each GPU must list the link:
// RCCL on each GPU reads only that GPU's links, so a link one side lost
// is not one traffic uses (GPUPath.XGMI, the health check, the
// exporter's gpu_xgmi_link_up). Without, either side listing it is
// enough: the exporter uses that to choose the peers it writes a
// gpu_xgmi_link_up series for, so that a link only one side lists shows
// as a 0 rather than no series.
func XGMIDirect(a, b GPU, both bool) bool {
	ab, ba := a.AMD.directTo(b.BusID), b.AMD.directTo(a.BusID)
	if both {
		return ab && ba
	}
	return ab || ba
}

// xgmiBetween is GPUPath.XGMI: 1 where a and b share a direct XGMI
// link both list (XGMIDirect), else 0.
func xgmiBetween(a, b GPU) int {
	if XGMIDirect(a, b, true) {
		return 1
	}
	return 0
}
