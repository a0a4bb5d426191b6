package fakesys

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readProps reads a KFD "name value" properties file.
func readProps(t *testing.T, p string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("%s: line %q is not \"name value\"", p, line)
		}
		if _, dup := out[k]; dup {
			t.Fatalf("%s: %s twice", p, k)
		}
		out[k] = v
	}
	return out
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// links reads nodes/<n>/<dir>/<i>/properties for i = 0.. in order.
func links(t *testing.T, node, dir string) []map[string]string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(node, dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for i := range ents {
		out = append(out, readProps(t, filepath.Join(node, dir, strconv.Itoa(i), "properties")))
	}
	return out
}

// TestMI300XKFD checks the amd-mi300x KFD topology against values written
// by hand from the spec and the published layout: 2 CPU nodes (EPYC 9654,
// 96 cores x 2 threads each, SLIT 32 between them), then the 8 MI300X in
// bus order 05, 2b, 5b, 65 (CPU 0) and 7d, a5, d5, e7 (CPU 1), one fully
// connected XGMI hive (rocm-smi: weight 15, hops 1 for every pair), each
// GPU's PCIe link to its CPU weight 20 with 312/64000 MB/s and flags 1
// (the system-acceptance guide's rvs gpup output for node 2 -> 0).
func TestMI300XKFD(t *testing.T) {
	root := machineRoot(t, "amd-mi300x")
	top := filepath.Join(root, "sys/class/kfd/kfd/topology")
	ents, err := os.ReadDir(filepath.Join(top, "nodes"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	if want := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}; !slices.Equal(names, want) {
		t.Fatalf("KFD nodes %v, want %v", names, want)
	}
	if g := readTrim(t, filepath.Join(top, "generation_id")); g != "9" {
		t.Errorf("generation_id %s, want 9 (1 at init, one per GPU)", g)
	}
	if sp := readProps(t, filepath.Join(top, "system_properties")); len(sp) != 3 || sp["platform_oem"] != "0" {
		t.Errorf("system_properties %v", sp)
	}

	const hive = "8948189091943102200" // 0x7c2e5a91d04b36f8
	loc := []string{"1280", "11008", "23296", "25856", "32000", "42240", "54528", "59136"}
	gpuIDs := map[string]bool{}
	for cpu := range 2 {
		node := filepath.Join(top, "nodes", strconv.Itoa(cpu))
		if id := readTrim(t, filepath.Join(node, "gpu_id")); id != "0" {
			t.Errorf("CPU node %d gpu_id %s, want 0", cpu, id)
		}
		p := readProps(t, filepath.Join(node, "properties"))
		for k, want := range map[string]string{
			"cpu_cores_count": "192", "simd_count": "0", "io_links_count": "5", "p2p_links_count": "4",
			"cpu_core_id_base": strconv.Itoa(96 * cpu), "gfx_target_version": "0", "max_engine_clk_ccompute": "3700",
			"mem_banks_count": "1",
		} {
			if p[k] != want {
				t.Errorf("CPU node %d %s = %q, want %s", cpu, k, p[k], want)
			}
		}
		io := links(t, node, "io_links")
		if len(io) != 5 {
			t.Fatalf("CPU node %d has %d io_links, want 5", cpu, len(io))
		}
		// First the link to the other CPU (HyperTransport, the SLIT
		// distance), then the reverse PCIe link to each of its 4 GPUs.
		if l := io[0]; l["type"] != "1" || l["node_to"] != strconv.Itoa(1-cpu) || l["weight"] != "32" {
			t.Errorf("CPU node %d io_links/0 = %v, want type 1 to node %d weight 32", cpu, l, 1-cpu)
		}
		for j, l := range io[1:] {
			to := strconv.Itoa(2 + 4*cpu + j)
			if l["type"] != "2" || l["node_from"] != strconv.Itoa(cpu) || l["node_to"] != to || l["weight"] != "20" || l["flags"] != "3" {
				t.Errorf("CPU node %d io_links/%d = %v, want PCIe to node %s weight 20 flags 3 (non-coherent)", cpu, j+1, l, to)
			}
		}
	}
	for i := range 8 {
		n := 2 + i
		node := filepath.Join(top, "nodes", strconv.Itoa(n))
		id := readTrim(t, filepath.Join(node, "gpu_id"))
		if id == "0" || gpuIDs[id] {
			t.Errorf("GPU %d gpu_id %s: want nonzero and unique", i, id)
		}
		gpuIDs[id] = true
		if name := readTrim(t, filepath.Join(node, "name")); name != "ip discovery" {
			t.Errorf("GPU %d name %q", i, name)
		}
		p := readProps(t, filepath.Join(node, "properties"))
		for k, want := range map[string]string{
			"cpu_cores_count": "0", "simd_count": "1216", "num_xcc": "8", "gfx_target_version": "90402",
			"vendor_id": "4098", "device_id": "29857", "location_id": loc[i], "domain": "0",
			"drm_render_minor": strconv.Itoa(128 + 8*i), "hive_id": hive,
			"io_links_count": "8", "p2p_links_count": "1", "num_sdma_xgmi_engines": "14",
			"simd_per_cu": "4", "array_count": "32", "mem_banks_count": "1",
		} {
			if p[k] != want {
				t.Errorf("GPU %d (node %d) %s = %q, want %s", i, n, k, p[k], want)
			}
		}
		if len(p) != 38 {
			t.Errorf("GPU %d properties has %d keys, want the 38 node_show prints for a GPU", i, len(p))
		}
		cpu := i / 4
		io := links(t, node, "io_links")
		if len(io) != 8 {
			t.Fatalf("GPU %d has %d io_links, want 8", i, len(io))
		}
		up := io[0]
		for k, want := range map[string]string{"type": "2", "node_from": strconv.Itoa(n), "node_to": strconv.Itoa(cpu),
			"weight": "20", "min_bandwidth": "312", "max_bandwidth": "64000", "flags": "1"} {
			if up[k] != want {
				t.Errorf("GPU %d io_links/0 %s = %q, want %s", i, k, up[k], want)
			}
		}
		var peers []int
		for _, l := range io[1:] {
			if l["type"] != "11" || l["weight"] != "15" || l["node_from"] != strconv.Itoa(n) || l["flags"] != "1" {
				t.Errorf("GPU %d XGMI link %v, want type 11 weight 15 flags 1", i, l)
			}
			to, _ := strconv.Atoi(l["node_to"])
			peers = append(peers, to)
		}
		var want []int
		for j := range 8 {
			if j != i {
				want = append(want, 2+j)
			}
		}
		if !slices.Equal(peers, want) {
			t.Errorf("GPU %d XGMI peers %v, want %v", i, peers, want)
		}
		// The indirect link to the other CPU: PCIe 20 + CPU-CPU 32.
		p2p := links(t, node, "p2p_links")
		if len(p2p) != 1 || p2p[0]["node_to"] != strconv.Itoa(1-cpu) || p2p[0]["weight"] != "52" {
			t.Errorf("GPU %d p2p_links %v, want one to node %d weight 52", i, p2p, 1-cpu)
		}
	}
	if len(gpuIDs) != 8 {
		t.Errorf("%d gpu_ids", len(gpuIDs))
	}
}

// TestMI300XDRM checks the DRM and XGMI entries: eight DRM devices per
// MI300 (ROCm/rocDecode#38), so GPU i's nodes are card8i and renderD
// 128+8i, under its PCI function; the seven spare XCP devices each follow
// under sys/devices/platform; every member of the hive shows its hive.
func TestMI300XDRM(t *testing.T) {
	root := machineRoot(t, "amd-mi300x")
	bdfs := []string{"0000:05:00.0", "0000:2b:00.0", "0000:5b:00.0", "0000:65:00.0", "0000:7d:00.0", "0000:a5:00.0", "0000:d5:00.0", "0000:e7:00.0"}
	real := func(p string) string {
		t.Helper()
		r, err := filepath.EvalSymlinks(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	fnDir := func(bdf string) string { return real("sys/bus/pci/devices/" + bdf) }
	hiveDir := filepath.Join(fnDir(bdfs[0]), "xgmi_hive_info")
	for i, bdf := range bdfs {
		fn := fnDir(bdf)
		for _, name := range []string{"card" + strconv.Itoa(8*i), "renderD" + strconv.Itoa(128+8*i)} {
			if got, want := real("sys/class/drm/"+name), filepath.Join(fn, "drm", name); got != want {
				t.Errorf("sys/class/drm/%s -> %s, want %s", name, got, want)
			}
			if got := real("sys/class/drm/" + name + "/device"); got != fn {
				t.Errorf("sys/class/drm/%s/device -> %s, want %s", name, got, fn)
			}
		}
		if got := readTrim(t, filepath.Join(root, "sys/class/drm", "renderD"+strconv.Itoa(128+8*i), "dev")); got != "226:"+strconv.Itoa(128+8*i) {
			t.Errorf("renderD%d dev %s", 128+8*i, got)
		}
		for j := 1; j < 8; j++ {
			name := "renderD" + strconv.Itoa(128+8*i+j)
			want := filepath.Join(root, "sys/devices/platform/amdgpu_xcp_"+strconv.Itoa(7*i+j-1))
			if got := real("sys/class/drm/" + name + "/device"); got != want {
				t.Errorf("%s/device -> %s, want %s", name, got, want)
			}
		}
		for f, want := range map[string]string{
			"current_compute_partition": "SPX", "current_memory_partition": "NPS1",
			"xgmi_physical_id": strconv.Itoa(i), "xgmi_device_id": strconv.FormatUint(0x3f1a0c5e9b720001+uint64(i), 10),
			"xgmi_hive_info/xgmi_hive_id": "8948189091943102200",
		} {
			if got := readTrim(t, filepath.Join(fn, f)); got != want {
				t.Errorf("%s/%s = %q, want %q", bdf, f, got, want)
			}
		}
		if got, _ := filepath.EvalSymlinks(filepath.Join(fn, "xgmi_hive_info")); got != hiveDir {
			t.Errorf("%s/xgmi_hive_info is %s, want the first member's %s", bdf, got, hiveDir)
		}
		if got, _ := filepath.EvalSymlinks(filepath.Join(hiveDir, "node"+strconv.Itoa(i+1))); got != fn {
			t.Errorf("xgmi_hive_info/node%d -> %s, want %s", i+1, got, fn)
		}
	}
	ents, err := os.ReadDir(filepath.Join(root, "sys/class/drm"))
	if err != nil {
		t.Fatal(err)
	}
	var cards, renders int
	for _, e := range ents {
		switch {
		case strings.HasPrefix(e.Name(), "card"):
			cards++
		case strings.HasPrefix(e.Name(), "renderD"):
			renders++
		}
	}
	if cards != 64 || renders != 64 {
		t.Errorf("sys/class/drm has %d cards and %d render nodes, want 64 and 64", cards, renders)
	}
}

// Machines without amdgpu blocks get no KFD or DRM tree.
func TestNoKFDWithoutAMDGPU(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	for _, p := range []string{"sys/class/kfd", "sys/devices/virtual/kfd", "sys/class/drm"} {
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("dgx-h100 has %s (%v)", p, err)
		}
	}
}

func TestCRC16(t *testing.T) {
	// The CRC-16/ARC check value (the kernel's crc16, init 0).
	if got := crc16(0, []byte("123456789")); got != 0xbb3d {
		t.Errorf("crc16(123456789) = %#04x, want 0xbb3d", got)
	}
}

func TestGFXTarget(t *testing.T) {
	for name, want := range map[string]int{"gfx942": 90402, "gfx90a": 90010, "gfx1100": 110000, "gfx1030": 100300} {
		if got, ok := gfxTarget(name); !ok || got != want {
			t.Errorf("gfxTarget(%s) = %d, %v, want %d", name, got, ok, want)
		}
	}
	for _, bad := range []string{"", "gfx", "gfx9", "942", "gfxzz2"} {
		if _, ok := gfxTarget(bad); ok {
			t.Errorf("gfxTarget(%q) accepted", bad)
		}
	}
}

// amdPair is two MI300X without a hive on one socket: PCIe only.
const amdPair = `
name: amd-pair
cpu: {vendor: AuthenticAMD, sockets: 1, cores_per_socket: 4, threads_per_core: 1}
numa:
  nodes: [{id: 0, socket: 0, memory_gib: 64}]
pci:
  - host_bridge: "0000:10"
    numa: 0
    devices:
      - bdf: "0000:10:01.0"
        kind: bridge
        children:
          - bdf: "0000:11:00.0"
            kind: other
            class: "0x120000"
            vendor: "0x1002"
            device: "0x74a1"
            amdgpu: {index: 0, gfx: gfx942, simd_count: 1216, num_xcc: 8, vram_gib: 192}
      - bdf: "0000:10:02.0"
        kind: bridge
        children:
          - bdf: "0000:12:00.0"
            kind: other
            class: "0x120000"
            vendor: "0x1002"
            device: "0x74a1"
            amdgpu: {index: 1, gfx: gfx942, simd_count: 1216, num_xcc: 8, vram_gib: 192}
`

// TestAMDPCIeOnly: GPUs outside a common hive get no XGMI links but p2p
// PCIe links between them of the two PCIe weights, 20 + 20: rocm-smi's
// weight 40 for PCIe-only AMD GPUs behind one CPU. Default DRM minors
// are card0/renderD128 and card1/renderD129.
func TestAMDPCIeOnly(t *testing.T) {
	s, err := Parse("amd-pair.yaml", []byte(amdPair))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := Build(s, root); err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(root, "sys/class/kfd/kfd/topology/nodes")
	for i, n := range []string{"1", "2"} {
		io := links(t, filepath.Join(top, n), "io_links")
		if len(io) != 1 || io[0]["type"] != "2" || io[0]["node_to"] != "0" {
			t.Errorf("GPU %d io_links %v, want only its PCIe link", i, io)
		}
		p2p := links(t, filepath.Join(top, n), "p2p_links")
		other := []string{"2", "1"}[i]
		if len(p2p) != 1 || p2p[0]["node_to"] != other || p2p[0]["weight"] != "40" || p2p[0]["type"] != "2" || p2p[0]["flags"] != "3" {
			t.Errorf("GPU %d p2p_links %v, want one PCIe link to node %s weight 40 flags 3", i, p2p, other)
		}
		if p := readProps(t, filepath.Join(top, n, "properties")); p["hive_id"] != "0" || p["drm_render_minor"] != strconv.Itoa(128+i) {
			t.Errorf("GPU %d hive_id %s drm_render_minor %s", i, p["hive_id"], p["drm_render_minor"])
		}
		fn := filepath.Join(root, "sys/class/drm", "card"+strconv.Itoa(i), "device")
		if _, err := os.Stat(filepath.Join(fn, "xgmi_device_id")); !os.IsNotExist(err) {
			t.Errorf("GPU %d outside a hive has xgmi_device_id (%v)", i, err)
		}
	}
}

func TestAMDGPURejects(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"gfx", "index: 0, gfx: gfx942", "index: 0, gfx: gfx90a", "amdgpu.gfx"},
		{"target version", "index: 0, gfx: gfx942", "index: 0, gfx: gfx942, gfx_target_version: 90400", "amdgpu.gfx_target_version"},
		{"simd count", "index: 0, gfx: gfx942, simd_count: 1216", "index: 0, gfx: gfx942, simd_count: 1217", "amdgpu.simd_count"},
		{"vram", "num_xcc: 8, vram_gib: 192}\n      - bdf", "num_xcc: 8, vram_gib: 0}\n      - bdf", "amdgpu.vram_gib"},
		{"index gap", "index: 1,", "index: 2,", "amdgpu indexes"},
		{"kind", "kind: other\n            class: \"0x120000\"\n            vendor: \"0x1002\"\n            device: \"0x74a1\"\n            amdgpu: {index: 0", "kind: nic\n            class: \"0x120000\"\n            vendor: \"0x1002\"\n            device: \"0x74a1\"\n            amdgpu: {index: 0", "kind nic"},
		{"vendor", "vendor: \"0x1002\"\n            device: \"0x74a1\"\n            amdgpu: {index: 0", "vendor: \"0x10de\"\n            device: \"0x74a1\"\n            amdgpu: {index: 0", "0x1002"},
		{"render minor", "index: 0, gfx: gfx942", "index: 0, render_minor: 64, gfx: gfx942", "amdgpu.render_minor"},
		{"render clash", "index: 0, gfx: gfx942", "index: 0, render_minor: 129, gfx: gfx942", "amdgpu.card"},
		{"gpu id", "index: 0, gfx: gfx942", "index: 0, gpu_id: 70000, gfx: gfx942", "amdgpu.gpu_id"},
		{"partition", "index: 0, gfx: gfx942", "index: 0, compute_partition: CPX, gfx: gfx942", "amdgpu.compute_partition"},
		{"memory partition", "index: 0, gfx: gfx942", "index: 0, memory_partition: NPS4, gfx: gfx942", "amdgpu.memory_partition"},
		{"hive id", "index: 0, gfx: gfx942", "index: 0, xgmi_hive: \"hive\", gfx: gfx942", "amdgpu.xgmi_hive"},
		{"peers without hive", "index: 0, gfx: gfx942", "index: 0, xgmi_peers: all, gfx: gfx942", "amdgpu.xgmi_hive"},
		{"peer not in hive", "index: 0, gfx: gfx942", "index: 0, xgmi_hive: \"0x1\", xgmi_peers: [1], gfx: gfx942", "amdgpu.xgmi_peers"},
		{"peers word", "index: 0, gfx: gfx942", "index: 0, xgmi_peers: some, gfx: gfx942", "xgmi_peers"},
		{"unknown field", "index: 0, gfx: gfx942", "index: 0, gfx_name: x, gfx: gfx942", "gfx_name"},
		{"cpu-less node", "nodes: [{id: 0, socket: 0, memory_gib: 64}]", "nodes: [{id: 0, socket: 0, memory_gib: 64}, {id: 1, memory_gib: 8}]", "NUMA nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(amdPair, tc.old) {
				t.Fatalf("test case does not apply: %q not in the spec", tc.old)
			}
			_, err := Parse("amd-pair.yaml", []byte(strings.Replace(amdPair, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("Parse accepted a bad spec")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "amd-pair.yaml") {
				t.Errorf("error %q does not name the file and %q", err, tc.want)
			}
		})
	}
}

// Two GPUs of one hive link over XGMI (weight 15, one hop); hop counts
// through chains of direct links.
func TestAMDHiveHops(t *testing.T) {
	spec := strings.Replace(amdPair, "index: 0, gfx: gfx942", "index: 0, xgmi_hive: \"0x1\", gfx: gfx942", 1)
	spec = strings.Replace(spec, "index: 1, gfx: gfx942", "index: 1, xgmi_hive: \"0x1\", gfx: gfx942", 1)
	s, err := Parse("amd-pair.yaml", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := Build(s, root); err != nil {
		t.Fatal(err)
	}
	io := links(t, filepath.Join(root, "sys/class/kfd/kfd/topology/nodes/2"), "io_links")
	if len(io) != 2 || io[1]["type"] != "11" || io[1]["weight"] != "15" || io[1]["node_to"] != "1" {
		t.Errorf("GPU 1 io_links %v, want PCIe then XGMI to node 1 weight 15", io)
	}
	// The path search on a made-up chain 0 - 2 - 1, and a one-way list.
	member := func(idx int, peers ...int) amdEntry {
		return amdEntry{addr: bdf{Bus: 0x20 + idx}, dev: &Device{AMDGPU: &AMDGPU{Index: idx, XGMIHive: "0x1", XGMIPeers: XGMIPeers{Indexes: peers, Set: true}}}}
	}
	hops, err := hiveHops([]amdEntry{member(0, 2), member(1, 2), member(2, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if hops[0][1] != 2 || hops[0][2] != 1 || hops[1][2] != 1 || hops[1][0] != 2 {
		t.Errorf("hops %v, want 0-1 two hops, each one hop to the middle", hops)
	}
	if _, err := hiveHops([]amdEntry{member(0, 1), member(1)}); err == nil || !strings.Contains(err.Error(), "does not list") {
		t.Errorf("one-way peer list: %v", err)
	}
	if _, err := hiveHops([]amdEntry{member(0), member(1)}); err == nil || !strings.Contains(err.Error(), "cannot be reached") {
		t.Errorf("unconnected hive: %v", err)
	}
}
