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
		{"gfx", "index: 0, gfx: gfx942", "index: 0, gfx: gfx908", "amdgpu.gfx"},
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
		{"ras block", "index: 0, gfx: gfx942", "index: 0, ras: {vcn: {ue: 1}}, gfx: gfx942", `amdgpu.ras: "vcn"`},
		{"ras xgmi outside a hive", "index: 0, gfx: gfx942", "index: 0, ras: {xgmi_wafl: {ce: 1}}, gfx: gfx942", "amdgpu.ras: xgmi_wafl"},
		{"ras de", "index: 0, gfx: gfx942", "index: 0, ras: {gfx: {de: 1}}, gfx: gfx942", "amdgpu.ras: gfx: de"},
		{"ras key", "index: 0, gfx: gfx942", "index: 0, ras: {umc: {uce: 1}}, gfx: gfx942", "uce"},
		{"xgmi error outside a hive", "index: 0, gfx: gfx942", "index: 0, xgmi_error: 1, gfx: gfx942", "amdgpu.xgmi_hive"},
		{"xgmi error range", "index: 0, gfx: gfx942", "index: 0, xgmi_hive: \"0x1\", xgmi_error: 3, gfx: gfx942", "amdgpu.xgmi_error"},
		{"peer memory version", "name: amd-pair\n", "name: amd-pair\nkernel: {amd_peer_memory: \"1.0 and a long tail\"}\n", "kernel.amd_peer_memory"},
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

// mi300xBDFs are amd-mi300x's GPUs in amdgpu index order.
var mi300xBDFs = []string{"0000:05:00.0", "0000:2b:00.0", "0000:5b:00.0", "0000:65:00.0", "0000:7d:00.0", "0000:a5:00.0", "0000:d5:00.0", "0000:e7:00.0"}

// numLinks is an xgmi_num_links line of an 8-GPU hive: "01 " for a
// direct peer, "00 " for self and the GPUs in skip, then the newline.
func numLinks(self int, skip ...int) string {
	var b strings.Builder
	for q := range 8 {
		if q == self || slices.Contains(skip, q) {
			b.WriteString("00 ")
		} else {
			b.WriteString("01 ")
		}
	}
	return b.String() + "\n"
}

// readRaw reads a file whole (no newline trimmed).
func readRaw(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkHealth checks one GPU function's health files against want
// (file -> exact contents) and that ras/ holds exactly rasFiles.
func checkHealth(t *testing.T, fn string, rasFiles []string, want map[string]string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(fn, "ras"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	if !slices.Equal(got, rasFiles) {
		t.Errorf("%s/ras holds %v, want %v", fn, got, rasFiles)
	}
	for f, w := range want {
		if g := readRaw(t, filepath.Join(fn, f)); g != w {
			t.Errorf("%s/%s = %q, want %q", filepath.Base(fn), f, g, w)
		}
	}
}

var mi300xRASFiles = []string{"features", "gfx_err_count", "hdp_err_count", "mmhub_err_count", "pcie_bif_err_count",
	"sdma_err_count", "umc_err_count", "xgmi_wafl_err_count"}

// TestMI300XHealth: amd-mi300x's healthy counters, written by hand from
// the kernel's formats (amdgpu_ras.c amdgpu_ras_sysfs_read and
// amdgpu_ras_sysfs_features_read, amdgpu_device.c pcie_replay_count,
// amdgpu_xgmi.c show_num_links and show_error): every MI300 RAS block
// counting 0, the umc file with its de line; features 0xef (umc, sdma,
// gfx, mmhub, pcie_bif, hdp, xgmi_wafl = bits 0-3, 5-7) with the socket
// in bits 31:29; one XGMI link to each of the 7 peers (the 8-OAM board's
// full mesh) and 00 for itself; and amdkfd's peer-memory client "1.0"
// (kfd_peerdirect.c), amdgpu being loaded.
func TestMI300XHealth(t *testing.T) {
	root := machineRoot(t, "amd-mi300x")
	for i, bdf := range mi300xBDFs {
		fn, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", bdf))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"ras/umc_err_count": "ue: 0\nce: 0\nde: 0\n", "ras/gfx_err_count": "ue: 0\nce: 0\n",
			"ras/sdma_err_count": "ue: 0\nce: 0\n", "ras/mmhub_err_count": "ue: 0\nce: 0\n",
			"ras/pcie_bif_err_count": "ue: 0\nce: 0\n", "ras/hdp_err_count": "ue: 0\nce: 0\n",
			"ras/xgmi_wafl_err_count": "ue: 0\nce: 0\n",
			"ras/features":            "feature mask: 0x" + strconv.FormatUint(0xef|uint64(i)<<29, 16) + "\n",
			"pcie_replay_count":       "0\n", "xgmi_error": "0\n", "xgmi_num_links": numLinks(i),
		}
		checkHealth(t, fn, mi300xRASFiles, want)
	}
	if got := readRaw(t, filepath.Join(root, "sys/bus/pci/devices/0000:65:00.0/ras/features")); got != "feature mask: 0x600000ef\n" {
		t.Errorf("GPU 3 ras/features %q, want socket 3 in bits 31:29: 0x600000ef", got)
	}
	peers := filepath.Join(root, "sys/kernel/mm/memory_peers/amdkfd")
	if got := readRaw(t, filepath.Join(peers, "version")); got != "1.0\n" {
		t.Errorf("memory_peers/amdkfd/version %q, want \"1.0\\n\"", got)
	}
	for _, c := range []string{"num_alloc_mrs", "num_dealloc_mrs", "num_reg_pages", "num_dereg_pages", "num_reg_bytes", "num_dereg_bytes", "num_free_callbacks"} {
		if got := readRaw(t, filepath.Join(peers, c)); got != "0\n" {
			t.Errorf("memory_peers/amdkfd/%s %q, want 0", c, got)
		}
	}
}

// TestAMDPairHealth: two GPUs outside any hive count no xgmi_wafl errors
// and have no xgmi_num_links or xgmi_error; features lack bit 7 (0x6f).
// Without amdgpu in kernel.modules there is no peer-memory client; with
// it, or with kernel.amd_peer_memory, there is.
func TestAMDPairHealth(t *testing.T) {
	build := func(spec string) string {
		t.Helper()
		s, err := Parse("amd-pair.yaml", []byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		if err := Build(s, root); err != nil {
			t.Fatal(err)
		}
		return root
	}
	spec := strings.Replace(amdPair, "index: 1, gfx: gfx942", "index: 1, ras: {umc: {ue: 1, ce: 3, de: 2}, hdp: {ue: 4}}, pcie_replay_count: 9, gfx: gfx942", 1)
	root := build(spec)
	for i, bdf := range []string{"0000:11:00.0", "0000:12:00.0"} {
		fn, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", bdf))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"ras/features": "feature mask: 0x6f\n", "ras/umc_err_count": "ue: 0\nce: 0\nde: 0\n",
			"ras/hdp_err_count": "ue: 0\nce: 0\n", "pcie_replay_count": "0\n"}
		if i == 1 {
			want["ras/umc_err_count"], want["ras/hdp_err_count"], want["pcie_replay_count"] = "ue: 1\nce: 3\nde: 2\n", "ue: 4\nce: 0\n", "9\n"
		}
		checkHealth(t, fn, mi300xRASFiles[:7], want)
		for _, f := range []string{"xgmi_num_links", "xgmi_error"} {
			if _, err := os.Lstat(filepath.Join(fn, f)); !os.IsNotExist(err) {
				t.Errorf("GPU %d outside a hive has %s (%v)", i, f, err)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "sys/kernel/mm/memory_peers")); !os.IsNotExist(err) {
		t.Errorf("memory_peers without amdgpu loaded (%v)", err)
	}
	for _, k := range []string{"kernel: {modules: [amdgpu]}", "kernel: {amd_peer_memory: \"2.1\"}"} {
		root := build(strings.Replace(amdPair, "name: amd-pair\n", "name: amd-pair\n"+k+"\n", 1))
		want := map[string]string{"kernel: {modules: [amdgpu]}": "1.0\n", "kernel: {amd_peer_memory: \"2.1\"}": "2.1\n"}[k]
		if got := readRaw(t, filepath.Join(root, "sys/kernel/mm/memory_peers/amdkfd/version")); got != want {
			t.Errorf("%s: version %q, want %q", k, got, want)
		}
	}
	root = build(strings.Replace(amdPair, "name: amd-pair\n", "name: amd-pair\nkernel: {modules: [amdgpu], amd_peer_memory: \"\"}\n", 1))
	if _, err := os.Lstat(filepath.Join(root, "sys/kernel/mm/memory_peers")); !os.IsNotExist(err) {
		t.Errorf("amd_peer_memory \"\" still writes memory_peers (%v)", err)
	}
}

// TestMI300XFaults: amd-mi300x-faults, checked by hand against its
// description: GPU 3's UMC ue 2 ce 14, GPU 2's 37 PCIe replays, GPU 5 at
// x8 of x16, GPU 6 without direct XGMI links to GPUs 0 and 1 (00 on both
// sides, KFD weight 30 = 2 hops x 15 with no bandwidth between KFD nodes
// 8 and 2, 8 and 3), no peer-memory client, a cmdline without iommu=pt.
// Everything else reads as amd-mi300x.
func TestMI300XFaults(t *testing.T) {
	root := machineRoot(t, "amd-mi300x-faults")
	fn := func(i int) string {
		d, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", mi300xBDFs[i]))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for i := range 8 {
		umc, replay, links := "ue: 0\nce: 0\nde: 0\n", "0\n", numLinks(i)
		switch i {
		case 0, 1:
			links = numLinks(i, 6)
		case 2:
			replay = "37\n"
		case 3:
			umc = "ue: 2\nce: 14\nde: 0\n"
		case 6:
			links = numLinks(6, 0, 1)
		}
		checkHealth(t, fn(i), mi300xRASFiles, map[string]string{
			"ras/umc_err_count": umc, "ras/gfx_err_count": "ue: 0\nce: 0\n", "pcie_replay_count": replay,
			"xgmi_num_links": links, "xgmi_error": "0\n",
		})
		width := "16\n"
		if i == 5 {
			width = "8\n"
		}
		for f, w := range map[string]string{"current_link_width": width, "max_link_width": "16\n",
			"current_link_speed": "32.0 GT/s PCIe\n", "max_link_speed": "32.0 GT/s PCIe\n"} {
			if got := readRaw(t, filepath.Join(fn(i), f)); got != w {
				t.Errorf("GPU %d %s = %q, want %q", i, f, got, w)
			}
		}
	}
	top := filepath.Join(root, "sys/class/kfd/kfd/topology/nodes")
	for _, n := range []string{"8", "2", "3"} {
		for _, l := range links(t, filepath.Join(top, n), "io_links") {
			to := l["node_to"]
			if l["type"] != "11" {
				continue
			}
			far := n == "8" && (to == "2" || to == "3") || n != "8" && to == "8"
			want := map[bool][3]string{true: {"30", "0", "0"}, false: {"15", "64000", "64000"}}[far]
			if got := [3]string{l["weight"], l["min_bandwidth"], l["max_bandwidth"]}; got != want {
				t.Errorf("KFD node %s -> %s: weight, bandwidth %v, want %v", n, to, got, want)
			}
		}
	}
	// The PCIe link's KFD bandwidth follows the max width: still x16.
	if io := links(t, filepath.Join(top, "7"), "io_links"); io[0]["type"] != "2" || io[0]["max_bandwidth"] != "64000" {
		t.Errorf("GPU 5's PCIe io_link %v, want max_bandwidth 64000 (x16 Gen5)", io[0])
	}
	if _, err := os.Lstat(filepath.Join(root, "sys/kernel/mm/memory_peers")); !os.IsNotExist(err) {
		t.Errorf("memory_peers is there (%v), want no amdkfd peer-memory client", err)
	}
	cmdline := readRaw(t, filepath.Join(root, "proc/cmdline"))
	if strings.Contains(cmdline, "iommu=pt") || !strings.Contains(cmdline, "pci=realloc=off") {
		t.Errorf("cmdline %q, want AMD's parameters without iommu=pt", cmdline)
	}
}

const amdFaulty = `
name: amd-faulty
description: test
extends: amd-mi300x
faults:
  amdgpus:
    - {index: 3, ras: {umc: {ue: 1}}}
    - {index: 6, xgmi_links_down: [0]}
`

func TestAMDFaultsRejects(t *testing.T) {
	s, err := Parse("amd-faulty.yaml", []byte(amdFaulty))
	if err != nil {
		t.Fatalf("the valid extending spec: %v", err)
	}
	var g0, g6, g3 *AMDGPU
	for _, fn := range s.Functions() {
		switch a := fn.Device.AMDGPU; {
		case a == nil:
		case a.Index == 0:
			g0 = a
		case a.Index == 3:
			g3 = a
		case a.Index == 6:
			g6 = a
		}
	}
	if !slices.Equal(g0.XGMIPeers.Indexes, []int{1, 2, 3, 4, 5, 7}) || !slices.Equal(g6.XGMIPeers.Indexes, []int{1, 2, 3, 4, 5, 7}) ||
		g3.RAS["umc"] != (AMDRASCount{UE: 1}) {
		t.Errorf("GPU 0 peers %v, GPU 6 peers %v, GPU 3 ras %v", g0.XGMIPeers, g6.XGMIPeers, g3.RAS)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"index missing", "{index: 3, ras", "{ras", "faults.amdgpus[0]: index is missing"},
		{"gpu the base lacks", "index: 3", "index: 8", "amd-mi300x has no amdgpu 8"},
		{"twice", "index: 6", "index: 3", "amdgpu 3 is addressed twice"},
		{"link to itself", "xgmi_links_down: [0]", "xgmi_links_down: [6]", "6 is not another GPU of amdgpu 6's hive"},
		{"link to no GPU", "xgmi_links_down: [0]", "xgmi_links_down: [9]", "9 is not another GPU"},
		{"link down twice", "xgmi_links_down: [0]", "xgmi_links_down: [0, 0]", "amdgpu 6 has no direct XGMI link to 0"},
		{"ras block", "ras: {umc: {ue: 1}}", "ras: {vcn: {ue: 1}}", `amdgpu.ras: "vcn"`},
		{"xgmi error", "ras: {umc: {ue: 1}}", "xgmi_error: 5", "amdgpu.xgmi_error"},
		{"unknown key", "ras: {umc: {ue: 1}}", "lost: true", "lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(amdFaulty, tc.old) {
				t.Fatalf("test case does not apply: %q not in the spec", tc.old)
			}
			_, err := Parse("amd-faulty.yaml", []byte(strings.Replace(amdFaulty, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("Parse accepted a bad spec")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "amd-faulty.yaml") {
				t.Errorf("error %q does not name the file and %q", err, tc.want)
			}
		})
	}
}

// mi210BDF is mixed-h100-mi210's MI210, behind its card's bridge pair.
const mi210BDF = "0000:23:00.0"

// TestMI210KFD checks mixed-h100-mi210's KFD topology against values
// written by hand from the spec and the MI210's published facts (the
// fixture's sources): KFD lists the one CPU node (EPYC 9354, 32 cores x 2
// threads, boost 3800 MHz) and the MI210 as node 1, and not the H100.
// The MI210's node: name aldebaran, 104 CUs x 4 SIMDs = 416, 8 arrays
// (8 shader engines of one array) of 14 CU slots, 8 waves per SIMD
// (rocminfo's 32 per CU), gfx90a = 90010, device 0x740f = 29711,
// location bus 0x23 << 8 = 8960, renderD128, no hive, 2 PCIe + 3 XGMI
// SDMA engines (5 on Aldebaran), 1700 MHz, one XCC, the first GPU
// processor id 0x80001000; 64 GiB of HBM2e, 4 stacks (4096 bits) at
// 1600 MHz; one PCIe io_link to node 0 of weight 20, 312 MB/s (x1 Gen1)
// to 32000 MB/s (x16 Gen4), flags 1, SDMA engines 0-1 (mask 3), and its
// reverse on the CPU node with flags 3; no p2p links (one CPU node, one
// AMD GPU).
func TestMI210KFD(t *testing.T) {
	root := machineRoot(t, "mixed-h100-mi210")
	top := filepath.Join(root, "sys/class/kfd/kfd/topology")
	ents, err := os.ReadDir(filepath.Join(top, "nodes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		t.Fatalf("KFD has %d nodes, want 2 (CPU 0 and the MI210; not the H100)", len(ents))
	}
	if g := readTrim(t, filepath.Join(top, "generation_id")); g != "2" {
		t.Errorf("generation_id %s, want 2", g)
	}
	cpu := filepath.Join(top, "nodes/0")
	cp := readProps(t, filepath.Join(cpu, "properties"))
	for k, want := range map[string]string{"cpu_cores_count": "64", "simd_count": "0", "io_links_count": "1",
		"p2p_links_count": "0", "cpu_core_id_base": "0", "max_engine_clk_ccompute": "3800"} {
		if cp[k] != want {
			t.Errorf("CPU node %s = %s, want %s", k, cp[k], want)
		}
	}
	gpu := filepath.Join(top, "nodes/1")
	if n := readTrim(t, filepath.Join(gpu, "name")); n != "aldebaran" {
		t.Errorf("GPU node name %q, want aldebaran", n)
	}
	p := readProps(t, filepath.Join(gpu, "properties"))
	for k, want := range map[string]string{
		"cpu_cores_count": "0", "simd_count": "416", "mem_banks_count": "1", "caches_count": "0",
		"io_links_count": "1", "p2p_links_count": "0", "simd_id_base": "2147487744",
		"max_waves_per_simd": "8", "lds_size_in_kb": "64", "gds_size_in_kb": "0", "num_gws": "64",
		"wave_front_size": "64", "array_count": "8", "simd_arrays_per_engine": "1", "cu_per_simd_array": "14",
		"simd_per_cu": "4", "max_slots_scratch_cu": "32", "gfx_target_version": "90010", "vendor_id": "4098",
		"device_id": "29711", "location_id": "8960", "domain": "0", "drm_render_minor": "128", "hive_id": "0",
		"num_sdma_engines": "2", "num_sdma_xgmi_engines": "3", "num_sdma_queues_per_engine": "8",
		"num_cp_queues": "24", "max_engine_clk_fcompute": "1700", "num_xcc": "1", "max_engine_clk_ccompute": "3800",
	} {
		if p[k] != want {
			t.Errorf("GPU node %s = %q, want %s", k, p[k], want)
		}
	}
	mem := readProps(t, filepath.Join(gpu, "mem_banks/0/properties"))
	for k, want := range map[string]string{"heap_type": "1", "size_in_bytes": "68719476736", "width": "4096", "mem_clk_max": "1600"} {
		if mem[k] != want {
			t.Errorf("GPU mem bank %s = %s, want %s", k, mem[k], want)
		}
	}
	io := links(t, gpu, "io_links")
	want := map[string]string{"type": "2", "node_from": "1", "node_to": "0", "weight": "20", "min_bandwidth": "312",
		"max_bandwidth": "32000", "flags": "1", "recommended_sdma_engine_id_mask": "3"}
	if len(io) != 1 {
		t.Fatalf("GPU io_links %v, want one PCIe link", io)
	}
	for k, w := range want {
		if io[0][k] != w {
			t.Errorf("GPU io_link %s = %s, want %s", k, io[0][k], w)
		}
	}
	back := links(t, cpu, "io_links")
	if len(back) != 1 || back[0]["node_to"] != "1" || back[0]["type"] != "2" || back[0]["flags"] != "3" {
		t.Errorf("CPU io_links %v, want the reverse PCIe link to node 1, flags 3", back)
	}
	if p2p := links(t, gpu, "p2p_links"); len(p2p) != 0 {
		t.Errorf("GPU p2p_links %v, want none", p2p)
	}
}

// TestMI210DRM: the MI210 registers one DRM device (card0, renderD128)
// under its function and no XCP spares; outside a hive it has no XGMI
// files; MI200 has no partition modes, so no current_*_partition; its
// RAS counters are the MI200 blocks without xgmi_wafl (features 0x6f);
// amdkfd's peer-memory client is there (amdgpu loaded).
func TestMI210DRM(t *testing.T) {
	root := machineRoot(t, "mixed-h100-mi210")
	fn, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", mi210BDF))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"card0", "renderD128"} {
		got, err := filepath.EvalSymlinks(filepath.Join(root, "sys/class/drm", name, "device"))
		if err != nil || got != fn {
			t.Errorf("sys/class/drm/%s/device -> %s (%v), want %s", name, got, err, fn)
		}
	}
	ents, err := os.ReadDir(filepath.Join(root, "sys/class/drm"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"card0", "renderD128", "version"}; !slices.Equal(names, want) {
		t.Errorf("sys/class/drm holds %v, want %v", names, want)
	}
	if _, err := os.Lstat(filepath.Join(root, "sys/devices/platform/amdgpu_xcp_0")); !os.IsNotExist(err) {
		t.Errorf("an MI210 has XCP spare devices (%v)", err)
	}
	for _, f := range []string{"xgmi_device_id", "xgmi_physical_id", "xgmi_hive_info", "xgmi_num_links", "xgmi_error",
		"current_compute_partition", "current_memory_partition"} {
		if _, err := os.Lstat(filepath.Join(fn, f)); !os.IsNotExist(err) {
			t.Errorf("MI210 has %s (%v)", f, err)
		}
	}
	checkHealth(t, fn, mi300xRASFiles[:7], map[string]string{
		"ras/features": "feature mask: 0x6f\n", "ras/umc_err_count": "ue: 0\nce: 0\nde: 0\n",
		"ras/gfx_err_count": "ue: 0\nce: 0\n", "pcie_replay_count": "0\n",
	})
	if got := readRaw(t, filepath.Join(root, "sys/kernel/mm/memory_peers/amdkfd/version")); got != "1.0\n" {
		t.Errorf("memory_peers/amdkfd/version %q, want 1.0", got)
	}
}

// amdMixedPair is an MI210 (index 0) and an MI300X (index 1) on one
// socket: two targets in one KFD topology.
const amdMixedPair = `
name: amd-mixed
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
            class: "0x038000"
            vendor: "0x1002"
            device: "0x740f"
            link: {speed: 16.0 GT/s PCIe, width: 16}
            amdgpu: {index: 0, gfx: gfx90a, simd_count: 416, vram_gib: 64}
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

// TestAMDMixedTargets: each GPU's node carries its own target's layout,
// and GPU processor ids run on by each GPU's CU slots: the MI210 takes
// 8 x 14 = 112 from 0x80001000, so the MI300X starts at 0x80001070. The
// two reach each other over PCIe (p2p weight 40) and the MI300X's DRM
// minors follow the MI210's one.
func TestAMDMixedTargets(t *testing.T) {
	s, err := Parse("amd-mixed.yaml", []byte(amdMixedPair))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := Build(s, root); err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(root, "sys/class/kfd/kfd/topology/nodes")
	for n, want := range map[string]map[string]string{
		"1": {"gfx_target_version": "90010", "simd_id_base": "2147487744", "array_count": "8", "cu_per_simd_array": "14",
			"num_sdma_xgmi_engines": "3", "max_engine_clk_fcompute": "1700", "drm_render_minor": "128"},
		"2": {"gfx_target_version": "90402", "simd_id_base": "2147487856", "array_count": "32", "cu_per_simd_array": "10",
			"num_sdma_xgmi_engines": "14", "max_engine_clk_fcompute": "2100", "drm_render_minor": "129"},
	} {
		p := readProps(t, filepath.Join(top, n, "properties"))
		for k, w := range want {
			if p[k] != w {
				t.Errorf("node %s %s = %s, want %s", n, k, p[k], w)
			}
		}
		p2p := links(t, filepath.Join(top, n), "p2p_links")
		if len(p2p) != 1 || p2p[0]["weight"] != "40" || p2p[0]["type"] != "2" {
			t.Errorf("node %s p2p_links %v, want one PCIe link of weight 40", n, p2p)
		}
	}
	if got := readTrim(t, filepath.Join(top, "1/name")); got != "aldebaran" {
		t.Errorf("node 1 name %q", got)
	}
	if got := readTrim(t, filepath.Join(top, "2/name")); got != "ip discovery" {
		t.Errorf("node 2 name %q", got)
	}
	if io := links(t, filepath.Join(top, "1"), "io_links"); len(io) != 1 || io[0]["max_bandwidth"] != "32000" {
		t.Errorf("MI210 io_links %v, want one PCIe link of 32000 MB/s (x16 Gen4)", io)
	}
}

// TestGFX90aRejects: what an MI200 GPU cannot have.
func TestGFX90aRejects(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"xcc", "gfx: gfx90a, simd_count: 416", "gfx: gfx90a, simd_count: 416, num_xcc: 2", "amdgpu.num_xcc"},
		{"cu slots", "gfx: gfx90a, simd_count: 416", "gfx: gfx90a, simd_count: 452", "amdgpu.simd_count"},
		{"drm nodes", "gfx: gfx90a, simd_count: 416", "gfx: gfx90a, simd_count: 416, drm_nodes: 8", "amdgpu.drm_nodes"},
		{"compute partition", "gfx: gfx90a, simd_count: 416", "gfx: gfx90a, simd_count: 416, compute_partition: SPX", "amdgpu.compute_partition"},
		{"memory partition", "gfx: gfx90a, simd_count: 416", "gfx: gfx90a, simd_count: 416, memory_partition: NPS1", "amdgpu.memory_partition"},
		{"hive", "gfx: gfx90a, simd_count: 416", "gfx: gfx90a, simd_count: 416, xgmi_hive: \"0x1\"", "amdgpu.xgmi_hive"},
		{"target version", "gfx: gfx90a, simd_count: 416", "gfx: gfx90a, gfx_target_version: 90402, simd_count: 416", "amdgpu.gfx_target_version"},
		{"ras block", "gfx: gfx90a, simd_count: 416", "gfx: gfx90a, simd_count: 416, ras: {vcn: {ue: 1}}", `amdgpu.ras: "vcn"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(amdMixedPair, tc.old) {
				t.Fatalf("test case does not apply: %q not in the spec", tc.old)
			}
			_, err := Parse("amd-mixed.yaml", []byte(strings.Replace(amdMixedPair, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("Parse accepted a bad spec")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "0000:11:00.0") {
				t.Errorf("error %q does not name the device and %q", err, tc.want)
			}
		})
	}
}
