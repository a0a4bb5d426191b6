package storage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs/rootfstest"
	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
)

// pcieSSD lays out one PCIe NVMe controller as drivers/nvme/host/core.c
// does without a multipath head: the controller under its PCI function,
// the namespace under the controller, class and block links.
func pcieSSD(m *rootfs.Memory, fn, name, ns string, sectors string) {
	dev := "sys/devices/pci0000:17/0000:17:00.0/" + fn
	ctrl := dev + "/nvme/" + name
	m.File(dev+"/class", []byte("0x010802\n"))
	for f, v := range map[string]string{"model": "SAMSUNG MZWLJ3T8HBLS-00007", "serial": "S4X0NA0R100001",
		"firmware_rev": "EPK9GB5Q", "transport": "pcie", "address": fn, "state": "live", "numa_node": "0"} {
		m.File(ctrl+"/"+f, []byte(v+"\n"))
	}
	m.Link(ctrl+"/device", "../../../"+fn)
	m.Link("sys/class/nvme/"+name, "../../devices/pci0000:17/0000:17:00.0/"+fn+"/nvme/"+name)
	m.File(ctrl+"/"+ns+"/size", []byte(sectors+"\n"))
	m.Link("sys/class/block/"+ns, "../../devices/pci0000:17/0000:17:00.0/"+fn+"/nvme/"+name+"/"+ns)
}

func TestControllers(t *testing.T) {
	m := rootfs.NewMemory("t")
	pcieSSD(m, "0000:18:00.0", "nvme1", "nvme1n1", "7501476528")
	pcieSSD(m, "0000:19:00.0", "nvme10", "nvme10n1", "8")
	// A multipath head: the hidden path under the controller names the
	// subsystem (3), the controller (2) and the namespace (1).
	pcieSSD(m, "0000:1a:00.0", "nvme2", "nvme3c2n1", "16")
	// An NVMe over Fabrics controller has no PCI function.
	m.File("sys/devices/virtual/nvme-fabrics/ctl/nvme4/transport", []byte("rdma\n"))
	m.File("sys/devices/virtual/nvme-fabrics/ctl/nvme4/address", []byte("traddr=10.0.0.9,trsvcid=4420\n"))
	m.Link("sys/class/nvme/nvme4", "../../devices/virtual/nvme-fabrics/ctl/nvme4")
	// A dangling entry (a drive pulled between listing and reading).
	m.Link("sys/class/nvme/nvme9", "../../devices/pci0000:17/0000:17:00.0/0000:1f:00.0/nvme/nvme9")
	cs, errs := Controllers(m.Root())
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "nvme9") {
		t.Errorf("errs = %v, want one naming nvme9", errs)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if want := []string{"nvme1", "nvme2", "nvme4", "nvme10"}; !slices.Equal(names, want) {
		t.Fatalf("controllers %v, want %v (numeric order)", names, want)
	}
	c := cs[0]
	if c.PCI == nil || c.PCI.String() != "0000:18:00.0" || c.Transport != "pcie" || c.Model != "SAMSUNG MZWLJ3T8HBLS-00007" ||
		c.Firmware != "EPK9GB5Q" || c.State != "live" || c.NUMANode == nil || *c.NUMANode != 0 {
		t.Errorf("nvme1 = %+v", c)
	}
	if len(c.Namespaces) != 1 || c.Namespaces[0].Block != "nvme1n1" || c.Namespaces[0].SizeBytes != 7501476528*512 {
		t.Errorf("nvme1 namespaces = %+v", c.Namespaces)
	}
	if ns := cs[1].Namespaces; len(ns) != 1 || ns[0].Block != "nvme3n1" || ns[0].Path != "nvme3c2n1" {
		t.Errorf("multipath namespace = %+v, want head nvme3n1 served by nvme3c2n1", ns)
	}
	if cs[2].PCI != nil || cs[2].Transport != "rdma" {
		t.Errorf("fabrics controller = %+v, want no PCI function", cs[2])
	}
}

func TestControllersNone(t *testing.T) {
	cs, errs := Controllers(rootfs.NewMemory("t").Root())
	if cs != nil || errs != nil {
		t.Errorf("root without nvme class: %v %v", cs, errs)
	}
}

func TestDisks(t *testing.T) {
	m := rootfs.NewMemory("t")
	pcieSSD(m, "0000:18:00.0", "nvme0", "nvme0n1", "8")
	pcieSSD(m, "0000:19:00.0", "nvme1", "nvme1n1", "8")
	ns0 := "sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/nvme/nvme0/nvme0n1"
	m.File(ns0+"/nvme0n1p1/partition", []byte("1\n"))
	m.Link("sys/class/block/nvme0n1p1", "../../devices/pci0000:17/0000:17:00.0/0000:18:00.0/nvme/nvme0/nvme0n1/nvme0n1p1")
	md := "sys/devices/virtual/block/md0"
	m.File(md+"/md/level", []byte("raid0\n"))
	m.Link(md+"/slaves/nvme1n1", "../../../../pci0000:17/0000:17:00.0/0000:19:00.0/nvme/nvme1/nvme1n1")
	m.Link(md+"/slaves/nvme0n1p1", "../../../../pci0000:17/0000:17:00.0/0000:18:00.0/nvme/nvme0/nvme0n1/nvme0n1p1")
	m.Link("sys/class/block/md0", "../../devices/virtual/block/md0")
	// A loop of slaves (corrupt input) ends instead of recursing forever.
	m.Link("sys/devices/virtual/block/dm-0/slaves/dm-0", "../../dm-0")
	m.Link("sys/class/block/dm-0", "../../devices/virtual/block/dm-0")
	root := m.Root()
	for _, tc := range []struct {
		dev  string
		want []string
	}{
		{"nvme0n1", []string{"nvme0n1"}},
		{"nvme0n1p1", []string{"nvme0n1"}},
		{"md0", []string{"nvme0n1", "nvme1n1"}},
		{"dm-0", nil},
	} {
		got, err := Disks(root, tc.dev)
		if err != nil {
			t.Errorf("%s: %v", tc.dev, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Disks(%s) = %v, want %v", tc.dev, got, tc.want)
		}
	}
	for _, bad := range []string{"sda", "../etc", ""} {
		if _, err := Disks(root, bad); err == nil {
			t.Errorf("Disks(%q) succeeded", bad)
		}
	}
}

func TestParseMounts(t *testing.T) {
	const table = `/dev/nvme0n1p2 / ext4 rw,relatime 0 0
/dev/md0 /raid ext4 rw,relatime,stripe=256 0 0
192.168.122.14:/expdir /mnt/nfs\040data nfs4 rw,relatime,vers=4.2,proto=rdma,port=20049,clientaddr=192.168.122.157,addr=192.168.122.14 0 0
10.0.0.1@o2ib:10.0.0.2@o2ib:/lustre /lustre lustre rw,flock 0 0
garbage line
`
	ms, errs := ParseMounts(table, "/proc/mounts")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "/proc/mounts:5") {
		t.Errorf("errs = %v, want one naming line 5", errs)
	}
	if len(ms) != 4 {
		t.Fatalf("%d mounts, want 4", len(ms))
	}
	if ms[2].Target != "/mnt/nfs data" || ms[2].FSType != "nfs4" {
		t.Errorf("escaped mount = %+v", ms[2])
	}
	if v, ok := ms[2].Option("clientaddr"); !ok || v != "192.168.122.157" {
		t.Errorf("clientaddr = %q %v", v, ok)
	}
	if _, ok := ms[2].Option("rw"); !ok {
		t.Error("flag option rw not found")
	}
	if ms[3].Source != "10.0.0.1@o2ib:10.0.0.2@o2ib:/lustre" {
		t.Errorf("lustre source = %q", ms[3].Source)
	}
	if got := unescape(`a\134b\011c\12`); got != "a\\b\tc\\12" {
		t.Errorf("unescape = %q", got)
	}
}

func TestMountsFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "proc", "mounts"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	_, errs := Mounts(rootfstest.Open(t, dir))
	if len(errs) != 1 || !errors.Is(errs[0], sysattr.ErrNotRegular) {
		t.Errorf("FIFO proc/mounts: %v, want ErrNotRegular", errs)
	}
}

func TestReadKernel(t *testing.T) {
	m := rootfs.NewMemory("t")
	m.File("proc/driver/nvidia-fs/version", []byte("version: 2.17\n"))
	m.File("sys/module/nvme_core/parameters/multipath", []byte("Y\n"))
	m.File("proc/cmdline", []byte("BOOT_IMAGE=/vmlinuz ro iommu=pt intel_iommu=on\n"))
	m.Dir("sys/devices/virtual/iommu/dmar0")
	m.Link("sys/class/iommu/dmar0", "../../devices/virtual/iommu/dmar0")
	fn := "sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0"
	m.File("sys/kernel/iommu_groups/7/type", []byte("identity\n"))
	m.Link(fn+"/iommu_group", "../../../../kernel/iommu_groups/7")
	root := m.Root()
	k, errs := ReadKernel(root)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if !k.NvidiaFS || k.NvidiaFSVersion != "2.17" || k.Multipath == nil || !*k.Multipath ||
		k.Cmdline != "BOOT_IMAGE=/vmlinuz ro iommu=pt intel_iommu=on" || !slices.Equal(k.IOMMUUnits, []string{"dmar0"}) {
		t.Errorf("kernel = %+v", k)
	}
	if ty, err := IOMMUGroupType(root, fn); err != nil || ty != "identity" {
		t.Errorf("group type = %q, %v", ty, err)
	}
	if ty, err := IOMMUGroupType(root, "sys/devices/pci0000:17/0000:17:00.0"); err != nil || ty != "" {
		t.Errorf("function without a group: %q, %v", ty, err)
	}

	m = rootfs.NewMemory("t")
	m.File("sys/module/nvme_core/parameters/multipath", []byte("maybe\n"))
	k, errs = ReadKernel(m.Root())
	if k.Multipath != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), "multipath") {
		t.Errorf("garbage multipath: %+v %v", k, errs)
	}
	if k.NvidiaFS || k.Cmdline != "" || k.IOMMUUnits != nil {
		t.Errorf("empty root: %+v", k)
	}
}

func TestBlockName(t *testing.T) {
	m := rootfs.NewMemory("t")
	pcieSSD(m, "0000:19:00.0", "nvme1", "nvme1n1", "8")
	// LVM over NVMe: /dev/mapper/vg0-data is dm-3, whose dm/name says so
	// (drivers/md/dm-sysfs.c); dm-1 is another mapping.
	for _, dm := range []struct{ dev, name string }{{"dm-1", "vg0-swap"}, {"dm-3", "vg0-data"}} {
		dir := "sys/devices/virtual/block/" + dm.dev
		m.File(dir+"/dm/name", []byte(dm.name+"\n"))
		m.Link(dir+"/slaves/nvme1n1", "../../../../pci0000:17/0000:17:00.0/0000:19:00.0/nvme/nvme1/nvme1n1")
		m.Link("sys/class/block/"+dm.dev, "../../devices/virtual/block/"+dm.dev)
	}
	root := m.Root()
	for _, tc := range []struct {
		src, want string
		dev       bool
		err       error
	}{
		{"/dev/nvme1n1", "nvme1n1", true, nil},
		{"/dev/mapper/vg0-data", "dm-3", true, nil},
		{"/dev/mapper/vg1-gone", "", true, ErrUnresolved},
		{"/dev/disk/by-uuid/0b1c", "", true, ErrUnresolved},
		{"/dev/mapper/../sda", "", true, ErrUnresolved},
		{"server:/export", "", false, nil},
		{"tmpfs", "", false, nil},
	} {
		got, dev, err := BlockName(root, tc.src)
		if got != tc.want || dev != tc.dev || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("BlockName(%q) = %q, %v, %v; want %q, %v, %v", tc.src, got, dev, err, tc.want, tc.dev, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), tc.src) {
			t.Errorf("BlockName(%q) error %q does not name the source", tc.src, err)
		}
	}
	if ds, err := Disks(root, "dm-3"); err != nil || !slices.Equal(ds, []string{"nvme1n1"}) {
		t.Errorf("Disks(dm-3) = %v, %v; want [nvme1n1]", ds, err)
	}
}
