// Checking the amdgpu blocks of a spec.

package fakesys

import (
	"fmt"
	"slices"
	"strings"
)

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
