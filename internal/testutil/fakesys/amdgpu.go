package fakesys

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaffinity/gpuaffinity/pci"
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

// gfxLayout is what KFD and amdgpu report for one gfx target: the node
// properties that come from the GPU's configuration rather than the
// spec (kfd_crat.c kfd_fill_gpu_direct/kfd_create_vcrat_image_gpu and
// kfd_topology.c kfd_topology_add_device), its memory bank and which
// sysfs features the driver has for it.
type gfxLayout struct {
	target       int    // gfx_target_version
	name         string // KFD node name: amdgpu_asic_name[asic_type], lower case
	simdPerCU    int    // simd_per_cu
	arraysPerXCC int    // array_count per XCC: max_sh_per_se x max_shader_engines
	cuPerArray   int    // cu_per_simd_array: max_cu_per_sh (physical, harvested CUs included)
	maxXCC       int    // num_xcc at most
	maxDRMNodes  int    // drm_nodes at most (XCP spare devices)
	maxWaves     int    // max_waves_per_simd
	ldsKiB       int    // lds_size_in_kb
	numGWS       int    // num_gws
	wave         int    // wave_front_size
	scratchSlots int    // max_slots_scratch_cu
	sdmaPCIe     int    // num_sdma_engines
	sdmaXGMI     int    // num_sdma_xgmi_engines
	sdmaQueues   int    // num_sdma_queues_per_engine
	cpQueues     int    // num_cp_queues
	engineClkMHz int    // max_engine_clk_fcompute: peak engine clock
	vramWidth    int    // mem_banks/0 width: HBM stacks x 1024 bits
	memClkMHz    int    // mem_banks/0 mem_clk_max
	partitions   bool   // current_compute/memory_partition exist, compute partitions modelled
	nps          int    // the memory partition mode beside NPS1 (4: NPS4, 2: NPS2); 0 none
	xgmiMBytes   uint32 // one direct XGMI link's bandwidth, MB/s (KFD min/max_bandwidth)
	hive         bool   // an XGMI hive is modelled
	ras          []rasBlock
	market       string // for messages
}

// gfxLayouts are the modelled targets.
//
// gfx942 (MI300X in SPX): amdgpu's gfx_v9_4_3 configuration as KFD prints
// it, per XCC where so noted: 4 arrays (max_sh_per_se 1 x 4 shader
// engines) of 10 CUs (40 CUs per XCD, 38 enabled on MI300X); 2 PCIe and
// 14 XGMI SDMA engines; 2100 MHz peak engine clock; 8 HBM3 stacks; 8
// DRM devices (the GPU's and 7 XCP spares).
//
// gfx90a (MI210; an MI250/MI250X GCD has the same layout): CHIP_ALDEBARAN
// (amdgpu_drv.c pciidlist: 0x740c, 0x740f), so KFD names the node
// "aldebaran". One XCC; 8 shader engines of one array each (rocminfo on
// MI210: "Shader Engines: 8", "Shader Arrs. per Eng.: 1") of 14 CUs: the
// die has 112 CUs, 14 per engine (AMD's Hot Chips 34 block diagram), of
// which MI210 enables 104 and MI250X 110; cu_per_simd_array counts the
// physical slots as on MI300X (10 for 38 enabled) and MI350X (9 for 8
// enabled per array), so 14 here is that reading, not a capture of an
// MI200 node. rocminfo "Max Waves Per CU: 32" over 4 SIMDs: 8 waves per
// SIMD; LDS 64 KB; "Max Clock Freq. (MHz): 1700". Aldebaran has 5 SDMA
// instances (amdgpu_discovery.c: sdma.num_instances = 5) and XGMI IP
// 6.1.0, so KFD splits them 2 PCIe + 3 XGMI (kfd_get_num_sdma_engines;
// the MI100 capture reads 2 + 6 of its 8); 8 queues per SDMA engine and
// 24 CP queues, as on MI100. 4 HBM2e stacks (gmc.num_umc = 4: 4096 bits)
// at 1600 MHz (MI210: 1.6 TB/s). One DRM device, no partition modes.
//
// gfx950 (MI355X, MI350X in SPX): 8 XCDs of 4 arrays of 9 CU slots (36
// per XCD, 32 enabled: 256 CUs; AMD's CDNA 4 white paper; the "9 for 8
// enabled" reading above), 160 KB LDS per CU (CDNA 4 white paper), wave64;
// peak engine clock 2400 MHz (MI355X data sheet); 8 HBM3E stacks (8192
// bits), 288 GB; XGMI at 38.4 Gb/s x16 per link, 76800 MB/s (MI355X data
// sheet: 153.6 GB/s bidirectional per link). The SDMA split (2 PCIe + 14
// XGMI), queue counts and mem_clk_max are gfx942's: no MI350 KFD node has
// been published (ASSUMED). Memory modes: NPS1 and NPS2 (AMD's MI355X
// partitioning guide).
var gfxLayouts = map[int]gfxLayout{
	90402: {target: 90402, name: "ip discovery", simdPerCU: 4, arraysPerXCC: 4, cuPerArray: 10, maxXCC: 8, maxDRMNodes: 8,
		maxWaves: 8, ldsKiB: 64, numGWS: 64, wave: 64, scratchSlots: 32, sdmaPCIe: 2, sdmaXGMI: 14, sdmaQueues: 8, cpQueues: 24,
		engineClkMHz: 2100, vramWidth: 8192, memClkMHz: 1300, partitions: true, nps: 4, xgmiMBytes: gfx942XGMILinkMBytes,
		hive: true, ras: gfx942RASBlocks, market: "MI300 series"},
	90500: {target: 90500, name: "ip discovery", simdPerCU: 4, arraysPerXCC: 4, cuPerArray: 9, maxXCC: 8, maxDRMNodes: 8,
		maxWaves: 8, ldsKiB: 160, numGWS: 64, wave: 64, scratchSlots: 32, sdmaPCIe: 2, sdmaXGMI: 14, sdmaQueues: 8, cpQueues: 24,
		engineClkMHz: 2400, vramWidth: 8192, memClkMHz: 1300, partitions: true, nps: 2, xgmiMBytes: gfx950XGMILinkMBytes,
		hive: true, ras: gfx942RASBlocks, market: "MI350 series"},
	90010: {target: 90010, name: "aldebaran", simdPerCU: 4, arraysPerXCC: 8, cuPerArray: 14, maxXCC: 1, maxDRMNodes: 1,
		maxWaves: 8, ldsKiB: 64, numGWS: 64, wave: 64, scratchSlots: 32, sdmaPCIe: 2, sdmaXGMI: 3, sdmaQueues: 8, cpQueues: 24,
		engineClkMHz: 1700, vramWidth: 4096, memClkMHz: 1600, ras: gfx90aRASBlocks, market: "MI200 series"},
}

// layout is the GPU's gfxLayout; Validate has checked that it has one.
func (g *AMDGPU) layout() gfxLayout {
	t, _ := gfxTarget(g.GFX)
	return gfxLayouts[t]
}

// partitionCount is how many compute partitions (KFD nodes) the GPU is
// split into: 1 in SPX, 2 in DPX, 4 in QPX, one per XCC in CPX
// (amdgpu_xcp.c, aqua_vanjaram.c __aqua_vanjaram_get_xcp_count).
func (g *AMDGPU) partitionCount() int {
	switch g.ComputePartition {
	case "DPX":
		return 2
	case "QPX":
		return 4
	case "CPX":
		return max(g.NumXCC, 1)
	}
	return 1
}

// npsCount is the memory partition count of MemoryPartition ("NPS4":
// 4); 1 for none or NPS1, 0 for a spelling that is not NPSn.
func (g *AMDGPU) npsCount() int {
	n, ok := strings.CutPrefix(g.MemoryPartition, "NPS")
	if g.MemoryPartition == "" {
		return 1
	}
	v, err := strconv.Atoi(n)
	if !ok || err != nil || v < 1 {
		return 0
	}
	return v
}

// rasNames lists a layout's RAS block names, for messages.
func (l gfxLayout) rasNames() string {
	var n []string
	for _, b := range l.ras {
		n = append(n, b.name)
	}
	return strings.Join(n, ", ")
}

// kfd io_link types and flags (kfd_crat.h) and weights (kfd_crat.c).
const (
	kfdLinkHT   = 1  // CRAT_IOLINK_TYPE_HYPERTRANSPORT: AMD CPU to CPU
	kfdLinkPCIe = 2  // CRAT_IOLINK_TYPE_PCIEXPRESS
	kfdLinkQPI  = 5  // CRAT_IOLINK_TYPE_QPI_1_1: Intel CPU to CPU
	kfdLinkXGMI = 11 // CRAT_IOLINK_TYPE_XGMI

	kfdFlagEnabled     = 1 << 0 // CRAT_IOLINK_FLAGS_ENABLED
	kfdFlagNonCoherent = 1 << 1 // CRAT_IOLINK_FLAGS_NON_COHERENT

	kfdWeightPCIe = 20 // kfd_parse_subtype_iolink
	kfdWeightXGMI = 15 // KFD_CRAT_XGMI_WEIGHT, times the hops

	// Between compute partitions (kfd_crat.c): KFD_CRAT_INTRA_SOCKET_WEIGHT
	// inside one GPU, at the "mem_bw" of 819200 MB/s KFD gives that link.
	kfdWeightIntraSocket = 13
	kfdIntraSocketMBytes = 819200
)

// recSDMAEngine is kfd_topology.c rec_sdma_eng_map: the recommended XGMI
// SDMA engine from one physical node of an 8-GPU hive to another.
var recSDMAEngine = [8][8]int{
	{-1, 14, 12, 2, 4, 8, 10, 6},
	{14, -1, 2, 10, 8, 4, 6, 12},
	{10, 2, -1, 12, 14, 6, 4, 8},
	{2, 12, 10, -1, 6, 14, 8, 4},
	{4, 8, 14, 6, -1, 10, 12, 2},
	{8, 4, 6, 14, 12, -1, 2, 10},
	{10, 6, 4, 8, 12, 2, -1, 14},
	{6, 12, 8, 4, 2, 10, 14, -1},
}

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

// amdEntry is one amdgpu block with its function.
type amdEntry struct {
	addr bdf
	dev  *Device
	numa int
}

// amdEntries lists the spec's amdgpu blocks in index order.
func (s *Spec) amdEntries() []amdEntry {
	var out []amdEntry
	for _, fn := range s.Functions() {
		if fn.Device.AMDGPU != nil {
			a, _ := parseBDF(fn.BDF)
			out = append(out, amdEntry{addr: a, dev: fn.Device, numa: fn.NUMA})
		}
	}
	slices.SortStableFunc(out, func(x, y amdEntry) int { return x.dev.AMDGPU.Index - y.dev.AMDGPU.Index })
	return out
}

// validateAMDGPU checks the amdgpu blocks: each field on its own, then
// across GPUs (indexes, DRM minors, gpu_ids, hives and their links), and
// that the machine's NUMA layout is one KFD can number.
func (s *Spec) validateAMDGPU() error {
	ents := s.amdEntries()
	if v := s.Kernel.AMDPeerMemory; v != nil && *v != "" {
		if len(ents) == 0 {
			return specErr("kernel.amd_peer_memory: amdkfd registers a peer-memory client only on a machine with an amdgpu block")
		}
		// peer_memory_client.version is char[IB_PEER_MEMORY_VER_MAX = 16].
		if len(*v) > 15 || strings.ContainsFunc(*v, func(c rune) bool { return c <= ' ' || c > '~' }) {
			return specErr("kernel.amd_peer_memory: %q: want a version of at most 15 printable characters", *v)
		}
	}
	if len(ents) == 0 {
		return nil
	}
	for i, n := range s.NUMA.Nodes {
		if n.ID != i || (n.Socket == nil && n.CPUs == "") {
			return specErr("amdgpu: the KFD topology needs NUMA nodes 0..n-1 that all have CPUs; node %d does not fit", n.ID)
		}
	}
	if s.CPU.MaxMHz < 0 {
		return specErr("cpu.max_mhz %d: want 0 or more", s.CPU.MaxMHz)
	}
	hives := map[uint64][]amdEntry{}
	for i, e := range ents {
		g, a, d := e.dev.AMDGPU, e.addr, e.dev
		if g.Index != i {
			return specErr("amdgpu indexes must be 0..%d; %d is missing", len(ents)-1, i)
		}
		if d.Kind != KindOther {
			return specErr("device %s: amdgpu block on kind %s; an AMD GPU is kind other", a, d.Kind)
		}
		if v, _ := parseHex(cmpOr(d.Vendor, "0x0000")); v != amdVendor {
			return specErr("device %s: amdgpu block needs vendor \"0x1002\"", a)
		}
		field := func(f string, format string, args ...any) error {
			return specErr("device %s: amdgpu.%s: %s", a, f, fmt.Sprintf(format, args...))
		}
		want, ok := gfxTarget(g.GFX)
		lay, known := gfxLayouts[want]
		if !ok || !known {
			return field("gfx", "%q: only gfx942 (MI300 series), gfx950 (MI350 series) and gfx90a (MI200 series) are modelled", g.GFX)
		}
		if g.GFXTargetVersion != 0 && g.GFXTargetVersion != want {
			return field("gfx_target_version", "%d does not match gfx %s (%d)", g.GFXTargetVersion, g.GFX, want)
		}
		xcc := max(g.NumXCC, 1)
		if g.NumXCC < 0 || g.NumXCC > lay.maxXCC {
			return field("num_xcc", "%d: want 1..%d on %s", g.NumXCC, lay.maxXCC, g.GFX)
		}
		per, perXCC := lay.simdPerCU*xcc, lay.arraysPerXCC*lay.cuPerArray
		if g.SIMDCount <= 0 || g.SIMDCount%per != 0 || g.SIMDCount/per > perXCC {
			return field("simd_count", "%d: want %d SIMDs per CU for up to %d CUs per XCC (%d XCCs)", g.SIMDCount, lay.simdPerCU, perXCC, xcc)
		}
		if g.VRAMGiB <= 0 || g.VRAMGiB > 1<<20 {
			return field("vram_gib", "%v: want a positive size", g.VRAMGiB)
		}
		if g.DRMNodes < 0 || g.DRMNodes > lay.maxDRMNodes {
			return field("drm_nodes", "%d: want 1..%d on %s", g.DRMNodes, lay.maxDRMNodes, g.GFX)
		}
		if g.RenderMinor != nil && (*g.RenderMinor < 128 || *g.RenderMinor > 1<<20) {
			return field("render_minor", "%d: render minors start at 128", *g.RenderMinor)
		}
		if g.Card != nil && (*g.Card < 0 || *g.Card > 1<<20) {
			return field("card", "%d: want 0 or more", *g.Card)
		}
		if g.GPUID != nil && (*g.GPUID < 1 || *g.GPUID > 0xffff) {
			return field("gpu_id", "%d: want 1..65535 (KFD's 16-bit id)", *g.GPUID)
		}
		if g.UniqueID != "" {
			if _, err := parseU64(g.UniqueID); err != nil {
				return field("unique_id", "%v", err)
			}
		}
		if !lay.partitions && (g.ComputePartition != "" || g.MemoryPartition != "") {
			f := "compute_partition"
			if g.ComputePartition == "" {
				f = "memory_partition"
			}
			return field(f, "%s (%s) has no partition modes: amdgpu writes no current_*_partition file", g.GFX, lay.market)
		}
		parts := g.partitionCount()
		switch g.ComputePartition {
		case "", "SPX":
		case "DPX", "QPX", "CPX":
			if parts > xcc || xcc%parts != 0 {
				return field("compute_partition", "%s: %d partitions of %d XCCs do not split evenly", g.ComputePartition, parts, xcc)
			}
			if g.SIMDCount%(parts*lay.simdPerCU) != 0 {
				return field("compute_partition", "%s: simd_count %d does not split into %d partitions of whole CUs", g.ComputePartition, g.SIMDCount, parts)
			}
			if max(g.DRMNodes, 1) < parts {
				return field("compute_partition", "%s: %d partitions need drm_nodes %d or more (each partition's render node is one of the GPU's DRM devices)", g.ComputePartition, parts, parts)
			}
		case "TPX":
			return field("compute_partition", "TPX (three partitions of an MI300A's 6 XCDs) is not modelled")
		default:
			return field("compute_partition", "%q: want SPX, DPX, QPX or CPX", g.ComputePartition)
		}
		switch nps := g.npsCount(); {
		case g.MemoryPartition == "" || g.MemoryPartition == "NPS1":
		case nps == 0 || nps != lay.nps:
			return field("memory_partition", "%q: %s has NPS1 and NPS%d", g.MemoryPartition, g.GFX, lay.nps)
		case parts < nps || parts%nps != 0:
			// A memory partition holds whole compute partitions
			// (amdgpu_xcp.c: num_xcp_per_mem_partition = num_xcp / NPS).
			return field("memory_partition", "%s needs at least %d compute partitions (%s has %d)", g.MemoryPartition, nps, cmpOr(g.ComputePartition, "SPX"), parts)
		case lay.nps == 4 && g.ComputePartition != "CPX":
			// MI300X: NPS4 with CPX only (AMD's MI300X partitioning guide).
			return field("memory_partition", "NPS4 goes with CPX only on %s", lay.market)
		}
		for name, c := range g.RAS {
			if !slices.ContainsFunc(lay.ras, func(b rasBlock) bool { return b.name == name }) {
				return field("ras", "%q: amdgpu has no error counter for that block on %s (%s)", name, g.GFX, lay.rasNames())
			}
			if name == "xgmi_wafl" && g.XGMIHive == "" {
				return field("ras", "xgmi_wafl counts on a GPU in an XGMI hive only")
			}
			if c.DE != 0 && name != "umc" {
				return field("ras", "%s: de: amdgpu reports deferred errors for umc only", name)
			}
		}
		if g.XGMIError > 2 {
			return field("xgmi_error", "%d: the register holds two error bits, so a read answers 0, 1 or 2", g.XGMIError)
		}
		if g.XGMIHive != "" && !lay.hive {
			return field("xgmi_hive", "an XGMI hive of %s GPUs (an Infinity Fabric bridge) is not modelled", g.GFX)
		}
		if g.XGMIHive == "" {
			if g.XGMIDeviceID != "" || g.XGMIPhysicalID != nil || g.XGMIPeers.Set || g.XGMIError != 0 {
				return field("xgmi_hive", "xgmi_device_id, xgmi_physical_id, xgmi_peers and xgmi_error need a hive")
			}
			continue
		}
		h, err := parseU64(g.XGMIHive)
		if err != nil || h == 0 {
			return field("xgmi_hive", "%q: want a nonzero 64-bit id (decimal or 0x hex)", g.XGMIHive)
		}
		if g.XGMIDeviceID != "" {
			if _, err := parseU64(g.XGMIDeviceID); err != nil {
				return field("xgmi_device_id", "%v", err)
			}
		}
		if g.XGMIPhysicalID != nil && (*g.XGMIPhysicalID < 0 || *g.XGMIPhysicalID > 255) {
			return field("xgmi_physical_id", "%d: want 0..255", *g.XGMIPhysicalID)
		}
		hives[h] = append(hives[h], e)
	}
	// DRM minors: each GPU's range [minor, minor+drm_nodes) is its own.
	cards, renders := map[int]string{}, map[int]string{}
	ids := map[int]string{}
	for _, e := range ents {
		m := amdMinors(ents, e.dev.AMDGPU.Index)
		for j := range m.nodes {
			if o, ok := cards[m.card+j]; ok {
				return specErr("device %s: amdgpu.card: minor %d is %s's too", e.addr, m.card+j, o)
			}
			if o, ok := renders[m.render+j]; ok {
				return specErr("device %s: amdgpu.render_minor: renderD%d is %s's too", e.addr, m.render+j, o)
			}
			cards[m.card+j], renders[m.render+j] = e.addr.String(), e.addr.String()
		}
		if id := e.dev.AMDGPU.GPUID; id != nil {
			if o, ok := ids[*id]; ok {
				return specErr("device %s: amdgpu.gpu_id %d is %s's too", e.addr, *id, o)
			}
			ids[*id] = e.addr.String()
		}
	}
	for _, members := range hives {
		if _, err := hiveHops(members); err != nil {
			return err
		}
		// KFD links a partitioned GPU's nodes by its own rule (weight
		// 13 inside the GPU, 41 to any other), an SPX GPU's by the XGMI
		// TA's hops: a hive of both is not modelled.
		for _, e := range members[1:] {
			if a, b := members[0].dev.AMDGPU, e.dev.AMDGPU; a.partitionCount() != b.partitionCount() {
				return specErr("device %s: amdgpu.compute_partition %s: the hive's GPU %s is in %s; one mode per hive is modelled", e.addr, cmpOr(b.ComputePartition, "SPX"), members[0].addr, cmpOr(a.ComputePartition, "SPX"))
			}
		}
		devIDs, phys := map[uint64]string{}, map[int]string{}
		for p, e := range members {
			id, ph := xgmiIDs(e, p)
			if o, ok := devIDs[id]; ok {
				return specErr("device %s: amdgpu.xgmi_device_id %d is %s's too", e.addr, id, o)
			}
			if o, ok := phys[ph]; ok {
				return specErr("device %s: amdgpu.xgmi_physical_id %d is %s's too", e.addr, ph, o)
			}
			devIDs[id], phys[ph] = e.addr.String(), e.addr.String()
		}
	}
	return nil
}

// amdDRM is a GPU's DRM minors: the primary (card) and render minors of
// its own device, then of its spare XCP devices.
type amdDRM struct{ card, render, nodes int }

// amdMinors is GPU index's DRM minors; by default each GPU takes the
// minors after those of the GPUs of lower index, as probing assigns them.
func amdMinors(ents []amdEntry, index int) amdDRM {
	base := 0
	for _, e := range ents {
		g := e.dev.AMDGPU
		n := max(g.DRMNodes, 1)
		if g.Index == index {
			m := amdDRM{card: base, render: 128 + base, nodes: n}
			if g.RenderMinor != nil {
				m.render = *g.RenderMinor
				m.card = *g.RenderMinor - 128
			}
			if g.Card != nil {
				m.card = *g.Card
			}
			return m
		}
		base += n
	}
	return amdDRM{}
}

// xgmiIDs is a hive member's XGMI device id and physical id; p is its
// position in the hive (index order).
func xgmiIDs(e amdEntry, p int) (uint64, int) {
	g := e.dev.AMDGPU
	id := fnv64("xgmi:" + e.addr.String())
	if g.XGMIDeviceID != "" {
		id, _ = parseU64(g.XGMIDeviceID)
	}
	ph := p
	if g.XGMIPhysicalID != nil {
		ph = *g.XGMIPhysicalID
	}
	return id, ph
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// hiveHops is the hop count between the members of one hive (by
// position): 1 for direct peers, else the shortest path through direct
// links. Peers must be members, listed both ways, and every member must
// reach every other.
func hiveHops(members []amdEntry) ([][]int, error) {
	pos := map[int]int{}
	for p, e := range members {
		pos[e.dev.AMDGPU.Index] = p
	}
	n := len(members)
	adj := make([][]bool, n)
	for p := range adj {
		adj[p] = make([]bool, n)
	}
	for p, e := range members {
		g := e.dev.AMDGPU
		if !g.XGMIPeers.Set || g.XGMIPeers.All {
			for q := range n {
				adj[p][q] = q != p
			}
			continue
		}
		for _, idx := range g.XGMIPeers.Indexes {
			q, ok := pos[idx]
			if !ok || q == p {
				return nil, specErr("device %s: amdgpu.xgmi_peers: %d is not another GPU of its hive", e.addr, idx)
			}
			adj[p][q] = true
		}
	}
	for p := range n {
		for q := range n {
			if adj[p][q] != adj[q][p] {
				a, b := members[p], members[q]
				if !adj[p][q] {
					a, b = b, a
				}
				return nil, specErr("device %s: amdgpu.xgmi_peers: links GPU %d, which does not list GPU %d back", a.addr, b.dev.AMDGPU.Index, a.dev.AMDGPU.Index)
			}
		}
	}
	hops := make([][]int, n)
	for p := range n {
		hops[p] = make([]int, n)
		for q := range hops[p] {
			hops[p][q] = -1
		}
		hops[p][p] = 0
		queue := []int{p}
		for len(queue) > 0 {
			c := queue[0]
			queue = queue[1:]
			for q := range n {
				if adj[c][q] && hops[p][q] < 0 {
					hops[p][q] = hops[p][c] + 1
					queue = append(queue, q)
				}
			}
		}
		for q := range n {
			if hops[p][q] < 0 {
				return nil, specErr("device %s: amdgpu.xgmi_peers: GPU %d of the hive cannot be reached over XGMI", members[p].addr, members[q].dev.AMDGPU.Index)
			}
			if hops[p][q] > 7 {
				return nil, specErr("device %s: amdgpu.xgmi_peers: GPU %d is %d hops away; the XGMI TA counts at most 7", members[p].addr, members[q].dev.AMDGPU.Index, hops[p][q])
			}
		}
	}
	return hops, nil
}

// crc16 is the kernel's crc16 (lib/crc16.c: CRC-16/ARC, polynomial 0x8005
// reflected, the caller's initial value).
func crc16(crc uint16, data []byte) uint16 {
	for _, b := range data {
		crc ^= uint16(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xa001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}

// kfdLink is one io_link or p2p_link (kfd_iolink_properties).
type kfdLink struct {
	typ, from, to, weight    int
	minBW, maxBW, rec, flags uint32
}

// kfdNode is one KFD topology node; gpu is nil for a CPU node.
type kfdNode struct {
	numa     int // CPU node: its NUMA node
	gpu      *amdGPUNode
	io, p2p  []*kfdLink
	memBytes uint64
	cpus     int // cpu_cores_count
	cpuBase  int // cpu_core_id_base
}

// amdGPUNode is what the KFD tree needs of one KFD GPU node: an amdgpu
// function in SPX, or one compute partition of it (part of parts).
type amdGPUNode struct {
	amdEntry
	part       int // the compute partition (0 in SPX)
	parts      int // the GPU's partition count (1 in SPX)
	dir        string
	gpuID      int
	hive       uint64
	hivePos    int // position in its hive
	hiveSize   int
	physID     int
	hops       []int // to the hive's members, by position
	devID      uint64
	uniqueID   uint64
	drm        amdDRM
	pcieMaxBW  uint32
	vramBytes  uint64 // the node's memory: the GPU's, or its partition's share
	node       int    // KFD node id
	simdIDBase uint32
}

// amdgpu writes the KFD topology (kfd_topology.c, kfd_crat.c) and the DRM
// and XGMI entries (drm_sysfs.c, amdgpu_xgmi.c, amdgpu_xcp_drv.c) of the
// spec's amdgpu blocks; nothing without one.
func (b *builder) amdgpu() error {
	ents := b.s.amdEntries()
	if len(ents) == 0 {
		return nil
	}
	gpus, err := b.amdGPUNodes(ents)
	if err != nil {
		return err
	}
	nodes := b.kfdTopology(gpus)
	b.writeKFD(nodes)
	b.writeDRM(gpus)
	b.writeAMDHealth(gpus)
	b.writePeerMemory()
	return nil
}

// amdGPUNodes resolves each GPU's ids, DRM minors and hive.
func (b *builder) amdGPUNodes(ents []amdEntry) ([]*amdGPUNode, error) {
	ncpu := len(b.s.NUMA.Nodes)
	var gpus []*amdGPUNode
	hives := map[uint64][]amdEntry{}
	for _, e := range ents {
		if h := e.dev.AMDGPU.XGMIHive; h != "" {
			v, _ := parseU64(h)
			hives[v] = append(hives[v], e)
		}
	}
	used := map[int]bool{} // ids taken: every explicit one, then each made
	for _, e := range ents {
		if id := e.dev.AMDGPU.GPUID; id != nil {
			used[*id] = true
		}
	}
	procID := uint32(kfdGPUProcessorBase) // get_and_inc_gpu_processor_id
	node := ncpu
	for _, e := range ents {
		g := e.dev.AMDGPU
		dir, ok := b.fnDirs[e.addr.String()]
		if !ok {
			return nil, fmt.Errorf("%w: amdgpu %s: no PCI function", ErrSpec, e.addr)
		}
		parts := g.partitionCount()
		// A partition's memory is its memory partition's size over the
		// compute partitions sharing it (amdgpu_amdkfd_xcp_memory_size):
		// an even share of the HBM in every NPS mode, page aligned.
		vram := uint64(g.VRAMGiB * (1 << 30))
		share := vram / uint64(parts) &^ 4095
		for part := range parts {
			n := &amdGPUNode{amdEntry: e, part: part, parts: parts, dir: dir, node: node, drm: amdMinors(ents, g.Index)}
			node++
			n.vramBytes = vram
			if parts > 1 {
				n.vramBytes = share
			}
			// Each node's CRAT takes array_count x cu_per_simd_array
			// processor ids (one XCC's worth: the modelled gfx942
			// value); a partition's as a GPU's (a CPX capture: 40 apart).
			lay := g.layout()
			n.simdIDBase = procID
			procID += uint32(lay.arraysPerXCC * lay.cuPerArray)
			n.uniqueID = fnv64("unique:" + e.addr.String())
			if g.UniqueID != "" {
				n.uniqueID, _ = parseU64(g.UniqueID)
			}
			_, _, _, _, link := b.kindDefaults(e.dev)
			if link != nil {
				n.pcieMaxBW = pcieMBytes(link.MaxWidth, link.MaxSpeed)
			}
			if g.XGMIHive != "" {
				n.hive, _ = parseU64(g.XGMIHive)
				members := hives[n.hive]
				hops, _ := hiveHops(members) // checked by Validate
				for p, m := range members {
					if m.addr == e.addr {
						n.hivePos, n.hops = p, hops[p]
						n.devID, n.physID = xgmiIDs(m, p)
					}
				}
				n.hiveSize = len(members)
			}
			n.gpuID = b.kfdGPUID(n, used)
			used[n.gpuID] = true
			gpus = append(gpus, n)
		}
	}
	return gpus, nil
}

// kfdGPUID is kfd_generate_gpu_id: the CRC16 of the function's devfn,
// subsystem ids, domain, device id, bus, VRAM size and XCC mask, 16 bits,
// moved on past 0 and past the ids of GPUs added before it.
func (b *builder) kfdGPUID(n *amdGPUNode, used map[int]bool) int {
	g := n.dev.AMDGPU
	if g.GPUID != nil {
		return *g.GPUID
	}
	vendor, device, _, _, _ := b.kindDefaults(n.dev)
	v, _ := parseHex(vendor)
	dv, _ := parseHex(device)
	subv, subd := v, dv
	if n.dev.SubsystemVendor != "" {
		subv, _ = parseHex(n.dev.SubsystemVendor)
	}
	if n.dev.SubsystemDevice != "" {
		subd, _ = parseHex(n.dev.SubsystemDevice)
	}
	// The node's XCC mask: its first XCC and how many it has.
	xcc := uint32(max(g.NumXCC, 1) / n.parts)
	words := []uint32{
		uint32(n.addr.Dev<<3 | n.addr.Fn), subv | subd<<16, uint32(n.addr.Domain), dv,
		uint32(n.addr.Bus), uint32(n.vramBytes), uint32(n.vramBytes >> 32), uint32(n.part)*xcc | xcc<<16,
	}
	buf := make([]byte, 0, 32)
	for _, w := range words {
		buf = append(buf, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	id := int(crc16(0, buf))
	for id == 0 || used[id] {
		id = (id + 1) & 0xffff
	}
	return id
}

// pcieMBytes is amdgpu_amdkfd_get_pcie_bandwidth_mbytes for a link of
// that width and speed: lanes x the generation's Mb/s, in MB/s.
func pcieMBytes(width int, speed string) uint32 {
	mbits := map[int]int{1: 2500, 2: 5000, 3: 8000, 4: 16000, 5: 32000}[pci.Gen(speed)]
	return uint32(width * mbits / 8)
}

// kfdTopology builds the KFD node list as the kernel does: the CPU nodes
// of the virtual CRAT (kfd_create_vcrat_image_cpu), then each GPU added in
// order (kfd_topology_add_device): its PCIe link to its NUMA node and XGMI
// links to the hive members added before it, each with the reverse link
// on the far node (kfd_parse_subtype_iolink), the indirect p2p links
// through the other CPU nodes (kfd_create_indirect_link_prop) and to
// GPUs outside its hive (kfd_add_peer_prop), then the links' flags and
// recommended SDMA engines (kfd_fill_iolink_non_crat_info).
func (b *builder) kfdTopology(gpus []*amdGPUNode) []*kfdNode {
	s, l := b.s, b.l
	var nodes []*kfdNode
	cpuType := kfdLinkQPI
	if s.CPU.Vendor == "AuthenticAMD" {
		cpuType = kfdLinkHT
	}
	for i, nd := range s.NUMA.Nodes {
		cpus := l.nodeCPUs[nd.ID].Intersect(l.online).CPUs()
		n := &kfdNode{numa: nd.ID, memBytes: uint64(nd.MemoryGiB * (1 << 30)), cpus: len(cpus)}
		if len(cpus) > 0 {
			n.cpuBase = cpus[0]
		}
		if s.CPU.Arch != "aarch64" { // CPU links are x86_64 only
			for j := range s.NUMA.Nodes {
				if j != i {
					n.io = append(n.io, &kfdLink{typ: cpuType, from: i, to: j, weight: l.distances[i][j]})
				}
			}
		}
		nodes = append(nodes, n)
	}
	ncpu := len(nodes)
	for _, g := range gpus {
		k := g.node
		n := &kfdNode{gpu: g}
		nodes = append(nodes, n)
		cpu := max(g.numa, 0)
		up := &kfdLink{typ: kfdLinkPCIe, from: k, to: cpu, weight: kfdWeightPCIe, minBW: 2500 / 8, maxBW: g.pcieMaxBW}
		n.io = append(n.io, up)
		// Large BAR (all of VRAM visible): the CPU gets the reverse link.
		down := *up
		down.from, down.to = cpu, k
		nodes[cpu].io = append(nodes[cpu].io, &down)
		for _, p := range gpus[:k-ncpu] {
			if g.hive == 0 || p.hive != g.hive {
				continue
			}
			hops := g.hops[p.hivePos]
			x := &kfdLink{typ: kfdLinkXGMI, from: k, to: p.node, weight: kfdWeightXGMI * hops}
			switch {
			case g.parts > 1 && p.addr == g.addr:
				// Two partitions of one GPU (kfd_crat.c
				// kfd_fill_gpu_xgmi_link_to_gpu without the TA's
				// info): KFD_CRAT_INTRA_SOCKET_WEIGHT, memory bandwidth.
				x.weight, x.minBW, x.maxBW = kfdWeightIntraSocket, kfdIntraSocketMBytes, kfdIntraSocketMBytes
			case g.parts > 1:
				// Partitions of two GPUs: two intra-socket legs and
				// one XGMI hop, whatever the TA's hops; no bandwidth.
				x.weight = 2*kfdWeightIntraSocket + kfdWeightXGMI
			case hops == 1:
				bw := g.dev.AMDGPU.layout().xgmiMBytes
				x.minBW, x.maxBW = bw, bw
			}
			n.io = append(n.io, x)
			r := *x
			r.from, r.to = p.node, k
			nodes[p.node].io = append(nodes[p.node].io, &r)
		}
		b.kfdP2P(nodes, n, cpu, ncpu)
		kfdFill(nodes, n)
	}
	return nodes
}

// kfdP2P adds the new GPU node n's p2p links: through every other CPU node
// (weight of its PCIe link plus the CPU-to-CPU link), both ways on a
// large-BAR GPU; and with every GPU added before it outside its hive
// (CONFIG_HSA_AMD_P2P): the two PCIe weights, plus the CPU link when they
// hang off different CPUs. Copies carry the fields of the link they are
// made from at that moment, as kfd_topology.c's memcpy does.
func (b *builder) kfdP2P(nodes []*kfdNode, n *kfdNode, cpu, ncpu int) {
	k := n.gpu.node
	up := n.io[0]
	cpuLink := func(from, to int) *kfdLink {
		for _, l := range nodes[from].io {
			if l.to == to {
				return l
			}
		}
		return nil
	}
	for i := range ncpu {
		if i == cpu {
			continue
		}
		c := cpuLink(i, cpu)
		if c == nil {
			break // no CPU links (not x86_64): the kernel gives up here
		}
		p := *up
		p.weight = up.weight + c.weight
		p.minBW, p.maxBW = min(up.minBW, c.minBW), min(up.maxBW, c.maxBW)
		p.from, p.to = k, i
		n.p2p = append(n.p2p, &p)
		r := p
		r.from, r.to = i, k
		nodes[i].p2p = append(nodes[i].p2p, &r)
	}
	for d, old := range nodes[:k] {
		if old.gpu == nil || (old.gpu.hive != 0 && old.gpu.hive == n.gpu.hive) || old.gpu.addr == n.gpu.addr {
			continue
		}
		peer := func(l1, l2 *kfdLink, from, to int) *kfdLink {
			p := *l1
			p.weight = l1.weight + l2.weight
			p.minBW, p.maxBW = min(l1.minBW, l2.minBW), l2.maxBW
			if l1.to != l2.to {
				if c := cpuLink(l1.to, l2.to); c != nil {
					p.weight += c.weight
					p.minBW, p.maxBW = min(p.minBW, c.minBW), min(p.maxBW, c.maxBW)
				}
			}
			p.from, p.to = from, to
			return &p
		}
		old.p2p = append(old.p2p, peer(up, old.io[0], d, k))
		n.p2p = append(n.p2p, peer(old.io[0], up, k, d))
	}
}

// kfdFill is kfd_fill_iolink_non_crat_info for the new GPU node n: its
// links are enabled (PCIe atomics supported), each link's reverse on the
// far node too; a PCIe link into a CPU node, and PCIe between GPUs, is
// non-coherent; io links get their recommended SDMA engines.
func kfdFill(nodes []*kfdNode, n *kfdNode) {
	fill := func(outs []*kfdLink, far func(*kfdNode) []*kfdLink, rec bool) {
		for _, out := range outs {
			out.flags = kfdFlagEnabled
			peer := nodes[out.to]
			for _, in := range far(peer) {
				if in.to != out.from {
					continue
				}
				in.flags = kfdFlagEnabled
				if in.typ == kfdLinkPCIe {
					in.flags |= kfdFlagNonCoherent
					if peer.gpu != nil {
						out.flags |= kfdFlagNonCoherent
					}
				}
				if rec {
					kfdRecSDMA(n.gpu, peer, out, in)
				}
			}
		}
	}
	fill(n.io, func(x *kfdNode) []*kfdLink { return x.io }, true)
	fill(n.p2p, func(x *kfdNode) []*kfdLink { return x.p2p }, false)
}

// kfdRecSDMA is kfd_set_recommended_sdma_engines: between the GPUs of a
// full 8-GPU hive in SPX, one XGMI SDMA engine from rec_sdma_eng_map;
// otherwise every PCIe SDMA engine, or every XGMI one on an XGMI link to
// a GPU.
func kfdRecSDMA(g *amdGPUNode, to *kfdNode, out, in *kfdLink) {
	if to.gpu != nil && g.parts == 1 && g.hiveSize == 8 && g.physID < 8 && to.gpu.physID < 8 {
		out.rec = 1 << recSDMAEngine[g.physID][to.gpu.physID]
		in.rec = 1 << recSDMAEngine[to.gpu.physID][g.physID]
		return
	}
	pcie, xgmi := g.sdma()
	n, off := pcie, 0
	if out.typ == kfdLinkXGMI && to.gpu != nil && xgmi > 0 {
		n, off = xgmi, pcie
	}
	for i := range n {
		out.rec |= 1 << (i + off)
		in.rec |= 1 << (i + off)
	}
}

// sdma is the node's PCIe and XGMI SDMA engine counts: the GPU's, or
// its partition's even share of them, the first two for PCIe (a CPX
// MI300X partition: 2 and 0, as a CPX capture's KFD nodes read).
func (g *amdGPUNode) sdma() (pcie, xgmi int) {
	lay := g.dev.AMDGPU.layout()
	if g.parts == 1 {
		return lay.sdmaPCIe, lay.sdmaXGMI
	}
	all := (lay.sdmaPCIe + lay.sdmaXGMI) / g.parts
	pcie = min(all, lay.sdmaPCIe)
	return pcie, all - pcie
}

const kfdDir = "sys/devices/virtual/kfd/kfd"

// writeKFD writes the topology under the kfd device (sys/class/kfd/kfd
// links to it): system_properties, generation_id (1 at init, one more per
// GPU added) and nodes/<N>/ with gpu_id, name, properties (node_show's
// order), mem_banks, io_links, p2p_links and empty caches and perf.
func (b *builder) writeKFD(nodes []*kfdNode) {
	t := b.t
	top := kfdDir + "/topology"
	t.link("sys/class/kfd/kfd", kfdDir)
	t.link(kfdDir+"/subsystem", "sys/class/kfd")
	ngpu := 0
	for _, n := range nodes {
		if n.gpu != nil {
			ngpu++
		}
	}
	t.attr(top+"/generation_id", itoa(1+ngpu))
	// The DSDT's OEM ids, 0 where the kernel found none.
	t.raw(top+"/system_properties", []byte("platform_oem 0\nplatform_id 0\nplatform_rev 0\n"))
	clk := b.s.CPU.MaxMHz
	for id, n := range nodes {
		d := top + "/nodes/" + itoa(id)
		t.dir(d + "/caches")
		t.dir(d + "/perf")
		t.dir(d + "/io_links")
		t.dir(d + "/p2p_links")
		g := n.gpu
		var w strings.Builder
		prop := func(k string, v uint64) { fmt.Fprintf(&w, "%s %d\n", k, v) }
		u := func(v int) uint64 { return uint64(v) }
		if g == nil {
			t.attr(d+"/gpu_id", "0")
			t.attr(d+"/name", "")
			prop("cpu_cores_count", u(n.cpus))
			prop("simd_count", 0)
			prop("mem_banks_count", 1)
			prop("caches_count", 0)
			prop("io_links_count", u(len(n.io)))
			prop("p2p_links_count", u(len(n.p2p)))
			prop("cpu_core_id_base", u(n.cpuBase))
			for _, k := range []string{"simd_id_base", "max_waves_per_simd", "lds_size_in_kb", "gds_size_in_kb",
				"num_gws", "wave_front_size", "array_count", "simd_arrays_per_engine", "cu_per_simd_array",
				"simd_per_cu", "max_slots_scratch_cu", "gfx_target_version", "vendor_id", "device_id",
				"location_id", "domain", "drm_render_minor", "hive_id", "num_sdma_engines",
				"num_sdma_xgmi_engines", "num_sdma_queues_per_engine", "num_cp_queues"} {
				prop(k, 0)
			}
			prop("max_engine_clk_ccompute", u(clk))
			t.raw(d+"/properties", []byte(w.String()))
			t.raw(d+"/mem_banks/0/properties", []byte(fmt.Sprintf("heap_type 0\nsize_in_bytes %d\nflags 0\nwidth 0\nmem_clk_max 0\n", n.memBytes)))
		} else {
			a := g.dev.AMDGPU
			lay := a.layout()
			xcc := max(a.NumXCC, 1) / g.parts
			sdmaPCIe, sdmaXGMI := g.sdma()
			_, device, _, _, _ := b.kindDefaults(g.dev)
			dv, _ := parseHex(device)
			t.attr(d+"/gpu_id", itoa(g.gpuID))
			t.attr(d+"/name", lay.name) // amdgpu_asic_name[asic_type], lower case
			prop("cpu_cores_count", 0)
			prop("simd_count", u(a.SIMDCount/g.parts))
			prop("mem_banks_count", 1)
			prop("caches_count", 0)
			prop("io_links_count", u(len(n.io)))
			prop("p2p_links_count", u(len(n.p2p)))
			prop("cpu_core_id_base", 0)
			prop("simd_id_base", uint64(g.simdIDBase))
			prop("max_waves_per_simd", u(lay.maxWaves))
			prop("lds_size_in_kb", u(lay.ldsKiB))
			prop("gds_size_in_kb", 0)
			prop("num_gws", u(lay.numGWS))
			prop("wave_front_size", u(lay.wave))
			prop("array_count", u(lay.arraysPerXCC*xcc))
			prop("simd_arrays_per_engine", 1)
			prop("cu_per_simd_array", u(lay.cuPerArray))
			prop("simd_per_cu", u(lay.simdPerCU))
			prop("max_slots_scratch_cu", u(lay.scratchSlots))
			prop("gfx_target_version", u(lay.target))
			prop("vendor_id", amdVendor)
			prop("device_id", uint64(dv))
			// A partitioned GPU's node ORs its partition into the devfn
			// (kfd_topology.c: "if (gpu->kfd->num_nodes > 1)
			// location_id |= node_id"), and takes its partition's render
			// node (the GPU's own, then its XCP devices').
			loc := g.addr.Bus<<8 | g.addr.Dev<<3 | g.addr.Fn
			if g.parts > 1 {
				loc |= g.part
			}
			prop("location_id", u(loc))
			prop("domain", u(g.addr.Domain))
			prop("drm_render_minor", u(g.drm.render+g.part))
			prop("hive_id", g.hive)
			prop("num_sdma_engines", u(sdmaPCIe))
			prop("num_sdma_xgmi_engines", u(sdmaXGMI))
			prop("num_sdma_queues_per_engine", u(lay.sdmaQueues))
			prop("num_cp_queues", u(lay.cpQueues))
			prop("max_engine_clk_fcompute", u(lay.engineClkMHz))
			prop("local_mem_size", 0)
			prop("fw_version", 0)
			prop("capability", 0)
			prop("debug_prop", 0)
			prop("sdma_fw_version", 0)
			prop("unique_id", g.uniqueID)
			prop("num_xcc", u(xcc))
			prop("max_engine_clk_ccompute", u(clk))
			t.raw(d+"/properties", []byte(w.String()))
			t.raw(d+"/mem_banks/0/properties", []byte(fmt.Sprintf("heap_type 1\nsize_in_bytes %d\nflags 0\nwidth %d\nmem_clk_max %d\n", g.vramBytes, lay.vramWidth, lay.memClkMHz)))
		}
		for _, set := range []struct {
			dir   string
			links []*kfdLink
		}{{"io_links", n.io}, {"p2p_links", n.p2p}} {
			for i, l := range set.links {
				t.raw(d+"/"+set.dir+"/"+itoa(i)+"/properties", []byte(fmt.Sprintf(
					"type %d\nversion_major 0\nversion_minor 0\nnode_from %d\nnode_to %d\nweight %d\n"+
						"min_latency 0\nmax_latency 0\nmin_bandwidth %d\nmax_bandwidth %d\n"+
						"recommended_transfer_size 0\nrecommended_sdma_engine_id_mask %d\nflags %d\n",
					l.typ, l.from, l.to, l.weight, l.minBW, l.maxBW, l.rec, l.flags)))
			}
		}
	}
}

const drmMajor = 226

// writeDRM writes each GPU's DRM minors under its function
// (<fn>/drm/card<N>, renderD<M>), its spare XCP devices'
// (sys/devices/platform/amdgpu_xcp_<k>/drm/...), the sys/class/drm links,
// the XGMI files (xgmi_device_id, xgmi_physical_id, xgmi_hive_info) and
// the partition modes.
func (b *builder) writeDRM(gpus []*amdGPUNode) {
	t := b.t
	t.attr("sys/class/drm/version", "drm 1.1.0 20060810")
	minor := func(parent, name string, m int) {
		d := parent + "/drm/" + name
		t.attr(d+"/dev", fmt.Sprintf("%d:%d", drmMajor, m))
		t.attr(d+"/uevent", fmt.Sprintf("MAJOR=%d\nMINOR=%d\nDEVNAME=dri/%s\nDEVTYPE=drm_minor", drmMajor, m, name))
		t.link(d+"/device", parent)
		t.link(d+"/subsystem", "sys/class/drm")
		t.link("sys/class/drm/"+name, d)
	}
	spare := 0
	first := map[uint64]*amdGPUNode{}
	for _, g := range gpus {
		if g.part != 0 {
			continue // the function's files, written once
		}
		minor(g.dir, "card"+itoa(g.drm.card), g.drm.card)
		minor(g.dir, "renderD"+itoa(g.drm.render), g.drm.render)
		for j := 1; j < g.drm.nodes; j++ {
			name := "amdgpu_xcp_" + itoa(spare)
			spare++
			p := "sys/devices/platform/" + name
			t.attr(p+"/modalias", "platform:"+name)
			t.attr(p+"/uevent", "MODALIAS=platform:"+name)
			t.link(p+"/subsystem", "sys/bus/platform")
			t.link("sys/bus/platform/devices/"+name, p)
			minor(p, "card"+itoa(g.drm.card+j), g.drm.card+j)
			minor(p, "renderD"+itoa(g.drm.render+j), g.drm.render+j)
		}
		a := g.dev.AMDGPU
		if a.ComputePartition != "" {
			t.attr(g.dir+"/current_compute_partition", a.ComputePartition)
		}
		if a.MemoryPartition != "" {
			t.attr(g.dir+"/current_memory_partition", a.MemoryPartition)
		}
		if g.hive == 0 {
			continue
		}
		t.attr(g.dir+"/xgmi_device_id", strconv.FormatUint(g.devID, 10))
		t.attr(g.dir+"/xgmi_physical_id", itoa(g.physID))
		// The hive's directory hangs under its first device; the others
		// link to it, and it links to every member as node1..nodeN.
		h, ok := first[g.hive]
		if !ok {
			first[g.hive] = g
			t.attr(g.dir+"/xgmi_hive_info/xgmi_hive_id", strconv.FormatUint(g.hive, 10))
			h = g
		} else {
			t.link(g.dir+"/xgmi_hive_info", h.dir+"/xgmi_hive_info")
		}
		t.link(h.dir+"/xgmi_hive_info/node"+itoa(g.hivePos+1), g.dir)
	}
}

// writeAMDHealth writes each GPU's health counters under its function:
// ras/<block>_err_count ("ue: %lu\nce: %lu\n", umc with a "de: %lu"
// line; amdgpu_ras.c amdgpu_ras_sysfs_read) for the target's blocks,
// ras/features ("feature mask: 0x%x\n", amdgpu_ras_sysfs_features_read:
// the written blocks' bits and the socket id, taken to be the XGMI
// physical id, in bits 31:29), pcie_replay_count ("%llu\n",
// amdgpu_device_get_pcie_replay_count) and, for a hive member,
// xgmi_num_links (one "%02x " per hive node, the GPU itself 0, then a
// newline; amdgpu_xgmi_show_num_links) and xgmi_error ("%u\n",
// amdgpu_xgmi_show_error). A direct peer has one link (the 8-OAM MI300X
// board: 7 x16 links per GPU, one to each peer; KFD's max_bandwidth of
// the XGMI io_link is num_links x the one link's).
func (b *builder) writeAMDHealth(gpus []*amdGPUNode) {
	t := b.t
	for _, g := range gpus {
		if g.part != 0 {
			continue // the function's counters, written once
		}
		a := g.dev.AMDGPU
		var mask uint32
		for _, blk := range a.layout().ras {
			if blk.name == "xgmi_wafl" && g.hive == 0 {
				continue
			}
			c := a.RAS[blk.name]
			body := fmt.Sprintf("ue: %d\nce: %d\n", c.UE, c.CE)
			if blk.name == "umc" {
				body += fmt.Sprintf("de: %d\n", c.DE)
			}
			t.raw(g.dir+"/ras/"+blk.name+"_err_count", []byte(body))
			mask |= 1 << blk.bit
		}
		if g.hive != 0 {
			mask |= uint32(g.physID&7) << rasFeaturesSocketShift
		}
		t.raw(g.dir+"/ras/features", []byte(fmt.Sprintf("feature mask: 0x%x\n", mask)))
		// amdgpu_device_attr_sysfs_init leaves pcie_replay_count out on an
		// SR-IOV VF (amdgpu_sriov_vf): the MI300X VF a VM sees (1002:74b5).
		if !g.dev.Virtual && !strings.EqualFold(g.dev.Device, "0x74b5") {
			t.attr(g.dir+"/pcie_replay_count", strconv.FormatUint(a.PCIeReplayCount, 10))
		}
		if g.hive == 0 {
			continue
		}
		var w strings.Builder
		for q := range g.hiveSize {
			n := 0
			if g.hops[q] == 1 {
				n = 1
			}
			fmt.Fprintf(&w, "%02x ", n)
		}
		w.WriteString("\n")
		t.raw(g.dir+"/xgmi_num_links", []byte(w.String()))
		t.attr(g.dir+"/xgmi_error", strconv.FormatUint(a.XGMIError, 10))
	}
}

// peerMemoryDir is where ib_peer_mem keeps its clients (peer_mem.c:
// "memory_peers" under mm_kobj).
const peerMemoryDir = "sys/kernel/mm/memory_peers"

// writePeerMemory writes amdkfd's peer-memory client (kfd_peerdirect.c
// registers "amdkfd" with ib_register_peer_memory_client; peer_mem.c
// gives it version, "%s\n", and its counters, "%llu\n") where the kernel
// spec has one: by default where modules has amdgpu.
func (b *builder) writePeerMemory() {
	k := b.s.Kernel
	v := ""
	if slices.Contains(k.Modules, "amdgpu") {
		v = amdPeerMemoryVersion
	}
	if k.AMDPeerMemory != nil {
		v = *k.AMDPeerMemory
	}
	if v == "" {
		return
	}
	d := peerMemoryDir + "/amdkfd"
	b.t.attr(d+"/version", v)
	for _, c := range []string{"num_alloc_mrs", "num_dealloc_mrs", "num_reg_pages", "num_dereg_pages",
		"num_reg_bytes", "num_dereg_bytes", "num_free_callbacks"} {
		b.t.attr(d+"/"+c, "0")
	}
}
