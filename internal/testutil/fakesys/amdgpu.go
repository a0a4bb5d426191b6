package fakesys

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// AMDGPU is the amdgpu driver's view of an AMD Instinct function (kind
// other, vendor 0x1002): its node in the KFD topology
// (sys/class/kfd/kfd/topology) and its DRM and XGMI sysfs entries
// (FORMAT.md, "AMD Instinct: KFD and DRM"). Three layouts are modelled
// (gfxLayouts): gfx942 (MI300 series) and gfx950 (MI350 series), each in
// SPX or split into compute partitions (DPX, QPX, CPX: one KFD node per
// partition), and gfx90a (MI200 series: MI210, one MI250 GCD) without an
// XGMI hive.
type AMDGPU struct {
	// Index is the GPU's probe order among the amdgpu blocks, 0..n-1: its
	// KFD node is the CPU node count + Index, and the default DRM minors
	// follow it.
	Index int `yaml:"index"`
	// GFX is the target name: gfx942, gfx950 or gfx90a (gfxLayouts).
	GFX string `yaml:"gfx"`
	// GFXTargetVersion is KFD's gfx_target_version; default from GFX
	// (gfx942: 90402, gfx90a: 90010). When given it must agree with GFX.
	GFXTargetVersion int `yaml:"gfx_target_version"`
	// SIMDCount is KFD's simd_count: 4 SIMDs per CU (MI300X: 304 CUs,
	// 1216; MI210: 104 CUs, 416). Required.
	SIMDCount int `yaml:"simd_count"`
	// NumXCC is the number of XCDs the node holds (num_xcc); default 1,
	// and 1 on gfx90a.
	NumXCC int `yaml:"num_xcc"`
	// VRAMGiB is the HBM size: the node's mem_banks/0 and its gpu_id.
	// Required.
	VRAMGiB float64 `yaml:"vram_gib"`
	// RenderMinor is the renderD minor (KFD drm_render_minor); default
	// 128 + the drm_nodes of the GPUs of lower index.
	RenderMinor *int `yaml:"render_minor"`
	// Card is the primary DRM minor (cardN); default render_minor - 128.
	Card *int `yaml:"card"`
	// DRMNodes is how many DRM devices the driver registers for the GPU:
	// 1 (default, and the only value on gfx90a), or 8 on MI300 (its own
	// and 7 spare XCP platform devices for compute partitions, which take
	// the next minors).
	DRMNodes int `yaml:"drm_nodes"`
	// GPUID is KFD's gpu_id; default the kernel's CRC16 of the function
	// (kfd_generate_gpu_id).
	GPUID *int `yaml:"gpu_id"`
	// UniqueID is KFD's unique_id (64-bit, decimal or 0x hex); default
	// made up from the bus id.
	UniqueID string `yaml:"unique_id"`
	// XGMIHive is the XGMI hive id (64-bit, decimal or 0x hex, nonzero);
	// "" for a GPU in no hive (no XGMI files, no XGMI links). gfx942
	// only: a gfx90a hive (MI210 with an Infinity Fabric bridge, MI250)
	// is not modelled.
	XGMIHive string `yaml:"xgmi_hive"`
	// XGMIDeviceID is the GPU's XGMI node id (xgmi_device_id); default
	// made up from the bus id. Only with xgmi_hive.
	XGMIDeviceID string `yaml:"xgmi_device_id"`
	// XGMIPhysicalID is xgmi_physical_id; default the GPU's position in
	// its hive (0-based, index order). Only with xgmi_hive.
	XGMIPhysicalID *int `yaml:"xgmi_physical_id"`
	// XGMIPeers are the hive members this GPU has a direct link to (1
	// hop): "all" (default with xgmi_hive) or a list of indexes; other
	// members are as many hops away as the shortest path through direct
	// links.
	XGMIPeers XGMIPeers `yaml:"xgmi_peers"`
	// ComputePartition is current_compute_partition; "" writes none
	// (SPX). SPX, DPX, QPX or CPX on gfx942 and gfx950 (MI200 has no
	// partition modes, so no such file): the GPU's XCCs, CUs and memory
	// are split evenly into 1, 2, 4 or num_xcc partitions, each a KFD node
	// of its own (partitionCount).
	ComputePartition string `yaml:"compute_partition"`
	// MemoryPartition is current_memory_partition; "" writes none. NPS1,
	// or the one other mode the part has (gfxLayout.nps: NPS4 on gfx942
	// with CPX, NPS2 on gfx950 with DPX, QPX or CPX).
	MemoryPartition string `yaml:"memory_partition"`
	// RAS sets the error counts amdgpu reports for RAS blocks
	// (ras/<block>_err_count), by block name; a block not named counts
	// 0. Only the blocks amdgpu gives the target a counter for can be
	// named (gfxLayout.ras; xgmi_wafl only in a hive).
	RAS map[string]AMDRASCount `yaml:"ras"`
	// PCIeReplayCount is pcie_replay_count (NAKs sent plus received);
	// default 0.
	PCIeReplayCount uint64 `yaml:"pcie_replay_count"`
	// XGMIError is what xgmi_error answers (0, 1 or 2: the two error
	// bits of the fabric's PIE status); default 0. Only with xgmi_hive.
	XGMIError uint64 `yaml:"xgmi_error"`
}

// AMDRASCount is one RAS block's counts: uncorrectable, corrected and
// (UMC only) deferred errors.
type AMDRASCount struct {
	UE uint64 `yaml:"ue"`
	CE uint64 `yaml:"ce"`
	DE uint64 `yaml:"de"`
}

// gfx942RASBlocks are the RAS blocks amdgpu creates an error counter
// for on an MI300 GPU, with their bit in ras/features (their index in
// amdgpu_ras.c ras_block_string[]): the IP blocks whose RAS object has
// a query_ras_error_count or query_ras_error_status hook
// (amdgpu_ras_block_late_init): umc_v12_0, sdma_v4_4_2, gfx_v9_4_3,
// mmhub_v1_8, nbio_v7_9 ("pcie_bif", set by amdgpu_ras_init for NBIO
// 7.9 on a dGPU), hdp_v4_0 and the XGMI link's xgmi_ras, which counts
// only on a GPU with XGMI peers (amdgpu_xgmi_ras_late_init). VCN and
// JPEG 4.0.3 had counters for a while and lost them when their ACA
// support was retired (2025); they are not written.
var gfx942RASBlocks = []rasBlock{
	{"umc", 0}, {"sdma", 1}, {"gfx", 2}, {"mmhub", 3}, {"pcie_bif", 5}, {"hdp", 6}, {"xgmi_wafl", 7},
}

// gfx90aRASBlocks are the same blocks on an MI200 (Aldebaran) GPU, from
// its IP blocks' RAS objects: umc_v6_7, sdma_v4_4 (SDMA 4.4.0),
// gfx_v9_4_2, mmhub_v1_7, nbio_v7_4 ("pcie_bif", NBIO 7.4.4), hdp_v4_0
// (HDP 4.4.0) and xgmi_ras (in a hive only, and no gfx90a hive is
// modelled). Aldebaran's MCA banks (mca_v3_0: mp0, mp1, mpio
// counters, on the kernels that still have that file) are not written.
var gfx90aRASBlocks = []rasBlock{
	{"umc", 0}, {"sdma", 1}, {"gfx", 2}, {"mmhub", 3}, {"pcie_bif", 5}, {"hdp", 6}, {"xgmi_wafl", 7},
}

// rasBlock is a RAS block's name and its ras/features bit.
type rasBlock struct {
	name string
	bit  uint
}

// rasFeaturesSocketShift is AMDGPU_RAS_FEATURES_SOCKETID_SHIFT: amdgpu_ras_init
// packs the GPU's socket id into ras/features bits 31:29.
const rasFeaturesSocketShift = 29

// amdPeerMemoryVersion is the version amdkfd's peer-memory client
// registers with (kfd_peerdirect.c AMD_PEER_BRIDGE_DRIVER_VERSION).
const amdPeerMemoryVersion = "1.0"

// XGMIPeers is "all" or a list of GPU indexes.
type XGMIPeers struct {
	All     bool
	Indexes []int
	Set     bool // given in the spec
}

// UnmarshalYAML reads the word "all" or a sequence of indexes.
func (p *XGMIPeers) UnmarshalYAML(n *yaml.Node) error {
	switch {
	case n.Kind == yaml.ScalarNode && n.Value == "all":
		*p = XGMIPeers{All: true, Set: true}
		return nil
	case n.Kind == yaml.SequenceNode:
		var idx []int
		if err := n.Decode(&idx); err != nil {
			return fmt.Errorf("line %d: xgmi_peers: %w", n.Line, err)
		}
		*p = XGMIPeers{Indexes: idx, Set: true}
		return nil
	}
	return fmt.Errorf("line %d: xgmi_peers: want all or a list of GPU indexes", n.Line)
}

const (
	amdVendor            = 0x1002
	gfx942XGMILinkMBytes = 64000 // one MI300X XGMI link: 32 Gb/s x 16 lanes / 8
	gfx950XGMILinkMBytes = 76800 // one MI355X XGMI link: 38.4 Gb/s x 16 lanes / 8
	kfdGPUProcessorBase  = 0x80001000
)

// parseU64 reads a 64-bit id given in decimal or 0x hex.
func parseU64(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want a 64-bit number (decimal or 0x hex)", s)
	}
	return v, nil
}

// gfxTarget is the gfx_target_version a target name stands for
// ("gfx942" -> 90402: major, then minor and stepping as hex digits).
func gfxTarget(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "gfx")
	if !ok || len(s) < 3 {
		return 0, false
	}
	major, err := strconv.Atoi(s[:len(s)-2])
	minor, err1 := strconv.ParseUint(s[len(s)-2:len(s)-1], 16, 8)
	step, err2 := strconv.ParseUint(s[len(s)-1:], 16, 8)
	if err != nil || err1 != nil || err2 != nil || major <= 0 {
		return 0, false
	}
	return major*10000 + int(minor)*100 + int(step), true
}
