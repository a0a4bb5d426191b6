package discover

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func editReplay(t *testing.T, root string, edit func(*nvml.ReplayFile)) {
	t.Helper()
	p := filepath.Join(root, "nvml.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var f nvml.ReplayFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	edit(&f)
	f.DeviceCount.Value = len(f.Devices)
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func hasWarning(n topology.Node, subs ...string) bool {
	for _, w := range n.Warnings {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(w, s)
		}
		if ok {
			return true
		}
	}
	return false
}

// Bad input never fails discovery: each case yields a Node whose warnings
// name the file or device, and whose pairs stay right where they can.
func TestBadInput(t *testing.T) {
	const gpu0 = "0000:1b:00.0" // DGX H100 GPU 0 (internal/testutil/fakesys/testdata/machines/dgx-h100.yaml)
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, root string)
		check  func(t *testing.T, n topology.Node)
	}{
		{"no NVML", func(t *testing.T, root string) {
			os.Remove(filepath.Join(root, "nvml.json"))
		}, func(t *testing.T, n topology.Node) {
			if n.NVML.Source != "none" || len(n.GPUs) != 8 || n.GPUs[0].State != topology.GPUNoNVML {
				t.Errorf("NVML %+v GPU0 %+v", n.NVML, n.GPUs[0])
			}
			// The driver's own files still name the model, the minor and
			// the driver version (/proc/driver/nvidia).
			if g := n.GPUs[7]; g.Model != "NVIDIA H100 80GB HBM3" || g.Minor == nil || *g.Minor != 7 || g.InfoSource != "procfs" ||
				g.UUID != "GPU-dgxh100-0000-0000-0000-000000000007" {
				t.Errorf("GPU 7 from procfs: model %q minor %v source %q uuid %q", g.Model, g.Minor, g.InfoSource, g.UUID)
			}
			if n.Driver != (topology.DriverInfo{Version: "550.54.15", Source: "/proc/driver/nvidia/version"}) {
				t.Errorf("driver %+v", n.Driver)
			}
			// Without NVML, GPUs are in bus order and pairs still come from the tree.
			if n.GPUs[0].BusID != gpu0 || n.Pairs[0].NICs[0] != "mlx5_0" {
				t.Errorf("GPU0 %s pair %+v", n.GPUs[0].BusID, n.Pairs[0])
			}
		}},
		{"NVML library not found", func(t *testing.T, root string) {
			editReplay(t, root, func(f *nvml.ReplayFile) { f.Init = "ERROR_LIBRARY_NOT_FOUND" })
		}, func(t *testing.T, n topology.Node) {
			if n.NVML.Source != "none" || !strings.Contains(n.NVML.Error, "not found") || n.GPUs[3].State != topology.GPUNoNVML {
				t.Errorf("NVML %+v", n.NVML)
			}
		}},
		{"GPU on the bus that NVML does not list", func(t *testing.T, root string) {
			editReplay(t, root, func(f *nvml.ReplayFile) { f.Devices = f.Devices[1:] })
		}, func(t *testing.T, n topology.Node) {
			if !hasWarning(n, gpu0, "NVML does not list") {
				t.Errorf("warnings %q", n.Warnings)
			}
			var g topology.GPU
			for _, x := range n.GPUs {
				if x.BusID == gpu0 {
					g = x
				}
			}
			if g.State != topology.GPUNotInNVML || g.NVMLIndex != nil {
				t.Errorf("GPU = %+v", g)
			}
		}},
		{"NVML GPU the bus does not show", func(t *testing.T, root string) {
			editReplay(t, root, func(f *nvml.ReplayFile) {
				d := f.Devices[0]
				d.PCI.Value.BusID = "00000000:FE:00.0"
				f.Devices = append(f.Devices, d)
			})
		}, func(t *testing.T, n topology.Node) {
			if !hasWarning(n, "0000:fe:00.0", "PCI bus does not show") || len(n.GPUs) != 8 {
				t.Errorf("warnings %q, %d GPUs", n.Warnings, len(n.GPUs))
			}
		}},
		{"GPU lost", func(t *testing.T, root string) {
			editReplay(t, root, func(f *nvml.ReplayFile) { f.Devices[2].Handle = "ERROR_GPU_IS_LOST" })
		}, func(t *testing.T, n topology.Node) {
			if g := n.GPUs[2]; g.State != topology.GPULost || g.BusID != "0000:52:00.0" || g.Index != 2 {
				t.Errorf("GPU2 = %+v", g)
			}
			if !hasWarning(n, "0000:52:00.0", "matched by bus order") {
				t.Errorf("warnings %q", n.Warnings)
			}
		}},
		{"garbage numa_node", func(t *testing.T, root string) {
			os.WriteFile(filepath.Join(root, "sys/bus/pci/devices", gpu0, "numa_node"), []byte("abc\n"), 0o644)
		}, func(t *testing.T, n topology.Node) {
			if !hasWarning(n, gpu0, "numa_node") || n.GPUs[0].NUMANode != nil {
				t.Errorf("warnings %q GPU0 %+v", n.Warnings, n.GPUs[0])
			}
			// The switch still decides the pair.
			if n.Pairs[0].NICs[0] != "mlx5_0" || n.Pairs[0].Class != topology.ClassPIX {
				t.Errorf("pair %+v", n.Pairs[0])
			}
		}},
		{"no PCI bus in sysfs", func(t *testing.T, root string) {
			// A partial mount of /sys, or a kernel built without PCI (35
			// of the 42 real captures in hwloc's own test suite).
			os.RemoveAll(filepath.Join(root, "sys/bus/pci"))
		}, func(t *testing.T, n topology.Node) {
			if !n.NoPCIBus || len(n.GPUs) != 0 || len(n.NICs) != 0 || len(n.PCIDevices) != 0 {
				t.Errorf("NoPCIBus %v, %d GPUs, %d NICs, %d PCI devices; want the bus missing and nothing placed", n.NoPCIBus, len(n.GPUs), len(n.NICs), len(n.PCIDevices))
			}
			if !hasWarning(n, "sys/bus/pci/devices", "no PCI bus in sysfs", "GPUs and NICs are not placed") {
				t.Errorf("warnings %q", n.Warnings)
			}
			// The CPUs are still read: DGX H100's two sockets of 56 cores
			// with SMT (the spec's layout).
			if len(n.NUMANodes) != 2 || n.NUMANodes[0].CPUs.String() != "0-55,112-167" {
				t.Errorf("NUMA nodes %+v", n.NUMANodes)
			}
		}},
		{"cpulists ending in NUL (a capture's)", func(t *testing.T, root string) {
			for _, f := range []string{"sys/devices/system/cpu/online", "sys/devices/system/node/node0/cpulist",
				"sys/devices/system/node/node1/cpulist", filepath.Join("sys/bus/pci/devices", gpu0, "local_cpulist")} {
				b, err := os.ReadFile(filepath.Join(root, f))
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(root, f), append(b, 0), 0o644)
			}
		}, func(t *testing.T, n topology.Node) {
			if len(n.NUMANodes) != 2 || n.NUMANodes[0].CPUs.String() != "0-55,112-167" || n.NUMANodes[1].CPUs.String() != "56-111,168-223" ||
				n.CPU.Online.String() != "0-223" {
				t.Errorf("NUMA nodes %+v, online %s", n.NUMANodes, n.CPU.Online)
			}
			if g := n.GPUs[0]; g.NUMANode == nil || *g.NUMANode != 0 || g.LocalCPUs.String() != "0-55,112-167" {
				t.Errorf("GPU 0 %+v", g)
			}
			if hasWarning(n, "invalid cpu set") {
				t.Errorf("warnings %q", n.Warnings)
			}
		}},
		{"zero link width and empty local_cpulist", func(t *testing.T, root string) {
			d := filepath.Join(root, "sys/bus/pci/devices", gpu0)
			os.WriteFile(filepath.Join(d, "current_link_width"), []byte("0\n"), 0o644)
			os.WriteFile(filepath.Join(d, "local_cpulist"), []byte("\n"), 0o644)
		}, func(t *testing.T, n topology.Node) {
			if !hasWarning(n, gpu0, "local_cpulist") {
				t.Errorf("warnings %q", n.Warnings)
			}
		}},
		{"NIC vanished between listing and reading", func(t *testing.T, root string) {
			link := filepath.Join(root, "sys/class/infiniband/mlx5_0")
			target, _ := filepath.EvalSymlinks(link)
			os.RemoveAll(target)
		}, func(t *testing.T, n topology.Node) {
			if !hasWarning(n, "mlx5_0") {
				t.Errorf("warnings %q", n.Warnings)
			}
			for _, nic := range n.NICs {
				if nic.Name == "mlx5_0" {
					t.Errorf("vanished NIC still listed: %+v", nic)
				}
			}
			// GPU 0 loses its PIX NIC and falls back on the nearest compute NIC.
			if len(n.Pairs[0].NICs) == 0 || n.Pairs[0].Class == topology.ClassPIX {
				t.Errorf("pair %+v", n.Pairs[0])
			}
		}},
		{"dangling PCI link", func(t *testing.T, root string) {
			os.Symlink("../../../devices/pci0000:00/0000:00:1f.7", filepath.Join(root, "sys/bus/pci/devices/0000:00:1f.7"))
		}, func(t *testing.T, n topology.Node) {
			if !hasWarning(n, "0000:00:1f.7") {
				t.Errorf("warnings %q", n.Warnings)
			}
		}},
		{"hostile interface name", func(t *testing.T, root string) {
			// A netdev renamed to something a shell or a template would choke on.
			old := filepath.Join(root, "sys/class/net/ibp24s0")
			target, _ := os.Readlink(old)
			bad := "ib$(reboot)\"'; x"
			os.Remove(old)
			real := filepath.Join(filepath.Dir(old), target)
			os.Rename(real, filepath.Join(filepath.Dir(real), bad))
			os.Symlink(filepath.Join(filepath.Dir(target), bad), filepath.Join(root, "sys/class/net", bad))
		}, func(t *testing.T, n topology.Node) {
			// The name is data: kept byte for byte, tied to its NIC by PCI address.
			var nic topology.NIC
			for _, x := range n.NICs {
				if x.Name == "mlx5_0" {
					nic = x
				}
			}
			if len(nic.Netdevs) != 1 || nic.Netdevs[0] != "ib$(reboot)\"'; x" {
				t.Errorf("mlx5_0 netdevs = %q", nic.Netdevs)
			}
			if n.Pairs[0].NICs[0] != "mlx5_0" {
				t.Errorf("pair %+v", n.Pairs[0])
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakesystest.Root(t, "dgx-h100")
			tc.break_(t, root)
			n, err := Discover(Options{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, n)
		})
	}
}

func TestNoPCIBus(t *testing.T) {
	if _, err := Discover(Options{Root: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "sys/bus/pci/devices") {
		t.Fatalf("want an error naming the missing bus, got %v", err)
	}
}

// TestLiveRoot discovers this machine ("/"): live NVML (absent here:
// library not found, a reported state) and live netlink.
func TestLiveRoot(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Skip("no PCI bus visible here")
	}
	n, err := Discover(Options{Root: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Schema != topology.Schema || n.CPU.Online.IsEmpty() || len(n.NUMANodes) == 0 {
		t.Errorf("node = %+v", n)
	}
	if len(n.GPUs) == 0 && n.NVML.Source == "live" {
		t.Logf("NVML live with no GPU: %+v", n.NVML)
	}
}

// A GPU's memory node from the driver's numa_status (GB200 tray, GPU 0
// 0008:01:00.0, HBM node 2 on Grace node 0): every bad file degrades
// with a warning naming the GPU and the file, never a wrong node; NVML's
// answer, where it has one, wins.
func TestGPUMemoryNodeBadInput(t *testing.T) {
	const (
		gpu0 = "0008:01:00.0"
		file = "/proc/driver/nvidia/gpus/" + gpu0 + "/numa_status"
	)
	write := func(data string) func(t *testing.T, root string) {
		return func(t *testing.T, root string) {
			if err := os.WriteFile(filepath.Join(root, file), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ip := func(v int) *int { return &v }
	for _, tc := range []struct {
		name    string
		machine string
		break_  func(t *testing.T, root string)
		id      *int   // GPU 0's gpu_numa_id
		source  string // its gpu_numa_source
		status  string // its gpu_numa_status
		warn    []string
	}{
		{"the driver's full form", "gb200-nvl72-tray-no-nvml",
			write("Node:      2\nStatus:    online\nAddress:   400000000000\nSize:      2e00000000\n"),
			ip(2), "numa_status", "online", nil},
		{"garbage node", "gb200-nvl72-tray-no-nvml", write("Node:      two\nStatus:    online\n"),
			nil, "", "", []string{gpu0, file, `Node "two" names no NUMA node`}},
		{"NUMA_NO_NODE", "gb200-nvl72-tray-no-nvml", write("Node:      -1\nStatus:    offline\n"),
			nil, "", "", []string{gpu0, file, `Node "-1"`}},
		{"no status line", "gb200-nvl72-tray-no-nvml", write("Node:      2\n"),
			nil, "", "", []string{gpu0, file, "no Status line"}},
		{"unknown status", "gb200-nvl72-tray-no-nvml", write("Node:      2\nStatus:    sideways\n"),
			nil, "", "", []string{gpu0, file, `Status "sideways"`}},
		{"binary junk", "gb200-nvl72-tray-no-nvml", write("\x00\xff\xfe garbage"),
			nil, "", "", []string{gpu0, file, "no Node line"}},
		{"node sysfs does not list", "gb200-nvl72-tray-no-nvml", write("Node:      99\nStatus:    online\n"),
			nil, "", "", []string{gpu0, file, "node 99", "sysfs does not list"}},
		{"memory offline", "gb200-nvl72-tray-no-nvml", write("Node:      2\nStatus:    offline\n"),
			ip(2), "numa_status", "offline", []string{gpu0, file, "node 2 is offline, not online", "no memory node to bind to"}},
		{"FIFO", "gb200-nvl72-tray-no-nvml", func(t *testing.T, root string) {
			p := filepath.Join(root, file)
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, nil, "", "", []string{gpu0, file, "read"}},
		{"the driver's folder missing", "gb200-nvl72-tray-no-nvml", func(t *testing.T, root string) {
			os.RemoveAll(filepath.Join(root, "proc/driver/nvidia/gpus", gpu0))
		}, nil, "", "", []string{gpu0, "GPU memory node unknown", "/proc/driver/nvidia/gpus/" + gpu0 + " is missing", "2,10,18,26"}},
		{"NVML and the file disagree", "gb200-nvl72-tray", write("Node:      3\nStatus:    online\n"),
			ip(2), "nvml", "online", []string{gpu0, file, "NVML GetNumaNodeId says GPU memory node 2", "says node 3", "using NVML's"}},
		{"NVML answers, the file is garbage", "gb200-nvl72-tray", write("junk\n"),
			ip(2), "nvml", "", []string{gpu0, file, "no Node line"}},
		{"NVML answers, no file", "gb200-nvl72-tray", func(t *testing.T, root string) {
			os.Remove(filepath.Join(root, file))
		}, ip(2), "nvml", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakesystest.Root(t, tc.machine)
			tc.break_(t, root)
			n, err := Discover(Options{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			g := n.GPUs[0]
			if g.BusID != gpu0 {
				t.Fatalf("GPU 0 is %s", g.BusID)
			}
			if (g.GPUNUMAID == nil) != (tc.id == nil) || (g.GPUNUMAID != nil && *g.GPUNUMAID != *tc.id) ||
				g.GPUNUMASource != tc.source || g.GPUNUMAStatus != tc.status {
				t.Errorf("gpu_numa_id %v source %q status %q; want %v %q %q", g.GPUNUMAID, g.GPUNUMASource, g.GPUNUMAStatus, tc.id, tc.source, tc.status)
			}
			if tc.warn != nil && !hasWarning(n, tc.warn...) {
				t.Errorf("no warning with %q in %q", tc.warn, n.Warnings)
			}
			for _, w := range n.Warnings {
				if tc.warn == nil && (strings.Contains(w, "numa_status") || strings.Contains(w, "memory node")) {
					t.Errorf("unexpected warning %q", w)
				}
			}
			// The other GPUs keep their nodes, and GPU 0's locality is
			// its PCI numa_node's (Grace 0) whatever the file says.
			if g3 := n.GPUs[3]; g3.GPUNUMAID == nil || *g3.GPUNUMAID != 26 {
				t.Errorf("GPU 3 gpu_numa_id %v", g3.GPUNUMAID)
			}
			if g.Locality.Node == nil || *g.Locality.Node != 0 || g.Locality.Source != topology.LocalityNUMANode {
				t.Errorf("GPU 0 locality %+v", g.Locality)
			}
		})
	}
}

// Without NVML and without a PCI numa_node (-1: firmware without
// proximity for the root complex), the memory node from numa_status
// places the GPU: the nearest node with CPUs to HBM node 18 is Grace 1
// (distance 80, against 120 to Grace 0: the tray's SLIT).
func TestGPUMemoryNodeLocalityWithoutNVML(t *testing.T) {
	root := fakesystest.Root(t, "gb200-nvl72-tray-no-nvml")
	if err := os.WriteFile(filepath.Join(root, "sys/bus/pci/devices/0018:01:00.0/numa_node"), []byte("-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := Discover(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	g := n.GPUs[2]
	if g.BusID != "0018:01:00.0" || g.NUMANode != nil || g.GPUNUMAID == nil || *g.GPUNUMAID != 18 {
		t.Fatalf("GPU 2 %s numa_node %v gpu_numa_id %v", g.BusID, g.NUMANode, g.GPUNUMAID)
	}
	if g.Locality.Source != topology.LocalityGPUMemory || g.Locality.Node == nil || *g.Locality.Node != 1 || g.Locality.CPUs.String() != "72-143" {
		t.Errorf("GPU 2 locality %+v; want node 1 (CPUs 72-143) from gpu_numa_id", g.Locality)
	}
}
