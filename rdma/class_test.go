package rdma

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs/rootfstest"
)

func write(t *testing.T, root string, files map[string]string, links map[string]string) {
	t.Helper()
	for p, v := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
}

const fn = "sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0"

// A RoCE port with a GID table in which index 1 is unpopulated (all
// zeros) and index 2 has no type file.
func TestDevicesRoCE(t *testing.T) {
	root := t.TempDir()
	ib := fn + "/infiniband/mlx5_0"
	p := ib + "/ports/1"
	write(t, root, map[string]string{
		ib + "/fw_ver":                         "28.39.1002",
		ib + "/node_guid":                      "a088:c203:0012:3456",
		p + "/state":                           "4: ACTIVE",
		p + "/phys_state":                      "5: LinkUp",
		p + "/rate":                            "200 Gb/sec (4X HDR)",
		p + "/link_layer":                      "Ethernet",
		p + "/gids/0":                          "fe80:0000:0000:0000:a288:c2ff:fe12:3456",
		p + "/gid_attrs/types/0":               "IB/RoCE v1",
		p + "/gid_attrs/ndevs/0":               "eth2",
		p + "/gids/1":                          "0000:0000:0000:0000:0000:0000:0000:0000",
		p + "/gids/2":                          "0000:0000:0000:0000:0000:ffff:0a00:0001",
		p + "/gids/3":                          "0000:0000:0000:0000:0000:ffff:0a00:0001",
		p + "/gid_attrs/types/3":               "RoCE v2",
		p + "/gid_attrs/ndevs/3":               "eth2",
		fn + "/net/eth2/operstate":             "up",
		fn + "/net/eth2/mtu":                   "9000",
		fn + "/net/eth2/speed":                 "200000",
		fn + "/net/eth2/address":               "a0:88:c2:12:34:56",
		fn + "/net/eth2/type":                  "1",
		"sys/devices/virtual/net/lo/operstate": "unknown",
		"sys/devices/virtual/net/lo/mtu":       "65536",
	}, map[string]string{
		"sys/class/infiniband/mlx5_0": "../../devices/pci0000:00/0000:00:02.0/0000:03:00.0/infiniband/mlx5_0",
		"sys/class/net/eth2":          "../../devices/pci0000:00/0000:00:02.0/0000:03:00.0/net/eth2",
		"sys/class/net/lo":            "../../devices/virtual/net/lo",
		// A NIC unplugged between the listing and the read.
		"sys/class/infiniband/mlx5_9": "../../devices/pci0000:00/0000:00:02.0/0000:09:00.0/infiniband/mlx5_9",
	})
	devs, errs := Devices(rootfstest.Open(t, root))
	if len(devs) != 1 {
		t.Fatalf("got %d devices: %+v", len(devs), devs)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "mlx5_9") {
		t.Errorf("want one error naming the vanished mlx5_9, got %v", errs)
	}
	d := devs[0]
	if d.PCI == nil || d.PCI.String() != "0000:03:00.0" || d.FirmwareVersion != "28.39.1002" || len(d.Ports) != 1 {
		t.Fatalf("device = %+v", d)
	}
	port := d.Ports[0]
	if port.StateID != 4 || port.PhysState != "LinkUp" || port.RateGbps != 200 || port.LinkLayer != "Ethernet" || port.Netdev != "eth2" {
		t.Errorf("port = %+v", port)
	}
	want := []GID{
		{Index: 0, GID: "fe80:0000:0000:0000:a288:c2ff:fe12:3456", Type: "IB/RoCE v1", Netdev: "eth2"},
		{Index: 3, GID: "0000:0000:0000:0000:0000:ffff:0a00:0001", Type: "RoCE v2", Netdev: "eth2"},
	}
	if len(port.GIDs) != len(want) || port.GIDs[0] != want[0] || port.GIDs[1] != want[1] {
		t.Errorf("GIDs = %+v, want %+v", port.GIDs, want)
	}

	nds, nerrs := Netdevs(rootfstest.Open(t, root))
	if len(nerrs) != 0 || len(nds) != 2 {
		t.Fatalf("Netdevs = %+v, %v", nds, nerrs)
	}
	if nds[0].Name != "eth2" || nds[0].PCI == nil || nds[0].PCI.String() != "0000:03:00.0" || nds[0].MTU != 9000 || nds[0].SpeedMbps != 200000 {
		t.Errorf("eth2 = %+v", nds[0])
	}
	if nds[1].Name != "lo" || nds[1].PCI != nil {
		t.Errorf("lo = %+v", nds[1])
	}
}

func TestDevicesGarbagePort(t *testing.T) {
	root := t.TempDir()
	ib := fn + "/infiniband/mlx5_0"
	write(t, root, map[string]string{
		ib + "/fw_ver":             "28.39.1002",
		ib + "/ports/1/state":      "ACTIVE",
		ib + "/ports/1/phys_state": "5: LinkUp",
		ib + "/ports/1/rate":       "lots",
		ib + "/ports/1/link_layer": "InfiniBand",
	}, map[string]string{
		"sys/class/infiniband/mlx5_0": "../../devices/pci0000:00/0000:00:02.0/0000:03:00.0/infiniband/mlx5_0",
	})
	devs, errs := Devices(rootfstest.Open(t, root))
	if len(devs) != 1 || len(devs[0].Ports) != 1 {
		t.Fatalf("devices = %+v", devs)
	}
	all := ""
	for _, e := range errs {
		all += e.Error() + "\n"
	}
	for _, want := range []string{"mlx5_0", "port 1", "ports/1/state", "ports/1/rate"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors %q lack %q", all, want)
		}
	}
	if p := devs[0].Ports[0]; p.PhysStateID != 5 || p.RateGbps != 0 || p.LinkLayer != "InfiniBand" {
		t.Errorf("port = %+v", p)
	}
}

func TestNoRDMAClass(t *testing.T) {
	devs, errs := Devices(rootfstest.Open(t, t.TempDir()))
	if devs != nil || errs != nil {
		t.Fatalf("got %v %v", devs, errs)
	}
}

// An empty or junk link_layer is not a fabric: the port is read, with a
// warning naming the file, instead of passing for RoCE in silence.
func TestDevicesJunkLinkLayer(t *testing.T) {
	for _, ll := range []string{"", "Infiniband\x00junk", "ethernet"} {
		root := t.TempDir()
		ib := fn + "/infiniband/mlx5_0"
		write(t, root, map[string]string{
			ib + "/ports/1/state":      "4: ACTIVE",
			ib + "/ports/1/phys_state": "5: LinkUp",
			ib + "/ports/1/rate":       "400 Gb/sec (4X NDR)",
			ib + "/ports/1/link_layer": ll,
		}, map[string]string{
			"sys/class/infiniband/mlx5_0": "../../devices/pci0000:00/0000:00:02.0/0000:03:00.0/infiniband/mlx5_0",
		})
		devs, errs := Devices(rootfstest.Open(t, root))
		if len(devs) != 1 || len(devs[0].Ports) != 1 {
			t.Fatalf("%q: devices = %+v", ll, devs)
		}
		all := ""
		for _, e := range errs {
			all += e.Error() + "\n"
		}
		if !strings.Contains(all, "ports/1/link_layer") || !strings.Contains(all, "not a link layer the kernel writes") {
			t.Errorf("%q: errors %q", ll, all)
		}
	}
}
