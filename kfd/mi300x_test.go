package kfd

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs/rootfstest"
)

// tree is a sysfs tree written by hand, put in memory or on disk.
type tree struct {
	files map[string]string
	links map[string]string // path -> target, relative to the link's directory
	dirs  []string
}

func newTree() *tree { return &tree{files: map[string]string{}, links: map[string]string{}} }

func (t *tree) file(p, s string)      { t.files[p] = s }
func (t *tree) link(p, target string) { t.links[p] = target }
func (t *tree) dir(p string)          { t.dirs = append(t.dirs, p) }
func (t *tree) remove(prefix string) {
	t.removeIf(func(p string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") })
}
func (t *tree) removeIf(f func(string) bool) {
	for p := range t.files {
		if f(p) {
			delete(t.files, p)
		}
	}
	for p := range t.links {
		if f(p) {
			delete(t.links, p)
		}
	}
}

func (t *tree) memory() *rootfs.Root {
	m := rootfs.NewMemory("mi300x")
	for _, d := range t.dirs {
		m.Dir(d)
	}
	for p, s := range t.files {
		m.File(p, []byte(s))
	}
	for p, target := range t.links {
		m.Link(p, target)
	}
	return m.Root()
}

// disk writes the tree under a temporary directory and returns it.
func (t *tree) disk(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	for _, d := range t.dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for p, s := range t.files {
		if err := os.MkdirAll(filepath.Join(dir, path.Dir(p)), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o444); err != nil {
			tb.Fatal(err)
		}
	}
	for p, target := range t.links {
		if err := os.MkdirAll(filepath.Join(dir, path.Dir(p)), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, p)); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func (t *tree) diskRoot(tb testing.TB) *rootfs.Root { return rootfstest.Open(tb, t.disk(tb)) }

// The MI300X machine below is AMD's 8-GPU platform as the
// system-acceptance guide lays it out (ROCm/system-acceptance-docs
// docs/network/topology-mapping.md): GPUs at 05:00.0, 2b:00.0, 5b:00.0,
// 65:00.0 on CPU 0 and 7d:00.0, a5:00.0, d5:00.0, e7:00.0 on CPU 1
// (the PCIe switches between root port and GPU are left out: this
// package does not walk them), two AMD EPYC sockets, every GPU pair one
// XGMI hop apart (rocm-smi weight 15, hops 1: frontier.md §4.2).
//
// KFD's numbers, from the kernel source:
//   - nodes 0, 1 are the CPU NUMA nodes, 2..9 the GPUs in probe order
//     (kfd_topology_init, kfd_topology_add_device_locked);
//   - a GPU's io_links: PCIe to its NUMA node, weight 20, then XGMI to
//     each other GPU of the hive, weight 15 × 1 hop (kfd_crat.c
//     kfd_fill_gpu_direct_io_link_to_cpu, kfd_fill_gpu_xgmi_link_to_gpu,
//     kfd_parse_subtype_iolink); flags Enabled (kfd_topology.c
//     kfd_fill_iolink_non_crat_info);
//   - PCIe bandwidth min x1 Gen1 = 2500/8 = 312 MB/s, max x16 Gen5 =
//     16 × 32000/8 = 64000 MB/s (amdgpu_amdkfd_get_pcie_bandwidth_mbytes);
//     XGMI per peer one x16 link at 25 Gb/s = 16 × 25000/8 = 50000 MB/s
//     (amdgpu_amdkfd_get_xgmi_bandwidth_mbytes);
//   - a CPU node's io_links: the other CPU (HyperTransport on AMD CPUs,
//     weight the SLIT distance, 32 on a two-socket EPYC; flags 0), then
//     the PCIe links back from its four GPUs (a large-BAR GPU's links
//     are bidirectional), flags Enabled|NonCoherent;
//   - p2p_links: each GPU one indirect PCIe path to the other CPU,
//     weight 20 + 32 = 52, bandwidth min(PCIe, CPU link = 0) = 0; each
//     CPU the reverse four, flags Enabled|NonCoherent
//     (kfd_create_indirect_link_prop).
//
// The ids KFD and amdgpu hash or read from firmware (gpu_id, unique_id,
// hive_id, xgmi_device_id) are not published for any machine; the
// values here are made up, one per GPU.
var (
	gpuBus      = []string{"05", "2b", "5b", "65", "7d", "a5", "d5", "e7"}
	gpuRootBus  = []string{"00", "18", "48", "60", "78", "98", "c8", "e0"}
	gpuLocation = []uint32{1280, 11008, 23296, 25856, 32000, 42240, 54528, 59136} // bus << 8, by hand
	gpuIDs      = []uint32{53302, 26069, 45150, 11283, 4619, 63218, 36707, 19464}
	uniqueIDs   = []uint64{1479215874912137401, 3458794173021093817, 7204817401937812473, 9163018239411084537,
		2341087412309871241, 5834019874123098123, 8123409871230981237, 1230498712309481234}
	xgmiDevIDs = []uint64{6442450944, 6442451200, 6442451456, 6442451712, 6442451968, 6442452224, 6442452480, 6442452736}
)

const (
	hiveID      = 12278230016431186561
	kfdClass    = "sys/class/kfd/kfd"
	kfdDevice   = "sys/devices/virtual/kfd/kfd"
	nodesOnDisk = kfdDevice + "/topology/nodes"
)

func pciDir(i int) string {
	return fmt.Sprintf("sys/devices/pci0000:%s/0000:%s:01.1/0000:%s:00.0", gpuRootBus[i], gpuRootBus[i], gpuBus[i])
}

func gpuAddr(i int) string { return "0000:" + gpuBus[i] + ":00.0" }

func cpuProps(ioLinks, p2pLinks int) string {
	return fmt.Sprintf(`cpu_cores_count 192
simd_count 0
mem_banks_count 1
caches_count 0
io_links_count %d
p2p_links_count %d
cpu_core_id_base 0
simd_id_base 0
max_waves_per_simd 0
lds_size_in_kb 0
gds_size_in_kb 0
num_gws 0
wave_front_size 0
array_count 0
simd_arrays_per_engine 0
cu_per_simd_array 0
simd_per_cu 0
max_slots_scratch_cu 0
gfx_target_version 0
vendor_id 0
device_id 0
location_id 0
domain 0
drm_render_minor 0
hive_id 0
num_sdma_engines 0
num_sdma_xgmi_engines 0
num_sdma_queues_per_engine 0
num_cp_queues 0
max_engine_clk_ccompute 3707
`, ioLinks, p2pLinks)
}

// gpuProps is node_show's output for MI300X GPU i, in its order.
func gpuProps(i int) string {
	return fmt.Sprintf(`cpu_cores_count 0
simd_count 1216
mem_banks_count 1
caches_count 459
io_links_count 8
p2p_links_count 1
cpu_core_id_base 0
simd_id_base %d
max_waves_per_simd 8
lds_size_in_kb 64
gds_size_in_kb 0
num_gws 64
wave_front_size 64
array_count 32
simd_arrays_per_engine 1
cu_per_simd_array 10
simd_per_cu 4
max_slots_scratch_cu 32
gfx_target_version 90402
vendor_id 4098
device_id 29857
location_id %d
domain 0
drm_render_minor %d
hive_id %d
num_sdma_engines 2
num_sdma_xgmi_engines 14
num_sdma_queues_per_engine 8
num_cp_queues 24
max_engine_clk_fcompute 2100
local_mem_size 0
fw_version 177
capability 746554112
debug_prop 1511
sdma_fw_version 19
unique_id %d
num_xcc 8
max_engine_clk_ccompute 3707
`, 2147487744+i*2048, gpuLocation[i], 128+i, uint64(hiveID), uniqueIDs[i])
}

func linkProps(typ, from, to, weight, minBW, maxBW, flags int) string {
	return fmt.Sprintf(`type %d
version_major 0
version_minor 0
node_from %d
node_to %d
weight %d
min_latency 0
max_latency 0
min_bandwidth %d
max_bandwidth %d
recommended_transfer_size 0
recommended_sdma_engine_id_mask 0
flags %d
`, typ, from, to, weight, minBW, maxBW, flags)
}

func node(id int) string { return fmt.Sprintf("%s/%d", nodesOnDisk, id) }

// mi300x lays out the machine described above.
func mi300x() *tree {
	t := newTree()
	t.link(kfdClass, "../../devices/virtual/kfd/kfd")
	t.file(kfdDevice+"/topology/generation_id", "9\n")
	t.file(kfdDevice+"/topology/system_properties", "platform_oem 2314885531281050945\nplatform_id 8241994366303052120\nplatform_rev 2\n")
	for cpu := 0; cpu < 2; cpu++ {
		n := node(cpu)
		t.file(n+"/gpu_id", "0\n")
		t.file(n+"/name", "\n")
		t.file(n+"/properties", cpuProps(5, 4))
		t.dir(n + "/mem_banks/0")
		t.file(n+"/io_links/0/properties", linkProps(1, cpu, 1-cpu, 32, 0, 0, 0))
		for j := 0; j < 4; j++ {
			gpu := 2 + 4*cpu + j
			t.file(fmt.Sprintf("%s/io_links/%d/properties", n, 1+j), linkProps(2, cpu, gpu, 20, 312, 64000, 3))
			far := 2 + 4*(1-cpu) + j
			t.file(fmt.Sprintf("%s/p2p_links/%d/properties", n, j), linkProps(2, cpu, far, 52, 0, 0, 3))
		}
	}
	for i := 0; i < 8; i++ {
		id, cpu := 2+i, i/4
		n := node(id)
		t.file(n+"/gpu_id", fmt.Sprintf("%d\n", gpuIDs[i]))
		t.file(n+"/name", "ip discovery\n")
		t.file(n+"/properties", gpuProps(i))
		t.file(n+"/io_links/0/properties", linkProps(2, id, cpu, 20, 312, 64000, 1))
		m := 1
		for j := 0; j < 8; j++ {
			if j != i {
				t.file(fmt.Sprintf("%s/io_links/%d/properties", n, m), linkProps(11, id, 2+j, 15, 50000, 50000, 1))
				m++
			}
		}
		t.file(n+"/p2p_links/0/properties", linkProps(2, id, 1-cpu, 52, 0, 0, 1))

		dev := pciDir(i)
		t.link("sys/bus/pci/devices/"+gpuAddr(i), "../../../"+dev[len("sys/"):])
		t.file(dev+"/vendor", "0x1002\n")
		t.file(dev+"/device", "0x74a1\n")
		t.file(dev+"/xgmi_device_id", fmt.Sprintf("%d\n", xgmiDevIDs[i]))
		t.file(dev+"/xgmi_physical_id", fmt.Sprintf("%d\n", i))
		if i == 0 {
			t.file(dev+"/xgmi_hive_info/xgmi_hive_id", fmt.Sprintf("%d\n", uint64(hiveID)))
		} else {
			// The hive's directory lives under its first GPU; the others
			// link to it (amdgpu_xgmi_sysfs_add_dev_info).
			t.link(dev+"/xgmi_hive_info", "../../../pci0000:00/0000:00:01.1/0000:05:00.0/xgmi_hive_info")
		}
		t.link(fmt.Sprintf("%s/xgmi_hive_info/node%d", pciDir(0), i+1), "../../../../"+dev[len("sys/devices/"):])
		t.file(fmt.Sprintf("%s/drm/card%d/dev", dev, i+1), fmt.Sprintf("226:%d\n", i+1))
		t.file(fmt.Sprintf("%s/drm/renderD%d/dev", dev, 128+i), fmt.Sprintf("226:%d\n", 128+i))
		t.file(dev+"/current_compute_partition", "SPX\n")
		t.file(dev+"/current_memory_partition", "NPS1\n")
		t.file(dev+"/available_compute_partition", "SPX, DPX, QPX, CPX\n")
	}
	return t
}
