package fakesys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readAttr reads a file of root, "" with ok false when it is missing.
func readAttr(t *testing.T, root, p string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// TestPensandoDefaults: a Pensando NIC left to the defaults is an ionic
// Ethernet PF (ionic.h: vendor 0x1dd8, device 0x1002) with a Pensando MAC,
// and its RDMA device has what ionic_ibdev.c writes: hca_type the node
// description, no board_id, GUIDs the MAC's modified EUI-64, no mlx5
// hw_counters.
func TestPensandoDefaults(t *testing.T) {
	spec := strings.Replace(minimal, `netdevs: [{name: eth0}]`, `vendor: "0x1dd8"
            netdevs: [{name: benic1p1}]
            rdma: {name: ionic_0, fw_ver: 1.0.0-a-1, ports: [{port: 1, link_layer: Ethernet}]}`, 1)
	root := buildSpec(t, "pensando.yaml", spec)
	fn := "sys/bus/pci/devices/0000:11:00.1/"
	ib := "sys/class/infiniband/ionic_0/"
	for p, want := range map[string]string{
		fn + "vendor":                    "0x1dd8\n",
		fn + "device":                    "0x1002\n",
		fn + "class":                     "0x020000\n",
		"sys/class/net/benic1p1/address": "00:ae:cd:11:01:00\n",
		ib + "hca_type":                  "AMD Pensando RoCE HCA\n",
		ib + "fw_ver":                    "1.0.0-a-1\n",
		// fn 11:00.1: 00:ae:cd:11:01:00 -> 02ae:cdff:fe11:0100 (U/L bit flipped, ff:fe inserted).
		ib + "node_guid":                 "02ae:cdff:fe11:0100\n",
		ib + "sys_image_guid":            "02ae:cdff:fe11:0100\n",
		ib + "ports/1/gids/0":            "fe80:0000:0000:0000:02ae:cdff:fe11:0100\n",
		ib + "ports/1/gid_attrs/ndevs/0": "benic1p1\n",
	} {
		if got, ok := readAttr(t, root, p); !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", p, got, ok, want)
		}
	}
	if got, err := os.Readlink(filepath.Join(root, fn+"driver")); err != nil || filepath.Base(got) != "ionic" {
		t.Errorf("driver link = %q, %v; want .../drivers/ionic", got, err)
	}
	if _, ok := readAttr(t, root, ib+"board_id"); ok {
		t.Error("ionic RDMA device has a board_id; the driver writes none")
	}
	if ents, err := os.ReadDir(filepath.Join(root, ib, "ports/1/hw_counters")); err == nil && len(ents) > 0 {
		t.Errorf("ionic port has %d hw_counters; without overrides it has none", len(ents))
	}
}

// TestMellanoxDefaultsUnchanged: a NIC of no vendor keeps the mlx5
// defaults fakesys always wrote.
func TestMellanoxDefaultsUnchanged(t *testing.T) {
	spec := strings.Replace(minimal, `netdevs: [{name: eth0}]`, `netdevs: [{name: eth0}]
            rdma: {name: mlx5_0, ports: [{port: 1}]}`, 1)
	root := buildSpec(t, "mlx5.yaml", spec)
	ib := "sys/class/infiniband/mlx5_0/"
	for p, want := range map[string]string{
		"sys/class/net/eth0/address": "0c:42:a1:11:01:00\n",
		ib + "hca_type":              "MT4129\n",
		ib + "board_id":              "MT_0000000838\n",
		ib + "fw_ver":                "28.39.1002\n",
		ib + "node_guid":             "0c42:a103:0011:0001\n",
	} {
		if got, ok := readAttr(t, root, p); !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", p, got, ok, want)
		}
	}
	if got, err := os.Readlink(filepath.Join(root, "sys/bus/pci/devices/0000:11:00.1/driver")); err != nil || filepath.Base(got) != "mlx5_core" {
		t.Errorf("driver link = %q, %v; want .../drivers/mlx5_core", got, err)
	}
}

// TestBIOSVersion: bios_version is written only when the spec gives one.
func TestBIOSVersion(t *testing.T) {
	const p = "sys/devices/virtual/dmi/id/bios_version"
	if _, ok := readAttr(t, buildSpec(t, "nobios.yaml", minimal), p); ok {
		t.Errorf("%s written without dmi.bios_version", p)
	}
	spec := strings.Replace(minimal, "name: tiny\n", "name: tiny\ndmi: {sys_vendor: Microsoft Corporation, bios_version: Hyper-V UEFI Release v4.1}\n", 1)
	if got, _ := readAttr(t, buildSpec(t, "bios.yaml", spec), p); got != "Hyper-V UEFI Release v4.1\n" {
		t.Errorf("%s = %q", p, got)
	}
}

// TestMI300XFixtureNICs holds the three MI300X fixtures' NICs to their
// sources: the Pollara machine's ionic devices (netdev and bus per the
// acceptance guide's rdma link listing, see the spec), the Azure VM's
// bios_version and IB VFs, OCI's RoCE v2 IPv4 GID at index 3.
func TestMI300XFixtureNICs(t *testing.T) {
	pollara := machineRoot(t, "amd-mi300x-pollara")
	for dev, want := range map[string]struct{ bus, netdev string }{
		"ionic_0": {"cd", "benic7p1"}, "ionic_1": {"f1", "benic8p1"}, "ionic_2": {"9c", "benic6p1"}, "ionic_3": {"8f", "benic5p1"},
		"ionic_4": {"53", "benic3p1"}, "ionic_5": {"23", "benic2p1"}, "ionic_6": {"09", "benic1p1"}, "ionic_7": {"69", "benic4p1"},
	} {
		link, err := os.Readlink(filepath.Join(pollara, "sys/class/infiniband", dev, "device"))
		if err != nil || filepath.Base(link) != "0000:"+want.bus+":00.0" {
			t.Errorf("%s device = %q, %v; want 0000:%s:00.0", dev, link, err, want.bus)
		}
		if got, _ := readAttr(t, pollara, "sys/class/infiniband/"+dev+"/ports/1/gid_attrs/ndevs/1"); got != want.netdev+"\n" {
			t.Errorf("%s GID 1 ndev = %q, want %s", dev, got, want.netdev)
		}
		if got, _ := readAttr(t, pollara, "sys/class/infiniband/"+dev+"/hca_type"); got != "AMD Pensando RoCE HCA\n" {
			t.Errorf("%s hca_type = %q", dev, got)
		}
	}
	azure := machineRoot(t, "azure-nd-mi300x-v5")
	if got, _ := readAttr(t, azure, "sys/class/dmi/id/bios_version"); !strings.HasPrefix(got, "Hyper-V UEFI Release") {
		t.Errorf("azure bios_version = %q", got)
	}
	// Azure's rename goes by PCI address: mlx5_ib0 is 0010, mlx5_ib7 0080.
	for dev, bdf := range map[string]string{"mlx5_ib0": "0010:00:00.0", "mlx5_ib7": "0080:00:00.0", "mlx5_an0": "8f6c:00:02.0"} {
		if link, err := os.Readlink(filepath.Join(azure, "sys/class/infiniband", dev, "device")); err != nil || filepath.Base(link) != bdf {
			t.Errorf("%s device = %q, %v; want %s", dev, link, err, bdf)
		}
	}
	if got, _ := readAttr(t, azure, "sys/bus/pci/devices/0011:00:00.0/device"); got != "0x74b5\n" {
		t.Errorf("azure GPU 0 device = %q, want the MI300X VF 0x74b5", got)
	}
	oci := machineRoot(t, "oci-bm-gpu-mi300x")
	for _, p := range []struct{ file, want string }{
		{"sys/class/infiniband/mlx5_0/ports/1/gids/3", "0000:0000:0000:0000:0000:ffff:c0a8:0001\n"},
		{"sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3", "RoCE v2\n"},
		{"sys/class/dmi/id/chassis_asset_tag", "OracleCloud.com\n"},
	} {
		if got, _ := readAttr(t, oci, p.file); got != p.want {
			t.Errorf("oci %s = %q, want %q", p.file, got, p.want)
		}
	}
}
