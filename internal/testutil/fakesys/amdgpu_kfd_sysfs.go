// Writing the KFD topology into sysfs.

package fakesys

import (
	"fmt"
	"strings"
)

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
