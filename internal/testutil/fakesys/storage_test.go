package fakesys

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/internal/demo"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// storageSpec uses every storage field: an ACS root port over a NIC with
// an IPv4 address, an NVMe controller with the defaults and one with two
// namespaces in subsystem 5, an md raid0 of one namespace of each, the
// IOMMU, mounts and the kernel fields. MULTIPATH is replaced by the
// nvme_multipath value (or removed).
const storageSpec = `
name: storage
cpu: {sockets: 1, cores_per_socket: 4, threads_per_core: 2}
numa:
  nodes: [{id: 0, socket: 0, memory_gib: 16}]
pci:
  - host_bridge: "0000:10"
    numa: 0
    devices:
      - bdf: "0000:10:01.0"
        kind: bridge
        acs: {capability: "0x005f", control: "0x001d"}
        children:
          - bdf: "0000:11:00.0"
            kind: nic
            netdevs: [{name: ibp17s0, ipv4: ["10.10.1.5/16", "192.168.0.2/24"]}, {name: eth9}]
      - bdf: "0000:10:02.0"
        kind: bridge
        children:
          - {bdf: "0000:12:00.0", kind: nvme, nvme: {name: nvme0}}
      - bdf: "0000:10:03.0"
        kind: bridge
        children:
          - bdf: "0000:13:00.0"
            kind: nvme
            nvme: {name: nvme1, serial: S4XYZ01, model: M, firmware: F1, subsystem: 5,
                   namespaces: [{id: 1, size_gib: 100}, {id: 2, size_gib: 50}]}
kernel:
  cmdline: "BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt"
  modules: [nvidia, nvidia_fs]
  nvidia_open: true
  MULTIPATH
iommu: {units: [dmar0, dmar1], type: identity}
mounts:
  - {source: /dev/root, target: /, fstype: ext4, options: "rw,relatime"}
  - {source: /dev/md0, target: "/raid data", fstype: ext4}
  - {source: "a\tb\nc\\d", target: /x, fstype: xfs, options: "ro"}
raid: [{name: md0, level: raid0, members: [RAIDMEMBERS]}]
nvml: {driver_version: "550.54.15", nvml_version: "12.550.54.15", cuda: 12040}
`

// storageVariant is storageSpec with nvme_multipath set to mp ("" leaves
// it out) and the md array over members.
func storageVariant(mp, members string) string {
	s := storageSpec
	if mp == "" {
		s = strings.Replace(s, "  MULTIPATH\n", "", 1)
	} else {
		s = strings.Replace(s, "MULTIPATH", "nvme_multipath: "+mp, 1)
	}
	return strings.Replace(s, "RAIDMEMBERS", members, 1)
}

const (
	stNVMe0 = "sys/devices/pci0000:10/0000:10:02.0/0000:12:00.0"
	stNVMe1 = "sys/devices/pci0000:10/0000:10:03.0/0000:13:00.0"
	stNIC   = "sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0"
	// Namespace sizes in 512-byte sectors.
	sectors3576 = "7499415552"
	sectors100  = "209715200"
	sectors50   = "104857600"
)

// checkFiles compares files under root.
func checkFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
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
}

// checkLinks checks that each link is relative and resolves to the
// directory named (root-relative).
func checkLinks(t *testing.T, root string, links map[string]string) {
	t.Helper()
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range links {
		target, err := os.Readlink(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if filepath.IsAbs(target) {
			t.Errorf("%s -> %s is absolute", p, target)
		}
		got, err := filepath.EvalSymlinks(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%s -> %s: %v", p, target, err)
			continue
		}
		if got != filepath.Join(realRoot, want) {
			t.Errorf("%s -> %s resolves to %s, want %s", p, target, got, want)
		}
		if fi, err := os.Stat(got); err != nil || !fi.IsDir() {
			t.Errorf("%s: target %s is not a directory", p, want)
		}
	}
}

func missing(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v); want none", p, err)
		}
	}
}

// TestNVMeController: controller attributes, class links and the
// subsystem, the same in both layouts.
func TestNVMeController(t *testing.T) {
	root := buildSpec(t, "storage.yaml", storageVariant("", "nvme0n1, nvme1n1"))
	checkFiles(t, root, map[string]string{
		stNVMe0 + "/vendor":                  "0x144d\n",
		stNVMe0 + "/device":                  "0xa824\n",
		stNVMe0 + "/class":                   "0x010802\n",
		stNVMe0 + "/current_link_speed":      "16.0 GT/s PCIe\n",
		stNVMe0 + "/current_link_width":      "4\n",
		stNVMe0 + "/nvme/nvme0/model":        "SAMSUNG MZWLJ3T8HBLS-00007\n",
		stNVMe0 + "/nvme/nvme0/serial":       "S4YPNA0T120000\n",
		stNVMe0 + "/nvme/nvme0/firmware_rev": "EPK9GB5Q\n",
		stNVMe0 + "/nvme/nvme0/transport":    "pcie\n",
		stNVMe0 + "/nvme/nvme0/address":      "0000:12:00.0\n",
		stNVMe0 + "/nvme/nvme0/state":        "live\n",
		stNVMe0 + "/nvme/nvme0/numa_node":    "0\n",
		stNVMe0 + "/nvme/nvme0/cntlid":       "1\n",
		stNVMe0 + "/nvme/nvme0/dev":          "240:0\n",
		// The kernel's made-up NQN: serial and model as the identify
		// fields hold them, space-padded to 20 and 40.
		stNVMe0 + "/nvme/nvme0/subsysnqn":                           "nqn.2014.08.org.nvmexpress:144d144dS4YPNA0T120000      SAMSUNG MZWLJ3T8HBLS-00007              \n",
		stNVMe1 + "/nvme/nvme1/model":                               "M\n",
		stNVMe1 + "/nvme/nvme1/serial":                              "S4XYZ01\n",
		stNVMe1 + "/nvme/nvme1/firmware_rev":                        "F1\n",
		stNVMe1 + "/nvme/nvme1/cntlid":                              "2\n",
		stNVMe1 + "/nvme/nvme1/dev":                                 "240:1\n",
		stNVMe1 + "/nvme/nvme1/subsysnqn":                           "nqn.2014.08.org.nvmexpress:144d144dS4XYZ01             M                                       \n",
		"sys/devices/virtual/nvme-subsystem/nvme-subsys5/subsysnqn": "nqn.2014.08.org.nvmexpress:144d144dS4XYZ01             M                                       \n",
	})
	checkLinks(t, root, map[string]string{
		stNVMe0 + "/nvme/nvme0/device":                          stNVMe0,
		stNVMe0 + "/driver":                                     "sys/bus/pci/drivers/nvme",
		"sys/class/nvme/nvme0":                                  stNVMe0 + "/nvme/nvme0",
		"sys/class/nvme/nvme1":                                  stNVMe1 + "/nvme/nvme1",
		"sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0": stNVMe0 + "/nvme/nvme0",
		"sys/devices/virtual/nvme-subsystem/nvme-subsys5/nvme1": stNVMe1 + "/nvme/nvme1",
		"sys/class/nvme-subsystem/nvme-subsys0":                 "sys/devices/virtual/nvme-subsystem/nvme-subsys0",
		"sys/class/nvme-subsystem/nvme-subsys5":                 "sys/devices/virtual/nvme-subsystem/nvme-subsys5",
	})
	if got, _ := os.Readlink(filepath.Join(root, stNVMe0, "nvme/nvme0/device")); got != "../../../0000:12:00.0" {
		t.Errorf("nvme0/device -> %s, want ../../../0000:12:00.0 (as the kernel writes it)", got)
	}
	missing(t, root, "sys/module/nvme_core")
}

// TestNVMeNamespaces: without multipath (nvme_multipath unset or false)
// the namespaces are the controllers' nvmeNn<id>; with it, heads
// nvme<S>n<id> of the subsystem and hidden paths nvme<S>c<N>n<id>.
func TestNVMeNamespaces(t *testing.T) {
	for _, mp := range []string{"", "false"} {
		t.Run("multipath="+mp, func(t *testing.T) {
			root := buildSpec(t, "storage.yaml", storageVariant(mp, "nvme0n1, nvme1n1"))
			ns0, ns1, ns2 := stNVMe0+"/nvme/nvme0/nvme0n1", stNVMe1+"/nvme/nvme1/nvme1n1", stNVMe1+"/nvme/nvme1/nvme1n2"
			files := map[string]string{
				ns0 + "/size": sectors3576 + "\n", ns0 + "/dev": "259:0\n", ns0 + "/nsid": "1\n", ns0 + "/queue/logical_block_size": "4096\n",
				ns1 + "/size": sectors100 + "\n", ns1 + "/dev": "259:1\n", ns1 + "/nsid": "1\n",
				ns2 + "/size": sectors50 + "\n", ns2 + "/dev": "259:2\n", ns2 + "/nsid": "2\n", ns2 + "/queue/logical_block_size": "4096\n",
			}
			if mp == "false" {
				files["sys/module/nvme_core/parameters/multipath"] = "N\n"
			} else {
				missing(t, root, "sys/module/nvme_core/parameters/multipath")
			}
			checkFiles(t, root, files)
			checkLinks(t, root, map[string]string{
				"sys/block/nvme0n1": ns0, "sys/class/block/nvme0n1": ns0,
				"sys/block/nvme1n1": ns1, "sys/class/block/nvme1n2": ns2,
				ns0 + "/device": stNVMe0 + "/nvme/nvme0",
			})
			missing(t, root, "sys/block/nvme5n1", "sys/devices/virtual/nvme-subsystem/nvme-subsys5/nvme5n1", stNVMe1+"/nvme/nvme1/nvme5c1n1")
		})
	}
	t.Run("multipath=true", func(t *testing.T) {
		root := buildSpec(t, "storage.yaml", storageVariant("true", "nvme0n1, nvme5n1"))
		sub0, sub5 := "sys/devices/virtual/nvme-subsystem/nvme-subsys0", "sys/devices/virtual/nvme-subsystem/nvme-subsys5"
		h0, h1, h2 := sub0+"/nvme0n1", sub5+"/nvme5n1", sub5+"/nvme5n2"
		p0, p1, p2 := stNVMe0+"/nvme/nvme0/nvme0c0n1", stNVMe1+"/nvme/nvme1/nvme5c1n1", stNVMe1+"/nvme/nvme1/nvme5c1n2"
		checkFiles(t, root, map[string]string{
			"sys/module/nvme_core/parameters/multipath": "Y\n",
			h0 + "/size": sectors3576 + "\n", h0 + "/dev": "259:0\n", h0 + "/nsid": "1\n", h0 + "/queue/logical_block_size": "4096\n",
			h1 + "/size": sectors100 + "\n", h1 + "/dev": "259:1\n", h1 + "/nsid": "1\n",
			h2 + "/size": sectors50 + "\n", h2 + "/dev": "259:2\n", h2 + "/nsid": "2\n", h2 + "/queue/logical_block_size": "4096\n",
			p0 + "/size": sectors3576 + "\n", p0 + "/nsid": "1\n", p0 + "/dev": "259:3\n",
			p1 + "/size": sectors100 + "\n", p1 + "/nsid": "1\n", p1 + "/dev": "259:4\n",
			p2 + "/size": sectors50 + "\n", p2 + "/nsid": "2\n", p2 + "/dev": "259:5\n",
		})
		checkLinks(t, root, map[string]string{
			"sys/block/nvme0n1": h0, "sys/class/block/nvme0n1": h0,
			"sys/block/nvme5n1": h1, "sys/class/block/nvme5n2": h2,
			sub5 + "/nvme1":                                stNVMe1 + "/nvme/nvme1",
			"sys/class/nvme-subsystem/nvme-subsys5":        sub5,
			h1 + "/device":                                 sub5,
			p1 + "/device":                                 stNVMe1 + "/nvme/nvme1",
			"sys/devices/virtual/block/md0/slaves/nvme5n1": h1,
			h1 + "/holders/md0":                            "sys/devices/virtual/block/md0",
		})
		missing(t, root, stNVMe1+"/nvme/nvme1/nvme1n1", "sys/block/nvme1n1", "sys/block/nvme5c1n1", "sys/class/block/nvme0c0n1")
	})
}

// TestNVMeSharedSubsystem: two controllers of one subsystem (a dual-port
// drive) share its heads under multipath, one hidden path each.
func TestNVMeSharedSubsystem(t *testing.T) {
	spec := strings.Replace(storageVariant("true", "nvme5n1"), "{name: nvme0}", "{name: nvme0, subsystem: 5, serial: S4XYZ01, model: M, namespaces: [{id: 1, size_gib: 100}]}", 1)
	root := buildSpec(t, "shared.yaml", spec)
	sub5 := "sys/devices/virtual/nvme-subsystem/nvme-subsys5"
	checkLinks(t, root, map[string]string{
		"sys/block/nvme5n1":                      sub5 + "/nvme5n1",
		sub5 + "/nvme0":                          stNVMe0 + "/nvme/nvme0",
		sub5 + "/nvme1":                          stNVMe1 + "/nvme/nvme1",
		stNVMe0 + "/nvme/nvme0/nvme5c0n1/device": stNVMe0 + "/nvme/nvme0",
		stNVMe1 + "/nvme/nvme1/nvme5c1n1/device": stNVMe1 + "/nvme/nvme1",
	})
	checkFiles(t, root, map[string]string{sub5 + "/nvme5n1/size": sectors100 + "\n", sub5 + "/nvme5n2/dev": "259:1\n"})
	missing(t, root, "sys/devices/virtual/nvme-subsystem/nvme-subsys0")
	bad := strings.Replace(spec, "{id: 1, size_gib: 100}]}", "{id: 1, size_gib: 99}]}", 1)
	if _, err := Parse("shared.yaml", []byte(bad)); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "namespace 1 of subsystem 5 has another size") {
		t.Errorf("one namespace, two sizes: %v", err)
	}
}

// TestRAID: the md array, its members' holders, its size.
func TestRAID(t *testing.T) {
	root := buildSpec(t, "storage.yaml", storageVariant("", "nvme0n1, nvme1n1"))
	md := "sys/devices/virtual/block/md0"
	ns0, ns1 := stNVMe0+"/nvme/nvme0/nvme0n1", stNVMe1+"/nvme/nvme1/nvme1n1"
	checkFiles(t, root, map[string]string{
		md + "/md/level":      "raid0\n",
		md + "/md/raid_disks": "2\n",
		md + "/dev":           "9:0\n",
		md + "/size":          "419430400\n", // raid0: 2 x the smaller member (100 GiB)
	})
	checkLinks(t, root, map[string]string{
		"sys/block/md0":              md,
		"sys/class/block/md0":        md,
		md + "/slaves/nvme0n1":       ns0,
		md + "/slaves/nvme1n1":       ns1,
		ns0 + "/holders/md0":         md,
		ns1 + "/holders/md0":         md,
		md + "/md/dev-nvme0n1/block": ns0,
	})
	missing(t, root, stNVMe1+"/nvme/nvme1/nvme1n2/holders/md0")
	for _, tc := range []struct {
		level, members, size string
	}{
		{"raid1", "nvme0n1, nvme1n1", sectors100},
		{"linear", "nvme0n1, nvme1n1", "7709130752"},
		{"raid5", "nvme0n1, nvme1n1, nvme1n2", "209715200"},
		{"raid10", "nvme0n1, nvme1n1", sectors100},
	} {
		spec := strings.Replace(storageVariant("", tc.members), "level: raid0", "level: "+tc.level, 1)
		root := buildSpec(t, "storage.yaml", spec)
		checkFiles(t, root, map[string]string{md + "/size": tc.size + "\n", md + "/md/level": tc.level + "\n"})
	}
}

// TestBridgeACS: a bridge's config is 4096 bytes; with acs its extended
// capability list starts with ACS at 0x100, which pci.ParseACS reads.
func TestBridgeACS(t *testing.T) {
	root := buildSpec(t, "storage.yaml", storageVariant("", "nvme0n1"))
	read := func(bus string) []byte {
		b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices", bus, "config"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	le := binary.LittleEndian
	acs := read("0000:10:01.0")
	if len(acs) != 4096 {
		t.Fatalf("bridge config: %d bytes, want 4096", len(acs))
	}
	got := [3]uint32{le.Uint32(acs[0x100:]), uint32(le.Uint16(acs[0x104:])), uint32(le.Uint16(acs[0x106:]))}
	if want := [3]uint32{0x0001000d, 0x005f, 0x001d}; got != want {
		t.Errorf("ACS header, capability, control = %#x, want %#x", got, want)
	}
	if a := pci.ParseACS(acs, "config"); a.State != pci.ACSOn || a.Capability != 0x5f || a.Control != 0x1d {
		t.Errorf("pci.ParseACS = %+v, want on 0x5f/0x1d", a)
	}
	plain := read("0000:10:02.0")
	if len(plain) != 4096 || le.Uint32(plain[0x100:]) != 0 {
		t.Errorf("bridge without acs: %d bytes, dword 0x100 %#x; want 4096, 0", len(plain), le.Uint32(plain[0x100:]))
	}
	if a := pci.ParseACS(plain, "config"); a.State != pci.ACSAbsent {
		t.Errorf("pci.ParseACS of a bridge without acs = %+v, want absent", a)
	}
	for _, ep := range []string{"0000:11:00.0", "0000:12:00.0"} {
		if n := len(read(ep)); n != 256 {
			t.Errorf("endpoint %s config: %d bytes, want 256", ep, n)
		}
	}
}

// TestKernelProcFiles: cmdline, the open module's NVRM line, nvidia-fs,
// the mounts (escaped as the kernel does) and addresses.json.
func TestKernelProcFiles(t *testing.T) {
	root := buildSpec(t, "storage.yaml", storageVariant("", "nvme0n1"))
	checkFiles(t, root, map[string]string{
		"proc/cmdline":                  "BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt\n",
		"proc/driver/nvidia/version":    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:23:56 UTC 2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n",
		"proc/driver/nvidia-fs/version": "version: 2.17\n",
		"proc/mounts":                   "/dev/root / ext4 rw,relatime 0 0\n/dev/md0 /raid\\040data ext4 rw 0 0\na\\011b\\012c\\134d /x xfs ro 0 0\n",
		"addresses.json":                "{\n  \"schema\": \"gpuaffinity.addresses/v1\",\n  \"interfaces\": {\n    \"ibp17s0\": [\n      \"10.10.1.5/16\",\n      \"192.168.0.2/24\"\n    ]\n  }\n}\n",
	})
	// aarch64 says so; without nvidia_open the proprietary line stays.
	arm := strings.Replace(storageVariant("", "nvme0n1"), "threads_per_core: 2}", "threads_per_core: 2, arch: aarch64}", 1)
	root = buildSpec(t, "arm.yaml", arm)
	b, _ := os.ReadFile(filepath.Join(root, "proc/driver/nvidia/version"))
	if !strings.HasPrefix(string(b), "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  550.54.15  Release Build") {
		t.Errorf("aarch64 version = %q", b)
	}
	plain := strings.NewReplacer("  nvidia_open: true\n", "", "nvidia_fs", "nvidia_uvm", "  cmdline: \"BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt\"\n", "",
		"ipv4: [\"10.10.1.5/16\", \"192.168.0.2/24\"]", "ipv4: []").Replace(storageVariant("", "nvme0n1"))
	root = buildSpec(t, "plain.yaml", plain)
	b, _ = os.ReadFile(filepath.Join(root, "proc/driver/nvidia/version"))
	if !strings.HasPrefix(string(b), "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar") {
		t.Errorf("proprietary version = %q", b)
	}
	missing(t, root, "proc/cmdline", "proc/driver/nvidia-fs", AddressesFile)
}

// TestDefaultMounts: without mounts, /proc/mounts is the default three
// lines, as before.
func TestDefaultMounts(t *testing.T) {
	root := buildSpec(t, "tiny.yaml", minimal)
	checkFiles(t, root, map[string]string{
		"proc/mounts": "/dev/root / ext4 rw,relatime 0 0\nsysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\nproc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n",
	})
	missing(t, root, "sys/class/iommu", "sys/kernel/iommu_groups", "sys/class/nvme", "sys/block", AddressesFile, "proc/cmdline")
}

// TestIOMMU: units, and one group per function in bus order.
func TestIOMMU(t *testing.T) {
	root := buildSpec(t, "storage.yaml", storageVariant("", "nvme0n1"))
	// Bus order: 10:01.0 10:02.0 10:03.0 11:00.0 12:00.0 13:00.0.
	groups := map[string]string{
		"0000:10:01.0": "sys/devices/pci0000:10/0000:10:01.0",
		"0000:10:02.0": "sys/devices/pci0000:10/0000:10:02.0",
		"0000:10:03.0": "sys/devices/pci0000:10/0000:10:03.0",
		"0000:11:00.0": stNIC,
		"0000:12:00.0": stNVMe0,
		"0000:13:00.0": stNVMe1,
	}
	links := map[string]string{
		"sys/class/iommu/dmar0": "sys/devices/virtual/iommu/dmar0",
		"sys/class/iommu/dmar1": "sys/devices/virtual/iommu/dmar1",
	}
	files := map[string]string{}
	for k, bus := range []string{"0000:10:01.0", "0000:10:02.0", "0000:10:03.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0"} {
		g := "sys/kernel/iommu_groups/" + itoa(k)
		links[g+"/devices/"+bus] = groups[bus]
		links[groups[bus]+"/iommu_group"] = g
		files[g+"/type"] = "identity\n"
	}
	checkLinks(t, root, links)
	checkFiles(t, root, files)
	missing(t, root, "sys/kernel/iommu_groups/6")
	entries, _ := os.ReadDir(filepath.Join(root, "sys/kernel/iommu_groups/4/devices"))
	if len(entries) != 1 {
		t.Errorf("group 4 has %d devices, want 1", len(entries))
	}
}

// TestStorageRejects: validation of the new fields.
func TestStorageRejects(t *testing.T) {
	base := storageVariant("", "nvme0n1, nvme1n1")
	if _, err := Parse("storage.yaml", []byte(base)); err != nil {
		t.Fatalf("the valid spec: %v", err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"nvme name", "{name: nvme0}", "{name: disk0}", `device 0000:12:00.0: nvme name "disk0": want nvmeN`},
		{"nvme name missing", "{name: nvme0}", "{model: X}", `device 0000:12:00.0: nvme name ""`},
		{"nvme twice", "{name: nvme0}", "{name: nvme1}", "nvme controller nvme1 listed twice"},
		{"nvme on a nic", "kind: nic\n", "kind: nic\n            nvme: {name: nvme7}\n", "device 0000:11:00.0: nvme block on kind nic"},
		{"nvme children", "{bdf: \"0000:12:00.0\", kind: nvme, nvme: {name: nvme0}}", "{bdf: \"0000:12:00.0\", kind: nvme, nvme: {name: nvme0}, children: [{bdf: \"0000:14:00.0\", kind: other, class: \"0x010802\"}]}", "device 0000:12:00.0: an NVMe controller is an endpoint"},
		{"namespace twice", "{id: 2, size_gib: 50}", "{id: 1, size_gib: 50}", "device 0000:13:00.0: nvme nvme1: namespace id 1"},
		{"namespace size", "{id: 2, size_gib: 50}", "{id: 2, size_gib: 0}", "namespace 2: size_gib 0"},
		{"model too long", "model: M,", "model: " + strings.Repeat("M", 41) + ",", "device 0000:13:00.0: nvme nvme1: model"},
		{"unknown nvme key", "firmware: F1,", "firmwre: F1,", "firmwre"},
		{"acs on a nic", "kind: nic\n", "kind: nic\n            acs: {capability: \"0x1\", control: \"0x1\"}\n", "device 0000:11:00.0: acs on kind nic"},
		{"acs not hex", `control: "0x001d"`, `control: "29"`, "device 0000:10:01.0: acs.control"},
		{"acs too wide", `control: "0x001d"`, `control: "0x10000"`, "device 0000:10:01.0: acs.control 0x10000"},
		{"acs missing control", `, control: "0x001d"`, "", "device 0000:10:01.0: acs.control is missing"},
		{"ipv4 not cidr", `"10.10.1.5/16"`, `"10.10.1.5"`, `netdev ibp17s0: ipv4 "10.10.1.5"`},
		{"ipv4 is ipv6", `"10.10.1.5/16"`, `"fe80::1/64"`, `netdev ibp17s0: ipv4 "fe80::1/64"`},
		{"raid member unknown", "members: [nvme0n1, nvme1n1]", "members: [nvme0n1, nvme9n1]", `raid md0: member "nvme9n1" is not an NVMe namespace of the spec`},
		{"raid member twice", "members: [nvme0n1, nvme1n1]", "members: [nvme0n1, nvme0n1]", "raid md0: member nvme0n1 is already a member of md0"},
		{"raid level", "level: raid0", "level: raid4", `raid md0: level "raid4"`},
		{"raid name", "name: md0", "name: raid0", `raid[0]: name "raid0": want mdN`},
		{"raid1 of one", "level: raid0, members: [nvme0n1, nvme1n1]", "level: raid1, members: [nvme0n1]", "raid md0: raid1 needs at least 2 members"},
		{"mount without fstype", "fstype: xfs, ", "", "mounts[2]: source, target and fstype are required"},
		{"iommu type", "type: identity", "type: passthrough", `iommu: type "passthrough"`},
		{"iommu no units", "units: [dmar0, dmar1]", "units: []", "iommu: units is empty"},
		{"iommu unit twice", "units: [dmar0, dmar1]", "units: [dmar0, dmar0]", `iommu: unit "dmar0"`},
		{"unknown kernel key", "nvidia_open: true", "nvidia_opn: true", "nvidia_opn"},
		{"unknown mount key", "fstype: xfs,", "fs_type: xfs,", "fs_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.old) {
				t.Fatalf("test case does not apply: %q not in the spec", tc.old)
			}
			_, err := Parse("storage.yaml", []byte(strings.Replace(base, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("Parse accepted a bad spec")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "storage.yaml") {
				t.Errorf("error %q does not name the file and %q", err, tc.want)
			}
		})
	}
	// Validation errors wrap ErrSpec.
	_, err := Parse("storage.yaml", []byte(strings.Replace(base, "{name: nvme0}", "{name: disk0}", 1)))
	if !errors.Is(err, ErrSpec) {
		t.Errorf("error %v does not wrap ErrSpec", err)
	}
}

// storageFaults extends dgx-h100 with the storage-layer faults.
const storageFaults = `
name: storage-faults
description: test
sources: [here]
extends: dgx-h100
faults:
  bridges:
    - {bdf: "0000:16:00.0", acs: {capability: "0x005f", control: "0x0000"}}
  mounts:
    - {source: /dev/nvme0n1p1, target: /, fstype: ext4, options: "rw"}
  kernel: {cmdline: "iommu=pt", nvme_multipath: false, nvidia_open: true, modules: [nvidia, nvidia_fs]}
  iommu: {units: [dmar0], type: DMA}
  netdevs:
    - {name: ibp24s0, ipv4: ["10.0.0.7/8"]}
expect:
  pairs: [{gpu: 0, nics: [mlx5_0], class: PIX}]
`

// TestStorageFaults: each storage fault replaces the base's field.
func TestStorageFaults(t *testing.T) {
	base, err := Machine("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse("storage-faults.yaml", []byte(storageFaults))
	if err != nil {
		t.Fatal(err)
	}
	if s.Kernel.Release != base.Kernel.Release || s.Kernel.Cmdline != "iommu=pt" || !s.Kernel.NVIDIAOpen ||
		s.Kernel.NVMeMultipath == nil || *s.Kernel.NVMeMultipath || !cmp.Equal(s.Kernel.Modules, []string{"nvidia", "nvidia_fs"}) {
		t.Errorf("kernel = %+v", s.Kernel)
	}
	root := t.TempDir()
	if err := Build(s, root); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices/0000:16:00.0/config"))
	if err != nil {
		t.Fatal(err)
	}
	if a := pci.ParseACS(cfg, "config"); a.State != pci.ACSOff || a.Capability != 0x5f {
		t.Errorf("0000:16:00.0 ACS = %+v, want off with capability 0x5f", a)
	}
	checkFiles(t, root, map[string]string{
		"proc/mounts":                               "/dev/nvme0n1p1 / ext4 rw 0 0\n",
		"proc/cmdline":                              "iommu=pt\n",
		"proc/driver/nvidia-fs/version":             "version: 2.17\n",
		"sys/module/nvme_core/parameters/multipath": "N\n",
		"sys/kernel/iommu_groups/0/type":            "DMA\n",
		AddressesFile:                               "{\n  \"schema\": \"gpuaffinity.addresses/v1\",\n  \"interfaces\": {\n    \"ibp24s0\": [\n      \"10.0.0.7/8\"\n    ]\n  }\n}\n",
	})
	b, _ := os.ReadFile(filepath.Join(root, "proc/driver/nvidia/version"))
	if !strings.Contains(string(b), "Open Kernel Module for x86_64") {
		t.Errorf("version = %q", b)
	}
	checkLinks(t, root, map[string]string{"sys/class/iommu/dmar0": "sys/devices/virtual/iommu/dmar0"})

	for _, tc := range []struct{ name, old, new, want string }{
		{"bridge the base lacks", `bdf: "0000:16:00.0"`, `bdf: "0000:16:09.0"`, `dgx-h100 has no bridge "0000:16:09.0"`},
		{"not a bridge", `bdf: "0000:16:00.0"`, `bdf: "0000:18:00.0"`, `dgx-h100 has no bridge "0000:18:00.0"`},
		{"bridge twice", "  mounts:", "    - {bdf: \"0000:16:00.0\", acs: {capability: \"0x1\", control: \"0x1\"}}\n  mounts:", "bridge 0000:16:00.0 is addressed twice"},
		{"bridge without acs", `, acs: {capability: "0x005f", control: "0x0000"}`, "", "bridge 0000:16:00.0: acs is missing"},
		{"bad acs", `control: "0x0000"`, `control: "zero"`, "device 0000:16:00.0: acs.control"},
		{"raid of nothing", "  iommu:", "  raid: [{name: md9, level: raid0, members: [nvme99n1]}]\n  iommu:", `raid md9: member "nvme99n1" is not an NVMe namespace`},
		{"bad iommu", "type: DMA", "type: dma", `iommu: type "dma"`},
		{"bad ipv4", `"10.0.0.7/8"`, `"10.0.0.7/33"`, `netdev ibp24s0: ipv4 "10.0.0.7/33"`},
		{"unknown kernel key", "nvidia_open: true", "release: x", "release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(storageFaults, tc.old) {
				t.Fatalf("test case does not apply: %q not in the spec", tc.old)
			}
			_, err := Parse("storage-faults.yaml", []byte(strings.Replace(storageFaults, tc.old, tc.new, 1)))
			if !errors.Is(err, ErrSpec) && !strings.Contains(tc.name, "unknown") {
				t.Errorf("error %v does not wrap ErrSpec", err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "storage-faults.yaml") {
				t.Errorf("error %v does not name the file and %q", err, tc.want)
			}
		})
	}
}

// TestStorageFaultsReplace applies storage faults to a base with NVMe
// (no embedded machine has one): raid and mounts replace the base's, even
// with an empty list; kernel fields left out keep the base's.
func TestStorageFaultsReplace(t *testing.T) {
	s, err := Parse("storage.yaml", []byte(storageVariant("true", "nvme0n1, nvme5n1")))
	if err != nil {
		t.Fatal(err)
	}
	s.Extends = "storage"
	mp := false
	err = s.applyFaults(Faults{
		RAID:    []RAID{{Name: "md1", Level: "raid1", Members: []string{"nvme5n1", "nvme5n2"}}},
		Mounts:  []Mount{},
		Kernel:  &KernelFault{NVMeMultipath: &mp},
		Netdevs: []NetdevFault{{Name: "ibp17s0", IPv4: []string{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Without multipath nvme5n1 is no longer a block device.
	if err := s.Validate(); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), `raid md1: member "nvme5n1" is not an NVMe namespace`) {
		t.Fatalf("Validate: %v", err)
	}
	s.RAID[0].Members = []string{"nvme1n1", "nvme1n2"}
	root := t.TempDir()
	if err := Build(s, root); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, root, map[string]string{
		"proc/mounts":                               "",
		"proc/cmdline":                              "BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt\n",
		"sys/devices/virtual/block/md1/size":        sectors50 + "\n",
		"sys/module/nvme_core/parameters/multipath": "N\n",
	})
	checkLinks(t, root, map[string]string{"sys/block/md1": "sys/devices/virtual/block/md1"})
	missing(t, root, "sys/block/md0", AddressesFile)
}

// TestStorageInMemory: the in-memory root (BuildMemory, --demo) and a
// machine image carry the storage files and links too.
func TestStorageInMemory(t *testing.T) {
	s, err := Parse("storage.yaml", []byte(storageVariant("true", "nvme0n1, nvme5n1")))
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := BuildMemory(s)
	if err != nil {
		t.Fatal(err)
	}
	disk := t.TempDir()
	if err := Build(s, disk); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		AddressesFile, "proc/mounts", "proc/cmdline", "proc/driver/nvidia-fs/version",
		"sys/module/nvme_core/parameters/multipath", "sys/kernel/iommu_groups/4/type",
		"sys/devices/virtual/nvme-subsystem/nvme-subsys5/nvme5n1/size",
		stNVMe1 + "/nvme/nvme1/nvme5c1n2/dev", stNVMe0 + "/nvme/nvme0/subsysnqn",
		"sys/devices/virtual/block/md0/md/level", "sys/block/md0/size", "sys/class/block/nvme5n1/dev",
		"sys/bus/pci/devices/0000:10:01.0/config",
	} {
		got, err := r.ReadFile(p, 1<<20)
		if err != nil {
			t.Errorf("in memory: %v", err)
			continue
		}
		want, _ := os.ReadFile(filepath.Join(disk, p))
		if string(got) != string(want) {
			t.Errorf("in memory %s = %q, on disk %q", p, got, want)
		}
	}
	for _, p := range []string{"sys/block/nvme5n1", stNVMe0 + "/iommu_group", "sys/devices/virtual/block/md0/slaves/nvme0n1", "sys/class/nvme-subsystem/nvme-subsys5"} {
		got, err := r.Readlink(p)
		want, _ := os.Readlink(filepath.Join(disk, p))
		if err != nil || got != want {
			t.Errorf("in memory %s -> %q, %v; on disk -> %q", p, got, err, want)
		}
	}
	// Through an image and back.
	raw, err := encodeImage(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := demo.Decode("storage", raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{AddressesFile, "sys/block/md0/size", "sys/kernel/iommu_groups/0/type"} {
		a, err1 := m.Root().ReadFile(p, 1<<20)
		b, err2 := r.ReadFile(p, 1<<20)
		if err1 != nil || err2 != nil || string(a) != string(b) {
			t.Errorf("image %s = %q (%v), built %q (%v)", p, a, err1, b, err2)
		}
	}
}
