package fakesys

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMI300XCPXKFD checks amd-mi300x-cpx's KFD nodes against the values
// of a real MI300X node in CPX (ROCm/k8s-device-plugin
// testdata/topo-mi300-cpx, nodes 2-9 of the GPU at bus 05): location_id
// bus<<8 | partition, drm_render_minor 128 + partition, simd_count 152,
// num_xcc 1, array_count 4, 2 PCIe and 0 XGMI SDMA engines, one
// unique_id and hive_id for the GPU's 8 nodes; io_links: PCIe to the CPU
// node (weight 20, 0 MB/s min in the capture, 312 here as on SPX), then
// XGMI to every other GPU node in node order, 13 and 819200/819200
// inside the GPU, 41 and 0/0 to the other GPUs, SDMA mask 3 on all; CPU
// node 0 with 33 io_links (node 1 and GPUs 0-3's 32 partitions).
func TestMI300XCPXKFD(t *testing.T) {
	root := machineRoot(t, "amd-mi300x-cpx")
	nodes := filepath.Join(root, "sys/class/kfd/kfd/topology/nodes")
	ents, err := os.ReadDir(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2+64 {
		t.Fatalf("%d KFD nodes, want 66 (2 CPU + 64 partitions)", len(ents))
	}
	if n := len(links(t, filepath.Join(nodes, "0"), "io_links")); n != 33 {
		t.Errorf("CPU node 0: %d io_links, want 33", n)
	}
	gpuIDs := map[string]bool{}
	for g, bus := range []int{0x05, 0x2b, 0x5b, 0x65, 0x7d, 0xa5, 0xd5, 0xe7} {
		var unique string
		for p := range 8 {
			id := 2 + 8*g + p
			dir := filepath.Join(nodes, strconv.Itoa(id))
			props := readProps(t, filepath.Join(dir, "properties"))
			for k, want := range map[string]string{
				"location_id": strconv.Itoa(bus<<8 | p), "drm_render_minor": strconv.Itoa(128 + 8*g + p),
				"simd_count": "152", "num_xcc": "1", "array_count": "4", "num_sdma_engines": "2",
				"num_sdma_xgmi_engines": "0", "hive_id": strconv.FormatUint(0x7c2e5a91d04b36f8, 10),
				"io_links_count": "64", "p2p_links_count": "1",
			} {
				if props[k] != want {
					t.Errorf("node %d: %s %s, want %s", id, k, props[k], want)
				}
			}
			if unique == "" {
				unique = props["unique_id"]
			} else if props["unique_id"] != unique {
				t.Errorf("node %d: unique_id %s, the GPU's first node has %s", id, props["unique_id"], unique)
			}
			gid := readTrim(t, filepath.Join(dir, "gpu_id"))
			if gpuIDs[gid] {
				t.Errorf("node %d: gpu_id %s twice", id, gid)
			}
			gpuIDs[gid] = true
			// 24 GiB: 192 GiB over 4 NPS4 partitions over 2 XCDs each.
			if mem := readProps(t, filepath.Join(dir, "mem_banks/0/properties")); mem["size_in_bytes"] != strconv.Itoa(24<<30) {
				t.Errorf("node %d: memory %s, want 24 GiB", id, mem["size_in_bytes"])
			}
			ls := links(t, dir, "io_links")
			if ls[0]["type"] != "2" || ls[0]["node_to"] != strconv.Itoa(g/4) || ls[0]["weight"] != "20" {
				t.Errorf("node %d: io_link 0 %v, want PCIe to CPU node %d", id, ls[0], g/4)
			}
			prev := -1
			for _, l := range ls[1:] {
				to, _ := strconv.Atoi(l["node_to"])
				same := (to-2)/8 == g
				w, bw := "41", "0"
				if same {
					w, bw = "13", "819200"
				}
				if l["type"] != "11" || to == id || to <= prev || l["weight"] != w || l["max_bandwidth"] != bw ||
					l["min_bandwidth"] != bw || l["recommended_sdma_engine_id_mask"] != "3" {
					t.Errorf("node %d -> %d: %v, want XGMI weight %s, %s MB/s, mask 3, in node order", id, to, l, w, bw)
				}
				prev = to
			}
		}
	}
	// The function's files, once: the GPU's render node on the function,
	// partition p>0's on its XCP device.
	fn := filepath.Join(root, "sys/bus/pci/devices/0000:05:00.0")
	if c := readTrim(t, filepath.Join(fn, "current_compute_partition")); c != "CPX" {
		t.Errorf("current_compute_partition %q", c)
	}
	if m := readTrim(t, filepath.Join(fn, "current_memory_partition")); m != "NPS4" {
		t.Errorf("current_memory_partition %q", m)
	}
	if _, err := os.Stat(filepath.Join(root, "sys/devices/platform/amdgpu_xcp_6/drm/renderD135")); err != nil {
		t.Errorf("partition 7 of GPU 0: %v", err)
	}
}

// TestAMDPartitionRejects: modes a GPU cannot take are errors naming the
// field.
func TestAMDPartitionRejects(t *testing.T) {
	base, err := os.ReadFile("testdata/machines/amd-mi300x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"tpx", "compute_partition: SPX", "compute_partition: TPX", "TPX"},
		{"nps4 with spx", "memory_partition: NPS1", "memory_partition: NPS4", "NPS4 needs at least 4"},
		{"nps4 with qpx", "compute_partition: SPX, memory_partition: NPS1", "compute_partition: QPX, memory_partition: NPS4", "with CPX only"},
		{"nps2 on gfx942", "compute_partition: SPX, memory_partition: NPS1", "compute_partition: CPX, memory_partition: NPS2", "NPS1 and NPS4"},
		{"hive of two modes", "compute_partition: SPX", "compute_partition: CPX", "one mode per hive"},
		{"drm nodes", "drm_nodes: 8,\n                                     xgmi_hive: \"0x7c2e5a91d04b36f8\", xgmi_device_id: \"0x3f1a0c5e9b720001\", xgmi_physical_id: 0,\n                                     xgmi_peers: all, compute_partition: SPX",
			"drm_nodes: 4,\n                                     xgmi_hive: \"0x7c2e5a91d04b36f8\", xgmi_device_id: \"0x3f1a0c5e9b720001\", xgmi_physical_id: 0,\n                                     xgmi_peers: all, compute_partition: CPX", "drm_nodes 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := string(base)
			if !strings.Contains(s, tc.old) {
				t.Fatalf("test case does not apply: %q not in the spec", tc.old)
			}
			_, err := Parse("amd-mi300x.yaml", []byte(strings.Replace(s, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "amdgpu.") {
				t.Errorf("error %v, want one naming the amdgpu field and %q", err, tc.want)
			}
		})
	}
}
