package pci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs/rootfstest"
)

// writeTree makes a small sysfs: a root port 0000:00:01.0 with a GPU
// 0000:01:00.0 below it, and whatever extra the test adds.
func writeTree(t *testing.T, files map[string]string, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func attrs(dir string, kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[filepath.Join(dir, kv[i])] = kv[i+1] + "\n"
	}
	return m
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

const (
	rp  = "sys/devices/pci0000:00/0000:00:01.0"
	gpu = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
)

func good(dir, class string) map[string]string {
	return attrs(dir, "class", class, "vendor", "0x10de", "device", "0x2330",
		"subsystem_vendor", "0x10de", "subsystem_device", "0x16c1", "numa_node", "0",
		"local_cpulist", "0-3", "current_link_speed", "32.0 GT/s PCIe", "current_link_width", "16",
		"max_link_speed", "32.0 GT/s PCIe", "max_link_width", "16")
}

var busLinks = map[string]string{
	"sys/bus/pci/devices/0000:00:01.0": "../../../devices/pci0000:00/0000:00:01.0",
	"sys/bus/pci/devices/0000:01:00.0": "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
}

func TestDevicesTree(t *testing.T) {
	root := writeTree(t, merge(good(rp, "0x060400"), good(gpu, "0x030200")), busLinks)
	devs, errs, err := NewFS(rootfstest.Open(t, root)).Devices()
	if err != nil || len(errs) != 0 {
		t.Fatalf("Devices: %v %v", err, errs)
	}
	if len(devs) != 2 {
		t.Fatalf("got %d devices", len(devs))
	}
	g := devs[1]
	if g.Address.String() != "0000:01:00.0" || g.Parent == nil || g.Parent.String() != "0000:00:01.0" ||
		g.RootBus != "pci0000:00" || g.Class != 0x030200 || g.NUMANode == nil || *g.NUMANode != 0 ||
		g.LocalCPUs.String() != "0-3" || g.CurrentLinkWidth != 16 || g.MaxLinkSpeed != "32.0 GT/s PCIe" {
		t.Errorf("GPU = %+v", g)
	}
	if devs[0].Parent != nil || !devs[0].IsBridge() {
		t.Errorf("root port = %+v", devs[0])
	}
}

// Bad input: every case still returns the device (or drops only the
// broken one) with an error naming the file or device; none panics.
func TestDevicesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		links   map[string]string
		wantN   int
		wantErr string
	}{
		{"numa_node garbage", merge(good(rp, "0x060400"), good(gpu, "0x030200"), attrs(gpu, "numa_node", "abc")), busLinks, 2, "numa_node"},
		{"empty local_cpulist", merge(good(rp, "0x060400"), good(gpu, "0x030200"), attrs(gpu, "local_cpulist", "")), busLinks, 2, "empty CPU list"},
		{"missing class", func() map[string]string {
			m := merge(good(rp, "0x060400"), good(gpu, "0x030200"))
			delete(m, filepath.Join(gpu, "class"))
			return m
		}(), busLinks, 2, "class"},
		{"dangling link", good(rp, "0x060400"), map[string]string{
			"sys/bus/pci/devices/0000:00:01.0": "../../../devices/pci0000:00/0000:00:01.0",
			"sys/bus/pci/devices/0000:02:00.0": "../../../devices/pci0000:00/0000:00:01.0/0000:02:00.0",
		}, 1, "0000:02:00.0"},
		{"link escaping root", good(rp, "0x060400"), map[string]string{
			"sys/bus/pci/devices/0000:00:01.0": "../../../devices/pci0000:00/0000:00:01.0",
			"sys/bus/pci/devices/0000:03:00.0": "../../../../../../etc",
		}, 1, "leads outside the root"},
		{"name not an address", good(rp, "0x060400"), map[string]string{
			"sys/bus/pci/devices/0000:00:01.0": "../../../devices/pci0000:00/0000:00:01.0",
			"sys/bus/pci/devices/garbage":      "../../../devices/pci0000:00/0000:00:01.0",
		}, 1, "garbage"},
		{"zero link width", merge(good(rp, "0x060400"), good(gpu, "0x030200"), attrs(gpu, "current_link_width", "0")), busLinks, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, tc.files, tc.links)
			devs, errs, err := NewFS(rootfstest.Open(t, root)).Devices()
			if err != nil {
				t.Fatal(err)
			}
			if len(devs) != tc.wantN {
				t.Errorf("got %d devices, want %d", len(devs), tc.wantN)
			}
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			all := strings.Join(msgs, "\n")
			if tc.wantErr == "" && len(errs) != 0 {
				t.Errorf("unexpected errors: %s", all)
			}
			if tc.wantErr != "" && !strings.Contains(all, tc.wantErr) {
				t.Errorf("errors %q do not mention %q", all, tc.wantErr)
			}
		})
	}
}

func TestDevicesNoBus(t *testing.T) {
	if _, _, err := NewFS(rootfstest.Open(t, t.TempDir())).Devices(); err == nil || !strings.Contains(err.Error(), "sys/bus/pci/devices") {
		t.Fatalf("want an error naming the directory, got %v", err)
	}
}

// Hyper-V puts the root bus below VMBus and ACPI nodes.
func TestChainSkipsNonPCIPrefix(t *testing.T) {
	a, _ := ParseAddress("0001:00:00.0")
	rootBus, parent, err := chain("sys/devices/LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/47505500-0001-0000-3130-444531454238/pci0001:00/0001:00:00.0", a)
	if err != nil || rootBus != "pci0001:00" || parent != nil {
		t.Fatalf("chain = %q %v %v", rootBus, parent, err)
	}
}
