package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/rdma"
	"github.com/gpuaffinity/gpuaffinity/render"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The storage root, built by hand:
//
//	pci0000:00
//	├── 0000:00:01.0 root port, ACS on (control 0x001d: SV RR CR UF)
//	│   └── 0000:01:00.0 NVMe nvme0: nvme0n1, partition nvme0n1p1 mounted on /
//	├── 0000:00:02.0 root port, config read as 64 bytes (unprivileged): ACS unknown
//	│   └── 0000:02:00.0 NVMe nvme1: nvme1n1, the one member of md0 (raid0) on /raid (xfs)
//	├── 0000:00:03.0 root port, ACS capability with no control bit: off
//	│   └── 0000:03:00.0 GPU
//	└── 0000:00:04.0 root port, 256 bytes of config: no extended space, ACS absent
//	    └── 0000:04:00.0 NIC, netdev eth0 10.0.0.5/24, carrying an NFS over RDMA mount
//
// with one IOMMU unit (dmar0), each endpoint in its own identity group,
// iommu=pt on the command line, nvidia-fs 2.28 loaded and nvme_core
// multipath off.
const (
	stRP1  = pciHost + "/0000:00:01.0"
	stRP2  = pciHost + "/0000:00:02.0"
	stRP3  = pciHost + "/0000:00:03.0"
	stRP4  = pciHost + "/0000:00:04.0"
	stNVMe = stRP1 + "/0000:01:00.0"
	stRAID = stRP2 + "/0000:02:00.0"
	stGPU  = stRP3 + "/0000:03:00.0"
	stNIC  = stRP4 + "/0000:04:00.0"

	stSerial0 = "S4YPNA0T123456"
	stSerial1 = "S4YPNA0T654321"
)

// configSpace is a type 1 (bridge) or type 0 header of n bytes, with an
// ACS extended capability at 0x100 when n is 4096 and acs is set.
func configSpace(n int, bridge bool, acs *[2]uint16) string {
	b := make([]byte, 4096)
	le := binary.LittleEndian
	le.PutUint16(b[0:], 0x8086)
	if bridge {
		b[0x0e] = 0x01
		b[0x0b], b[0x0a] = 0x06, 0x04
	}
	if acs != nil {
		le.PutUint32(b[0x100:], 0x000d|1<<16) // ACS, version 1, last capability
		le.PutUint16(b[0x104:], acs[0])
		le.PutUint16(b[0x106:], acs[1])
	}
	return string(b[:n])
}

func buildStorageRoot(t *testing.T) *fakeRoot {
	f := newFakeRoot(t)
	pciDev := func(dir, vendor, device, class, config string) {
		bdf := path.Base(dir)
		for name, v := range map[string]string{"vendor": vendor, "device": device, "class": class,
			"subsystem_vendor": vendor, "subsystem_device": "0x0001", "numa_node": "0", "local_cpulist": "0-3",
			"current_link_speed": "16.0 GT/s PCIe", "current_link_width": "4", "max_link_speed": "16.0 GT/s PCIe", "max_link_width": "4"} {
			f.file(dir+"/"+name, v+"\n")
		}
		f.file(dir+"/config", config)
		f.link("sys/bus/pci/devices/"+bdf, relLink(t, "sys/bus/pci/devices/"+bdf, dir))
	}
	on, off := [2]uint16{0x005f, 0x001d}, [2]uint16{0x005f, 0x0000}
	pciDev(stRP1, "0x8086", "0x352a", "0x060400", configSpace(4096, true, &on))
	pciDev(stRP2, "0x8086", "0x352b", "0x060400", configSpace(64, true, &on))
	pciDev(stRP3, "0x8086", "0x352c", "0x060400", configSpace(4096, true, &off))
	pciDev(stRP4, "0x8086", "0x352d", "0x060400", configSpace(256, true, nil))
	pciDev(stNVMe, "0x144d", "0xa824", "0x010802", configSpace(4096, false, nil))
	pciDev(stRAID, "0x144d", "0xa824", "0x010802", configSpace(4096, false, nil))
	pciDev(stGPU, "0x10de", "0x2335", "0x030200", configSpace(4096, false, nil))
	pciDev(stNIC, "0x15b3", "0x1021", "0x020000", configSpace(4096, false, nil))
	for _, d := range []struct{ dev, drv string }{{stNVMe, "nvme"}, {stRAID, "nvme"}, {stGPU, "nvidia"}, {stNIC, "mlx5_core"}} {
		f.link(d.dev+"/driver", relLink(t, d.dev+"/driver", "sys/bus/pci/drivers/"+d.drv))
	}

	// NVMe controllers, namespaces, and the subsystem of nvme0.
	ctrl := func(fn, name, serial string) string {
		d := fn + "/nvme/" + name
		f.file(d+"/model", "SAMSUNG MZWLJ3T8HBLS-00007\n")
		f.file(d+"/serial", serial+"\n")
		f.file(d+"/firmware_rev", "EPK9GB5Q\n")
		f.file(d+"/transport", "pcie\n")
		f.file(d+"/address", path.Base(fn)+"\n")
		f.file(d+"/state", "live\n")
		f.file(d+"/numa_node", "0\n")
		f.extra(d+"/subsysnqn", "nqn.2014.08.org.nvmexpress:144d144d"+serial+"\n")
		f.extra(d+"/cntlid", "1\n")
		f.link(d+"/device", "../../../"+path.Base(fn))
		f.link("sys/class/nvme/"+name, relLink(t, "sys/class/nvme/"+name, d))
		return d
	}
	block := func(dir, size string) {
		f.file(dir+"/size", size+"\n")
		f.extra(dir+"/dev", "259:0\n")
		f.extra(dir+"/queue/logical_block_size", "4096\n")
		name := path.Base(dir)
		f.link("sys/class/block/"+name, relLink(t, "sys/class/block/"+name, dir))
	}
	n0 := ctrl(stNVMe, "nvme0", stSerial0)
	block(n0+"/nvme0n1", "7501476528")
	f.mkdir(n0 + "/nvme0n1/slaves")
	f.mkdir(n0 + "/nvme0n1/holders")
	block(n0+"/nvme0n1/nvme0n1p1", "7501474480")
	f.file(n0+"/nvme0n1/nvme0n1p1/partition", "1\n")
	n1 := ctrl(stRAID, "nvme1", stSerial1)
	block(n1+"/nvme1n1", "7501476528")
	f.mkdir(n1 + "/nvme1n1/slaves")
	md := "sys/devices/virtual/block/md0"
	block(md, "7501213696")
	f.file(md+"/md/level", "raid0\n")
	f.extra(md+"/md/array_state", "clean\n")
	f.link(md+"/slaves/nvme1n1", relLink(t, md+"/slaves/nvme1n1", n1+"/nvme1n1"))
	f.link(n1+"/nvme1n1/holders/md0", relLink(t, n1+"/nvme1n1/holders/md0", md))
	sub := "sys/devices/virtual/nvme-subsystem/nvme-subsys0"
	f.file(sub+"/model", "SAMSUNG MZWLJ3T8HBLS-00007\n")
	f.file(sub+"/serial", stSerial0+"\n")
	f.file(sub+"/iopolicy", "numa\n")
	f.extra(sub+"/subsysnqn", "nqn.2014.08.org.nvmexpress:144d144d"+stSerial0+"\n")
	f.link(sub+"/nvme0", relLink(t, sub+"/nvme0", n0))
	f.link("sys/class/nvme-subsystem/nvme-subsys0", relLink(t, "sys/class/nvme-subsystem/nvme-subsys0", sub))

	// The NIC's netdev.
	f.file(stNIC+"/net/eth0/address", fakeMAC+"\n")
	f.file(stNIC+"/net/eth0/operstate", "up\n")
	f.file(stNIC+"/net/eth0/mtu", "9000\n")
	f.file(stNIC+"/net/eth0/type", "1\n")
	f.link(stNIC+"/net/eth0/device", "../../../0000:04:00.0")
	f.link("sys/class/net/eth0", relLink(t, "sys/class/net/eth0", stNIC+"/net/eth0"))
	addrs := "{\n  \"schema\": \"gpuaffinity.addresses/v1\",\n  \"interfaces\": {\n    \"eth0\": [\n      \"10.0.0.5/24\"\n    ]\n  }\n}\n"
	f.write(rdma.AddressesFile, addrs, 0o644)
	f.want[rdma.AddressesFile] = addrs

	// IOMMU: one unit, a group per endpoint.
	f.link("sys/class/iommu/dmar0", "../../devices/virtual/iommu/dmar0")
	f.extra("sys/devices/virtual/iommu/dmar0/intel-iommu/version", "1:0\n")
	f.wantDirs = append(f.wantDirs, "sys/devices/virtual/iommu/dmar0")
	for i, d := range []string{stNVMe, stRAID, stGPU, stNIC} {
		g := fmt.Sprintf("sys/kernel/iommu_groups/%d", i)
		f.file(g+"/type", "identity\n")
		f.extraLink(g+"/devices/"+path.Base(d), relLink(t, g+"/devices/"+path.Base(d), d))
		f.link(d+"/iommu_group", relLink(t, d+"/iommu_group", g))
	}

	// CPUs and the NUMA node.
	f.file("sys/devices/system/cpu/online", "0-3\n")
	f.file("sys/devices/system/node/online", "0\n")
	f.file("sys/devices/system/node/node0/cpulist", "0-3\n")
	f.file("sys/devices/system/node/node0/distance", "10\n")

	// procfs and modules.
	f.file("proc/mounts", strings.Join([]string{
		"/dev/nvme0n1p1 / ext4 rw,relatime 0 0",
		"/dev/md0 /raid xfs rw,relatime 0 0",
		"10.0.0.10:/export /mnt/nfs nfs4 rw,vers=4.2,proto=rdma,port=20049,clientaddr=10.0.0.5,addr=10.0.0.10 0 0",
		"sysfs /sys sysfs rw 0 0",
	}, "\n")+"\n")
	f.file("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=UUID=0b5a9c1e-7d2f-4c1a-9a59-3c1d2e4f5a6b ro intel_iommu=on iommu=pt\n")
	f.file("proc/driver/nvidia-fs/version", "version: 2.28\n")
	f.extra("proc/driver/nvidia-fs/stats", "GDS Version: 1.17.1.22 \n")
	f.file("sys/module/nvme_core/parameters/multipath", "N\n")
	f.extra("sys/module/nvme_core/parameters/io_timeout", "30\n")
	f.file("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n")
	return f
}

// mkdir makes an empty directory the snapshot must hold (a whole disk's
// slaves/: "built on nothing").
func (f *fakeRoot) mkdir(p string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Join(f.dir, p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	f.wantDirs = append(f.wantDirs, p)
}

func jsonOf(t *testing.T, n topology.Node) string {
	t.Helper()
	var b bytes.Buffer
	if err := render.JSON(&b, n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestStorageSnapshot snapshots the storage root: the files and links
// discovery's storage layer reads are copied, the rest is not, and
// discovery of the snapshot is discovery of the root: the same storage
// section, ACS of every bridge and interface addresses, and the same JSON
// byte for byte.
func TestStorageSnapshot(t *testing.T) {
	f := buildStorageRoot(t)
	out := filepath.Join(t.TempDir(), "snap")
	rep, err := WriteDir(Options{Root: f.dir}, out)
	if err != nil {
		t.Fatalf("WriteDir: %v", err)
	}
	if len(rep.Warnings) != 0 {
		t.Errorf("warnings: %q", rep.Warnings)
	}
	if want := filepath.Join(f.dir, rdma.AddressesFile); rep.Addresses != want {
		t.Errorf("Report.Addresses = %q, want %q", rep.Addresses, want)
	}
	got := walkTree(t, out)
	for p, content := range f.want {
		if got[p] != "f:"+content {
			t.Errorf("%s: got %.60q, want file %.60q", p, got[p], content)
		}
	}
	for p, text := range f.wantLinks {
		if got[p] != "l:"+text {
			t.Errorf("%s: got %q, want link %q", p, got[p], text)
		}
	}
	for _, d := range f.wantDirs {
		if got[d] != "d" {
			t.Errorf("%s: got %q, want a directory", d, got[d])
		}
	}
	for _, p := range f.forbidden {
		if v, ok := got[p]; ok {
			t.Errorf("%s: must not be in the snapshot, got %.40q", p, v)
		}
	}
	if got["proc/driver/nvidia-fs"] != "d" {
		t.Errorf("proc/driver/nvidia-fs: want the folder, got %q", got["proc/driver/nvidia-fs"])
	}

	before, after := discoverAt(t, f.dir), discoverAt(t, out)
	checkStorageRoot(t, before)
	if d := cmp.Diff(before.Storage, after.Storage); d != "" {
		t.Errorf("storage differs after the snapshot (-root +snapshot):\n%s", d)
	}
	if d := cmp.Diff(acsOf(before), acsOf(after)); d != "" {
		t.Errorf("ACS differs after the snapshot (-root +snapshot):\n%s", d)
	}
	if d := cmp.Diff(ipv4Of(before), ipv4Of(after)); d != "" {
		t.Errorf("IPv4 differs after the snapshot (-root +snapshot):\n%s", d)
	}
	// Warnings and ACS reasons name the file read, under each root.
	a := strings.ReplaceAll(jsonOf(t, before), f.dir, "ROOT")
	b := strings.ReplaceAll(jsonOf(t, after), out, "ROOT")
	if a != b {
		t.Errorf("topology JSON differs after the snapshot (-root +snapshot):\n%s", cmp.Diff(a, b))
	}

	// Scrubbed: the serials change, consistently; nothing else of the
	// storage section does.
	scrubbed := filepath.Join(t.TempDir(), "scrub")
	if _, err := WriteDir(Options{Root: f.dir, Scrub: true}, scrubbed); err != nil {
		t.Fatal(err)
	}
	sg := walkTree(t, scrubbed)
	ctrl0 := sg[stNVMe+"/nvme/nvme0/serial"]
	if ctrl0 == "f:"+stSerial0+"\n" || len(ctrl0) != len("f:"+stSerial0+"\n") {
		t.Errorf("nvme0 serial scrubbed to %q: want another value of the same length", ctrl0)
	}
	if subs := sg["sys/devices/virtual/nvme-subsystem/nvme-subsys0/serial"]; subs != ctrl0 {
		t.Errorf("subsystem serial %q, controller %q: the same serial must get the same fake", subs, ctrl0)
	}
	if strings.Contains(sg["proc/cmdline"], "0b5a9c1e") || !strings.Contains(sg["proc/cmdline"], "intel_iommu=on iommu=pt") {
		t.Errorf("scrubbed proc/cmdline = %q: want the root UUID replaced, the IOMMU options kept", sg["proc/cmdline"])
	}
	scr := discoverAt(t, scrubbed).Storage
	want := before.Storage
	want.NVMe = slices.Clone(want.NVMe)
	for i := range want.NVMe {
		if scr.NVMe[i].Serial == want.NVMe[i].Serial {
			t.Errorf("%s: serial %q survived the scrub", want.NVMe[i].Name, want.NVMe[i].Serial)
		}
		want.NVMe[i].Serial = scr.NVMe[i].Serial
	}
	if d := cmp.Diff(want, scr); d != "" {
		t.Errorf("scrubbed storage differs beyond the serials (-root +scrubbed):\n%s", d)
	}
}

// checkStorageRoot holds discovery of the storage root to what it was
// built with, so that an empty answer on both sides cannot pass.
func checkStorageRoot(t *testing.T, n topology.Node) {
	t.Helper()
	st := n.Storage
	type drive struct {
		name, bus, serial string
		use               topology.NVMeUse
		blocks            []string
	}
	var drives []drive
	for _, d := range st.NVMe {
		var blocks []string
		for _, ns := range d.Namespaces {
			blocks = append(blocks, fmt.Sprintf("%s %d", ns.Block, ns.SizeBytes))
		}
		drives = append(drives, drive{d.Name, d.BusID, d.Serial, d.Use, blocks})
	}
	wantDrives := []drive{
		{"nvme0", "0000:01:00.0", stSerial0, topology.NVMeSystem, []string{"nvme0n1 3840755982336"}},
		{"nvme1", "0000:02:00.0", stSerial1, topology.NVMeData, []string{"nvme1n1 3840755982336"}},
	}
	if d := cmp.Diff(wantDrives, drives, cmp.AllowUnexported(drive{})); d != "" {
		t.Errorf("NVMe (-want +got):\n%s", d)
	}
	var mounts []string
	for _, m := range st.Mounts {
		mounts = append(mounts, fmt.Sprintf("%s %s %s %v", m.Target, m.Kind, strings.Join(m.Devices, ","), m.NICs))
	}
	// The root file system is no GDS mount: its drive holds the system.
	if d := cmp.Diff([]string{"/raid nvme nvme1 []", "/mnt/nfs nfs  [eth0]"}, mounts); d != "" {
		t.Errorf("mounts (-want +got):\n%s", d)
	}
	g := st.GDS
	if !g.NvidiaFS || g.NvidiaFSVersion != "2.28" || g.NVMeMultipath == nil || *g.NVMeMultipath ||
		g.OpenKernelModule == nil || !*g.OpenKernelModule {
		t.Errorf("GDS = nvidia_fs %v %q, multipath %v, open module %v; want true \"2.28\", false, true",
			g.NvidiaFS, g.NvidiaFSVersion, g.NVMeMultipath, g.OpenKernelModule)
	}
	if d := cmp.Diff(topology.IOMMU{Mode: topology.IOMMUPassthrough, Units: []string{"dmar0"},
		Groups: []topology.IOMMUGroup{{BusID: "0000:01:00.0", Type: "identity"}, {BusID: "0000:02:00.0", Type: "identity"},
			{BusID: "0000:03:00.0", Type: "identity"}},
		Cmdline: []string{"intel_iommu=on", "iommu=pt"}}, g.IOMMU); d != "" {
		t.Errorf("IOMMU (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{
		"0000:00:01.0": "on SV RR CR UF 0x001d",
		"0000:00:02.0": "unknown  ",
		"0000:00:03.0": "off  0x0000",
		"0000:00:04.0": "absent  ",
	}, acsOf(n)); d != "" {
		t.Errorf("ACS (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string][]string{"eth0": {"10.0.0.5/24"}}, ipv4Of(n)); d != "" {
		t.Errorf("IPv4 (-want +got):\n%s", d)
	}
}

func discoverAt(t *testing.T, root string) topology.Node {
	t.Helper()
	n, err := discover.Discover(discover.Options{Root: root})
	if err != nil {
		t.Fatalf("Discover(%s): %v", root, err)
	}
	return n
}

// acsOf is each bridge's ACS as "state enabled control".
func acsOf(n topology.Node) map[string]string {
	out := map[string]string{}
	for _, d := range n.PCIDevices {
		if d.ACS != nil {
			out[d.BusID] = strings.Join([]string{d.ACS.State, strings.Join(d.ACS.Enabled, " "), d.ACS.Control}, " ")
		}
	}
	return out
}

// ipv4Of is each interface's addresses.
func ipv4Of(n topology.Node) map[string][]string {
	out := map[string][]string{}
	for _, nic := range n.NICs {
		for _, i := range nic.Interfaces {
			if len(i.IPv4) > 0 {
				out[i.Name] = i.IPv4
			}
		}
	}
	return out
}

// fakeNetlink answers IPv4 from a table; a name it does not hold is an
// error, as netlink's "Link not found" is.
type fakeNetlink map[string][]string

func (f fakeNetlink) LinkState(name string) (rdma.LinkState, error) {
	return rdma.LinkState{}, fmt.Errorf("LinkState not used")
}

func (f fakeNetlink) IPv4(name string) ([]string, error) {
	a, ok := f[name]
	if !ok {
		return nil, fmt.Errorf("Link not found")
	}
	return a, nil
}

// TestAddressesFromNetlink: with a netlink source, addresses.json is what
// it answers for each netdev of sys/class/net (a netdev it does not know
// is a warning, one without addresses is left out), replacing the root's
// own file; the result reads back through discovery.
func TestAddressesFromNetlink(t *testing.T) {
	f := buildStorageRoot(t)
	f.file("sys/devices/virtual/net/lo/type", "772\n")
	f.link("sys/class/net/lo", "../../devices/virtual/net/lo")
	f.file("sys/devices/virtual/net/gone0/type", "1\n")
	f.link("sys/class/net/gone0", "../../devices/virtual/net/gone0")
	nl := fakeNetlink{"eth0": {"10.0.0.5/24", "10.0.1.5/24"}, "lo": {"127.0.0.1/8"}}
	out := filepath.Join(t.TempDir(), "snap")
	rep, err := WriteDir(Options{Root: f.dir, Netlink: nl}, out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "schema": "gpuaffinity.addresses/v1",
  "interfaces": {
    "eth0": [
      "10.0.0.5/24",
      "10.0.1.5/24"
    ],
    "lo": [
      "127.0.0.1/8"
    ]
  }
}
`
	if got := walkTree(t, out)[rdma.AddressesFile]; got != "f:"+want {
		t.Errorf("addresses.json = %q, want %q", got, want)
	}
	if rep.Addresses != "Options.Netlink (2 interfaces)" {
		t.Errorf("Report.Addresses = %q", rep.Addresses)
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "gone0") {
		t.Errorf("warnings = %q, want one naming gone0", rep.Warnings)
	}
	if d := cmp.Diff(map[string][]string{"eth0": {"10.0.0.5/24", "10.0.1.5/24"}}, ipv4Of(discoverAt(t, out))); d != "" {
		t.Errorf("IPv4 read back (-want +got):\n%s", d)
	}
}
