package fakesys

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/nvml"
)

func TestBuildAllMachines(t *testing.T) {
	for _, name := range Machines() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := machineRoot(t, name)
			for _, p := range []string{"sys/bus/pci/devices", "sys/devices/system/cpu/online", "sys/devices/system/node/online", "proc/self/status"} {
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("missing %s: %v", p, err)
				}
			}
			if _, err := nvml.LoadReplay(filepath.Join(root, "nvml.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("nvml.json does not replay: %v", err)
			}
			if _, err := Expectation(name); err != nil {
				t.Errorf("expectation: %v", err)
			}
			if name == H200VM {
				return
			}
			// Every attribute ends with a newline; every link stays inside the
			// root and is relative.
			err := filepath.WalkDir(filepath.Join(root, "sys"), func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				switch {
				case d.Type()&fs.ModeSymlink != 0:
					target, err := os.Readlink(p)
					if err != nil {
						return err
					}
					if filepath.IsAbs(target) {
						t.Errorf("%s -> %s is absolute", p, target)
					}
					if _, err := os.Stat(p); err != nil && !strings.HasSuffix(p, "/subsystem") {
						t.Errorf("dangling link %s -> %s", p, target)
					}
				case d.Type().IsRegular() && d.Name() != "config" && d.Name() != "vpd": // binary, as the kernel serves them
					b, err := os.ReadFile(p)
					if err != nil {
						return err
					}
					if !bytes.HasSuffix(b, []byte("\n")) {
						t.Errorf("%s does not end with a newline: %q", p, b)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDGXFiles checks files of the DGX H100 fixture against values worked
// out by hand from the spec (2 sockets x 56 cores x 2 threads; GPU 0 at
// 1b:00.0 and mlx5_0 at 18:00.0 behind switch 16:00.0 on NUMA node 0).
func TestDGXFiles(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	const nic = "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0"
	const gpu = "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:1b:00.0"
	files := map[string]string{
		"sys/devices/system/cpu/online":                             "0-223\n",
		"sys/devices/system/cpu/offline":                            "\n",
		"sys/devices/system/cpu/cpu113/topology/core_cpus_list":     "1,113\n",
		"sys/devices/system/cpu/cpu113/topology/thread_siblings":    "00000000,00000000,00000000,00020000,00000000,00000000,00000002\n",
		"sys/devices/system/cpu/cpu60/topology/package_cpus_list":   "56-111,168-223\n",
		"sys/devices/system/cpu/cpu60/topology/physical_package_id": "1\n",
		"sys/devices/system/cpu/cpu60/topology/core_id":             "4\n",
		"sys/devices/system/node/node1/cpulist":                     "56-111,168-223\n",
		"sys/devices/system/node/node0/cpumap":                      "00000000,000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff\n",
		"sys/devices/system/node/node0/distance":                    "10 21\n",
		"sys/devices/system/node/has_cpu":                           "0-1\n",
		nic + "/numa_node":                                          "0\n",
		nic + "/local_cpulist":                                      "0-55,112-167\n",
		nic + "/local_cpus":                                         "00000000,000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff\n",
		nic + "/class":                                              "0x020700\n",
		nic + "/vendor":                                             "0x15b3\n",
		nic + "/device":                                             "0x1021\n",
		nic + "/current_link_speed":                                 "32.0 GT/s PCIe\n",
		nic + "/max_link_width":                                     "16\n",
		nic + "/net/ibp24s0/type":                                   "32\n",
		nic + "/infiniband/mlx5_0/ports/1/state":                    "4: ACTIVE\n",
		nic + "/infiniband/mlx5_0/ports/1/phys_state":               "5: LinkUp\n",
		nic + "/infiniband/mlx5_0/ports/1/rate":                     "400 Gb/sec (4X NDR)\n",
		nic + "/infiniband/mlx5_0/ports/1/link_layer":               "InfiniBand\n",
		nic + "/infiniband/mlx5_0/ports/1/counters/port_rcv_data":   "0\n",
		gpu + "/class":                                              "0x030200\n",
		gpu + "/subsystem_device":                                   "0x16c1\n",
		"sys/devices/pci0000:28/0000:28:01.0/0000:29:00.1/infiniband/mlx5_2/ports/1/gid_attrs/types/3": "RoCE v2\n",
		"sys/devices/pci0000:28/0000:28:01.0/0000:29:00.1/infiniband/mlx5_2/ports/1/gid_attrs/ndevs/3": "enp41s0f1np1\n",
		"sys/devices/pci0000:28/0000:28:01.0/0000:29:00.1/infiniband/mlx5_2/ports/1/gids/3":            "0000:0000:0000:0000:0000:ffff:0a65:0001\n",
		"sys/devices/pci0000:28/0000:28:01.0/0000:29:00.0/infiniband/mlx5_1/ports/1/link_layer":        "InfiniBand\n",
		"sys/class/dmi/id/product_name": "DGXH100\n",
		"proc/sys/kernel/hostname":      "dgx-h100-01\n",
	}
	for p, want := range files {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if string(b) != want {
			t.Errorf("%s = %q, want %q", p, b, want)
		}
	}
	links := map[string]string{
		"sys/bus/pci/devices/0000:18:00.0":        "../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0",
		"sys/class/net/ibp24s0":                   "../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/net/ibp24s0",
		"sys/class/infiniband/mlx5_0":             "../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/infiniband/mlx5_0",
		nic + "/driver":                           "../../../../../../bus/pci/drivers/mlx5_core",
		nic + "/net/ibp24s0/device":               "../../../0000:18:00.0",
		gpu + "/driver":                           "../../../../../../bus/pci/drivers/nvidia",
		"sys/class/net/lo":                        "../../devices/virtual/net/lo",
		"sys/bus/pci/drivers/nvidia/0000:1b:00.0": "../../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:1b:00.0",
	}
	for p, want := range links {
		got, err := os.Readlink(filepath.Join(root, p))
		if err != nil || got != want {
			t.Errorf("readlink %s = %q, %v; want %q", p, got, err, want)
		}
	}
	status, err := os.ReadFile(filepath.Join(root, "proc/self/status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Cpus_allowed:\tffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff\n", "Cpus_allowed_list:\t0-223\n", "Mems_allowed_list:\t0-1\n"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("proc/self/status lacks %q", want)
		}
	}
	meminfo, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MemTotal:       2147483648 kB", "Hugepagesize:       2048 kB", "Hugetlb:               0 kB"} {
		if !strings.Contains(string(meminfo), want) {
			t.Errorf("proc/meminfo lacks %q:\n%s", want, meminfo)
		}
	}
}

// TestConfigSpace checks the bytes hwloc reads to recognise a bridge.
func TestConfigSpace(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices/0000:16:00.0/config"))
	if err != nil {
		t.Fatal(err)
	}
	// A bridge's is the whole extended space, without extended
	// capabilities (no acs); an endpoint's the first 256 bytes.
	if len(b) != 4096 {
		t.Fatalf("config is %d bytes, want 4096", len(b))
	}
	if ext := b[0x100] | b[0x101] | b[0x102] | b[0x103]; ext != 0 {
		t.Errorf("config dword 0x100 = % x, want 0 (no extended capability)", b[0x100:0x104])
	}
	if ep, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices/0000:18:00.0/config")); err != nil || len(ep) != 256 {
		t.Errorf("NIC 0000:18:00.0 config: %d bytes, %v; want 256", len(ep), err)
	}
	got := map[string]int{
		"vendor":      int(b[0]) | int(b[1])<<8,
		"class":       int(b[9]) | int(b[10])<<8 | int(b[11])<<16,
		"header":      int(b[0x0e]),
		"primary":     int(b[0x18]),
		"secondary":   int(b[0x19]),
		"subordinate": int(b[0x1a]),
		"cap id":      int(b[b[0x34]]),
		"port type":   int(b[0x42]>>4) & 0xf,
		"link speed":  int(b[0x52]) & 0xf,
		"link width":  (int(b[0x52]) | int(b[0x53])<<8) >> 4 & 0x3f,
	}
	// Switch upstream port 16:00.0 routes buses 17 (its downstream ports)
	// up to 1b (GPU 0).
	want := map[string]int{"vendor": 0x1000, "class": 0x060400, "header": 1, "primary": 0x16, "secondary": 0x17, "subordinate": 0x1b,
		"cap id": 0x10, "port type": pcieUpstream, "link speed": 5, "link width": 16}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("config of 0000:16:00.0 (-want +got):\n%s", d)
	}
}

func TestDGXReplay(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	var rf nvml.ReplayFile
	b, err := os.ReadFile(filepath.Join(root, "nvml.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	if rf.DeviceCount.Value != 8 || len(rf.Devices) != 8 {
		t.Fatalf("device count %d, %d devices; want 8", rf.DeviceCount.Value, len(rf.Devices))
	}
	d := rf.Devices[4]
	if d.PCI.Value.BusID != "00000000:9D:00.0" || d.PCI.Value.PCIDeviceID != 0x233010de {
		t.Errorf("GPU 4 pci = %+v", d.PCI.Value)
	}
	// x86: GetNumaNodeId is NOT_SUPPORTED (the GPU is not a NUMA node).
	if d.NUMANode.Return != "ERROR_NOT_SUPPORTED" {
		t.Errorf("GPU 4 numa = %+v, want ERROR_NOT_SUPPORTED", d.NUMANode)
	}
	// Node 1 is CPUs 56-111 and 168-223: words of 64 CPUs.
	wantWords := []uint64{0xff00000000000000, 0x0000ffffffffffff, 0xffffff0000000000, 0x00000000ffffffff}
	if !cmp.Equal(d.CPUAffinity.Value, wantWords) {
		t.Errorf("GPU 4 affinity = %#x, want %#x", d.CPUAffinity.Value, wantWords)
	}
	if d.PCIeGen.Value != 5 || d.PCIeWidth.Value != 16 {
		t.Errorf("GPU 4 pcie gen %d width %d, want 5 x16", d.PCIeGen.Value, d.PCIeWidth.Value)
	}
	if len(d.NVLinks) != 18 {
		t.Fatalf("GPU 4 lists %d links, want 18", len(d.NVLinks))
	}
	for _, l := range d.NVLinks {
		if l.State.Value != 1 || l.RemoteType.Value != 2 || l.Remote.Value.BusID == "" {
			t.Errorf("GPU 4 link %d = %+v, want active to an NVSwitch", l.Link, l)
		}
	}
}

func TestGraceHopper(t *testing.T) {
	root := machineRoot(t, "grace-hopper")
	for p, want := range map[string]string{
		"proc/driver/nvidia/gpus/0009:01:00.0/numa_status": "Node:      1\nStatus:    online\n",
		"sys/devices/system/node/has_cpu":                  "0\n",
		"sys/devices/system/node/has_memory":               "0-1\n",
		"sys/devices/system/node/online":                   "0-8\n",
		"sys/devices/system/node/node1/cpulist":            "\n",
		"sys/devices/system/node/node0/cpulist":            "0-71\n",
		"sys/bus/pci/devices/0009:01:00.0/numa_node":       "0\n",
		"sys/bus/pci/devices/0009:01:00.0/local_cpus":      "000000ff,ffffffff,ffffffff\n",
	} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	cpuinfo, _ := os.ReadFile(filepath.Join(root, "proc/cpuinfo"))
	if !strings.Contains(string(cpuinfo), "CPU part\t: 0xd4f") {
		t.Errorf("cpuinfo is not Neoverse V2:\n%.300s", cpuinfo)
	}
	f, err := nvmlFile(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Devices[0].NUMANode; got.Value != 1 || got.Return != "" {
		t.Errorf("GetNumaNodeId = %+v, want the GPU memory node 1", got)
	}
	for _, l := range f.Devices[0].NVLinks {
		if l.State.Return != "ERROR_NOT_SUPPORTED" {
			t.Errorf("link %d state %+v, want NOT_SUPPORTED (nvlinks: 0)", l.Link, l.State)
		}
	}
}

func nvmlFile(root string) (nvml.ReplayFile, error) {
	var rf nvml.ReplayFile
	b, err := os.ReadFile(filepath.Join(root, "nvml.json"))
	if err == nil {
		err = json.Unmarshal(b, &rf)
	}
	return rf, err
}

// buildSpec parses spec (named name in errors) and builds it into a fresh
// temporary root, which it returns.
func buildSpec(t *testing.T, name, spec string) string {
	t.Helper()
	s, err := Parse(name, []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := Build(s, root); err != nil {
		t.Fatal(err)
	}
	return root
}

// loadReplay loads root's nvml.json as the library the agent reads.
func loadReplay(t *testing.T, root string) gonvml.Interface {
	t.Helper()
	lib, err := nvml.LoadReplay(filepath.Join(root, "nvml.json"))
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// gpuSpec is minimal with its GPU's block replaced by gpu (which may go on
// to list more devices) and an nvml section, so Build writes nvml.json.
func gpuSpec(gpu string) string {
	return strings.Replace(minimal, "gpu: {index: 0, nvlinks: 0}", gpu, 1) + "nvml: {driver_version: \"1\", nvml_version: \"1\", cuda: 1}\n"
}

func TestNVLinkPeersAndNotSupported(t *testing.T) {
	spec := gpuSpec(`gpu: {index: 0, nvlinks: 2, nvlink_remote: gpu, nvlink_peers: [1, 1]}
          - bdf: "0000:11:01.0"
            kind: gpu
            gpu: {index: 1, nvlinks: not-supported}`)
	root := buildSpec(t, "peers.yaml", spec)
	f, err := nvmlFile(root)
	if err != nil {
		t.Fatal(err)
	}
	g0, g1 := f.Devices[0], f.Devices[1]
	if l := g0.NVLinks[1]; l.Remote.Value.BusID != "00000000:11:01.0" || l.RemoteType.Value != 0 || l.State.Value != 1 {
		t.Errorf("GPU 0 link 1 = %+v, want active to GPU 1", l)
	}
	if l := g0.NVLinks[2]; l.State.Return != "ERROR_NOT_SUPPORTED" {
		t.Errorf("GPU 0 link 2 (beyond nvlinks) = %+v, want NOT_SUPPORTED", l)
	}
	for _, l := range g1.NVLinks {
		if l.State.Return != "ERROR_NOT_SUPPORTED" || l.Remote.Return != "ERROR_NOT_SUPPORTED" {
			t.Errorf("GPU 1 link %d = %+v, want NOT_SUPPORTED", l.Link, l)
		}
	}
	if g0.PCI.Value.PCIDeviceID != 0x233010de {
		t.Errorf("pci_device_id = %#x", g0.PCI.Value.PCIDeviceID)
	}
}

func TestOfflineCPUsAndVF(t *testing.T) {
	spec := strings.Replace(minimal, "threads_per_core: 2}", `threads_per_core: 2, offline: "3,7", allowed: "0-1"}`, 1)
	spec = strings.Replace(spec, "netdevs: [{name: eth0}]", `netdevs: [{name: eth0}]
          - bdf: "0000:11:00.2"
            kind: nic
            virtual: true
            physfn: "0000:11:00.1"`, 1)
	root := buildSpec(t, "offline.yaml", spec)
	for p, want := range map[string]string{
		"sys/devices/system/cpu/online":                       "0-2,4-6\n",
		"sys/devices/system/cpu/offline":                      "3,7\n",
		"sys/devices/system/cpu/cpu3/online":                  "0\n",
		"sys/devices/system/node/node0/cpulist":               "0-2,4-6\n",
		"sys/devices/system/cpu/cpu2/topology/core_cpus_list": "2,6\n",
	} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "sys/devices/system/cpu/cpu3/topology")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("offline cpu3 has a topology folder: %v", err)
	}
	if got, err := os.Readlink(filepath.Join(root, "sys/bus/pci/devices/0000:11:00.2/physfn")); err != nil || got != "../0000:11:00.1" {
		t.Errorf("physfn = %q, %v", got, err)
	}
	status, _ := os.ReadFile(filepath.Join(root, "proc/self/status"))
	if !strings.Contains(string(status), "Cpus_allowed:\t03\n") || !strings.Contains(string(status), "Cpus_allowed_list:\t0-1\n") {
		t.Errorf("status:\n%s", status)
	}
}

func TestBuildH200(t *testing.T) {
	root := machineRoot(t, H200VM)
	if got, err := os.Readlink(filepath.Join(root, "sys/bus/pci/devices/0000:00:06.0")); err != nil || got != "../../../devices/pci0000:00/0000:00:06.0" {
		t.Errorf("link = %q, %v", got, err)
	}
	f, err := nvmlFile(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Devices) != 1 || !strings.HasSuffix(f.Devices[0].PCI.Value.BusID, ":00:06.0") {
		t.Errorf("nvml.json devices = %+v", f.Devices)
	}
	// Captured files are read-only in the archive; the copy must be
	// removable and writable by tests.
	p := filepath.Join(root, "sys/devices/pci0000:00/0000:00:06.0/numa_node")
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Errorf("captured file not writable: %v", err)
	}
}

func TestUntarRejectsEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tar.Header
	}{
		{"dot-dot path", []tar.Header{{Name: "../evil", Typeflag: tar.TypeReg}}},
		{"absolute path", []tar.Header{{Name: "/etc/evil", Typeflag: tar.TypeReg}}},
		{"link out of root", []tar.Header{{Name: "sys/x", Typeflag: tar.TypeSymlink, Linkname: "../../etc"}}},
		{"absolute link", []tar.Header{{Name: "sys/x", Typeflag: tar.TypeSymlink, Linkname: "/etc"}}},
		{"file below a link", []tar.Header{{Name: "sys/x", Typeflag: tar.TypeSymlink, Linkname: "y"}, {Name: "sys/x/passwd", Typeflag: tar.TypeReg}}},
		{"hard link", []tar.Header{{Name: "sys/x", Typeflag: tar.TypeLink, Linkname: "sys/y"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			for _, h := range tc.entries {
				h.Mode = 0o644
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
			}
			tw.Close()
			zw.Close()
			dir := t.TempDir()
			err := untar(&buf, filepath.Join(dir, "root"))
			if err == nil {
				t.Fatal("untar accepted it")
			}
			if _, err := os.Lstat(filepath.Join(dir, "evil")); err == nil {
				t.Error("a file landed outside the root")
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	for _, name := range []string{"dgx-h100", "grace-hopper"} {
		s, err := Machine(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			base := b.TempDir()
			i := 0
			for b.Loop() {
				i++
				if err := Build(s, filepath.Join(base, strconv.Itoa(i))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGPUHealth: healthy defaults (fabric completed on an NVSwitch GPU,
// NOT_SUPPORTED state elsewhere) and the health overrides, as Read sees
// them.
func TestGPUHealth(t *testing.T) {
	spec := gpuSpec(`gpu: {index: 0, nvlinks: 0, health: {persistence: false, ecc_uncorrected_volatile: 3,
              remap_pending: true, remap_failure: true, retired_pages: 2, retired_pages_pending: true,
              fabric_state: 2, fabric_status: 5, recovery_action: 1, pcie_replay: 9}}
          - bdf: "0000:11:01.0"
            kind: gpu
            gpu: {index: 1, nvlinks: 18}
          - bdf: "0000:11:02.0"
            kind: gpu
            gpu: {index: 2, nvlinks: not-supported}`)
	root := buildSpec(t, "health.yaml", spec)
	res := nvml.Read(loadReplay(t, root))
	if len(res.GPUs) != 3 || len(res.Warnings) != 0 {
		t.Fatalf("Read: %d GPUs, warnings %q", len(res.GPUs), res.Warnings)
	}
	b := func(v bool) *bool { return &v }
	i := func(v int) *int { return &v }
	u := func(v uint64) *uint64 { return &v }
	healthy := func(fabric *int) nvml.Health {
		h := nvml.Health{Persistence: b(true), ECCUncorrectedVolatile: u(0), ECCUncorrectedAggregate: u(0),
			RemappedRowsCorrectable: i(0), RemappedRowsUncorrectable: i(0), RemapPending: b(false), RemapFailure: b(false),
			RetiredPages: i(0), RetiredPagesPending: b(false), RecoveryAction: i(0), PCIeReplay: u(0)}
		if fabric != nil {
			h.FabricState, h.FabricStatus = fabric, i(0)
		}
		return h
	}
	want := []nvml.Health{
		{Persistence: b(false), ECCUncorrectedVolatile: u(3), ECCUncorrectedAggregate: u(3),
			RemappedRowsCorrectable: i(0), RemappedRowsUncorrectable: i(0), RemapPending: b(true), RemapFailure: b(true),
			RetiredPages: i(2), RetiredPagesPending: b(true), FabricState: i(2), RecoveryAction: i(1), PCIeReplay: u(9)},
		healthy(i(3)),
		healthy(nil),
	}
	for n, g := range res.GPUs {
		if diff := cmp.Diff(want[n], g.Health); diff != "" {
			t.Errorf("GPU %d health (-want +got):\n%s", n, diff)
		}
	}
}
