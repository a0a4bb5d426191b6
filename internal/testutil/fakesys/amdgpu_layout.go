// The gfx targets the builder models (gfxLayouts) and what a GPU's
// target and partition mode give.

package fakesys

import (
	"strconv"
	"strings"
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
