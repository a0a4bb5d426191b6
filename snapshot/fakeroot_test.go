package snapshot

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	gpunvml "github.com/gpuaffinity/gpuaffinity/nvml"
)

// fakeRoot builds a source root by hand and remembers, per path, whether a
// snapshot must reproduce it (want, wantLinks) or must leave it out
// (forbidden).
type fakeRoot struct {
	t         *testing.T
	dir       string // the root
	want      map[string]string
	wantLinks map[string]string
	wantDirs  []string // empty directories the snapshot must hold
	forbidden []string
}

func newFakeRoot(t *testing.T) *fakeRoot {
	t.Helper()
	base := t.TempDir()
	f := &fakeRoot{t: t, dir: filepath.Join(base, "root"), want: map[string]string{}, wantLinks: map[string]string{}}
	// A file beside the root that escaping links point at.
	if err := os.MkdirAll(filepath.Join(base, "outside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "outside", "secret"), []byte("outside-secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeRoot) write(p, content string, perm os.FileMode) {
	f.t.Helper()
	full := filepath.Join(f.dir, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), perm); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeRoot) symlink(p, text string) {
	f.t.Helper()
	full := filepath.Join(f.dir, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink(text, full); err != nil {
		f.t.Fatal(err)
	}
}

// file writes an allowlisted file the snapshot must copy as it is.
func (f *fakeRoot) file(p, content string) {
	f.write(p, content, 0o444)
	f.want[p] = content
}

// extra writes a file the snapshot must not hold.
func (f *fakeRoot) extra(p, content string) {
	f.write(p, content, 0o444)
	f.forbidden = append(f.forbidden, p)
}

// link makes an allowlisted symlink the snapshot must copy.
func (f *fakeRoot) link(p, text string) {
	f.symlink(p, text)
	f.wantLinks[p] = text
}

// extraLink makes a symlink the snapshot must not hold.
func (f *fakeRoot) extraLink(p, text string) {
	f.symlink(p, text)
	f.forbidden = append(f.forbidden, p)
}

// relLink is the relative text of a link at from pointing to to, as the
// kernel writes it.
func relLink(t *testing.T, from, to string) string {
	t.Helper()
	r, err := filepath.Rel(path.Dir(from), to)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Identifying values in the fake root; none may survive a scrub.
const (
	fakeMAC      = "0c:42:a1:11:22:33"
	fakeMACGID   = "fe80:0000:0000:0000:0e42:a1ff:fe11:2233" // RoCE link-local GID of fakeMAC
	fakeNodeGUID = "0c42:a103:0011:2233"
	fakePortGUID = "0c42:a103:0011:2234"
	fakeIBGID    = "fe80:0000:0000:0000:0c42:a103:0011:2234"
	fakeIPoIB    = "00:00:10:87:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:11:22:34"
	fakeUUID     = "GPU-e3344502-c9fc-0416-7091-4a6968e9d3e8"
	fakeHostname = "gpu-node-17.example.com"
	fakeAsset    = "ASSET-4711"
)

// The PCI tree of the fake root:
//
//	pci0000:00 (host bridge)
//	└── 0000:00:01.0 root port
//	    └── 0000:01:00.0 switch upstream port
//	        ├── 0000:02:00.0 downstream port
//	        │   ├── 0000:03:00.0 NIC, mlx5: netdev eth2 (RoCE), ib0 (IPoIB), RDMA mlx5_0 ports 1 (RoCE) and 2 (IB)
//	        │   └── 0000:03:00.1 its virtual function (physfn)
//	        └── 0000:02:01.0 downstream port
//	            └── 0000:04:00.0 GPU, nvidia
const (
	pciHost = "sys/devices/pci0000:00"
	pciRP   = pciHost + "/0000:00:01.0"
	pciUp   = pciRP + "/0000:01:00.0"
	pciDnA  = pciUp + "/0000:02:00.0"
	pciDnB  = pciUp + "/0000:02:01.0"
	pciNIC  = pciDnA + "/0000:03:00.0"
	pciVF   = pciDnA + "/0000:03:00.1"
	pciGPU  = pciDnB + "/0000:04:00.0"
	rdmaDev = pciNIC + "/infiniband/mlx5_0"
)

// buildFakeRoot makes a small GPU + RDMA NIC node, with forbidden files
// beside the allowlisted ones and links that leave the root.
func buildFakeRoot(t *testing.T) *fakeRoot {
	f := newFakeRoot(t)

	config := strings.Repeat("\x00\x01", 128) // 256 bytes of config space
	pciDev := func(dir, vendor, device, class, numa string) {
		bdf := path.Base(dir)
		f.file(dir+"/vendor", vendor+"\n")
		f.file(dir+"/device", device+"\n")
		f.file(dir+"/class", class+"\n")
		f.file(dir+"/subsystem_vendor", vendor+"\n")
		f.file(dir+"/subsystem_device", "0x0001\n")
		f.file(dir+"/revision", "0x00\n")
		f.file(dir+"/numa_node", numa+"\n")
		f.file(dir+"/local_cpulist", "0-3\n")
		f.file(dir+"/local_cpus", "f\n")
		f.file(dir+"/current_link_speed", "32.0 GT/s PCIe\n")
		f.file(dir+"/current_link_width", "16\n")
		f.file(dir+"/max_link_speed", "32.0 GT/s PCIe\n")
		f.file(dir+"/max_link_width", "16\n")
		f.file(dir+"/modalias", "pci:v000015B3d00001021sv000015B3sd00000001bc02sc00i00\n")
		f.file(dir+"/enable", "1\n")
		f.file(dir+"/irq", "42\n")
		f.file(dir+"/config", config)
		// Never read: large, write-only or with side effects.
		f.extra(dir+"/resource", "0x0000 0x0000 0x0000\n")
		f.extra(dir+"/resource0", strings.Repeat("x", 4096))
		f.extra(dir+"/rom", "rom")
		f.extra(dir+"/vpd", "vpd")
		f.write(dir+"/remove", "", 0o200)
		f.write(dir+"/reset", "", 0o200)
		f.forbidden = append(f.forbidden, dir+"/remove", dir+"/reset")
		f.extra(dir+"/uevent", "PCI_SLOT_NAME="+bdf+"\n")
		f.extra(dir+"/power_state", "D0\n")
		f.extraLink(dir+"/subsystem", relLink(t, dir+"/subsystem", "sys/bus/pci"))
		f.link("sys/bus/pci/devices/"+bdf, relLink(t, "sys/bus/pci/devices/"+bdf, dir))
	}
	pciDev(pciRP, "0x8086", "0x352a", "0x060400", "0")
	pciDev(pciUp, "0x1000", "0xc030", "0x060400", "0")
	pciDev(pciDnA, "0x1000", "0xc030", "0x060400", "0")
	pciDev(pciDnB, "0x1000", "0xc030", "0x060400", "0")
	pciDev(pciNIC, "0x15b3", "0x1021", "0x020000", "0")
	pciDev(pciVF, "0x15b3", "0x101e", "0x020000", "0")
	pciDev(pciGPU, "0x10de", "0x2335", "0x030200", "0")
	f.extra(pciGPU+"/serial_number", "1654923000000\n")
	// The host bridge's own folder has no attributes, only an uevent.
	f.extra(pciHost+"/uevent", "")

	// Drivers: the links are copied, the driver folders made empty.
	for _, d := range []struct{ dev, drv string }{{pciNIC, "mlx5_core"}, {pciVF, "mlx5_core"}, {pciGPU, "nvidia"}} {
		f.link(d.dev+"/driver", relLink(t, d.dev+"/driver", "sys/bus/pci/drivers/"+d.drv))
	}
	f.link(pciVF+"/physfn", "../0000:03:00.0")
	f.wantDirs = append(f.wantDirs, "sys/bus/pci/drivers/mlx5_core", "sys/bus/pci/drivers/nvidia")
	f.write("sys/bus/pci/drivers/mlx5_core/bind", "", 0o200)
	f.write("sys/bus/pci/drivers/nvidia/new_id", "", 0o200)
	f.forbidden = append(f.forbidden, "sys/bus/pci/drivers/mlx5_core/bind", "sys/bus/pci/drivers/nvidia/new_id")
	f.extraLink("sys/bus/pci/drivers/nvidia/module", "../../../../module/nvidia")
	f.extraLink("sys/bus/pci/drivers/nvidia/0000:04:00.0", relLink(t, "sys/bus/pci/drivers/nvidia/0000:04:00.0", pciGPU))

	// Netdevs: a RoCE one and an IPoIB one under the NIC, and loopback.
	netdev := func(dir, addr, typ string) {
		f.file(dir+"/address", addr+"\n")
		f.file(dir+"/operstate", "up\n")
		f.file(dir+"/mtu", "9000\n")
		f.file(dir+"/speed", "400000\n")
		f.file(dir+"/type", typ+"\n")
		f.file(dir+"/carrier", "1\n")
		f.file(dir+"/ifindex", "4\n")
		f.file(dir+"/addr_assign_type", "0\n")
		f.file(dir+"/dev_port", "0\n")
		f.file(dir+"/dev_id", "0x0\n")
		f.extra(dir+"/broadcast", "ff:ff:ff:ff:ff:ff\n")
		f.extra(dir+"/statistics/rx_bytes", "123456\n")
		f.extra(dir+"/phys_port_id", "0c42a1112233\n")
		name := path.Base(dir)
		f.link("sys/class/net/"+name, relLink(t, "sys/class/net/"+name, dir))
	}
	netdev(pciNIC+"/net/eth2", fakeMAC, "1")
	f.link(pciNIC+"/net/eth2/device", "../../../0000:03:00.0")
	netdev(pciNIC+"/net/ib0", fakeIPoIB, "32")
	f.link(pciNIC+"/net/ib0/device", "../../../0000:03:00.0")
	f.file("sys/devices/virtual/net/lo/address", "00:00:00:00:00:00\n")
	f.file("sys/devices/virtual/net/lo/mtu", "65536\n")
	f.file("sys/devices/virtual/net/lo/type", "772\n")
	f.link("sys/class/net/lo", "../../devices/virtual/net/lo")
	// Links that leave the root: never followed, never copied.
	f.extraLink("sys/class/net/evil", "../../../../outside")
	f.extraLink("sys/class/net/abs", "/etc")
	f.extraLink(pciRP+"/firmware_node", "../../LNXSYSTM:00/device:00") // not allowlisted
	// An allowlisted name that is a link out of the root.
	os.Remove(filepath.Join(f.dir, pciUp, "numa_node"))
	delete(f.want, pciUp+"/numa_node")
	f.extraLink(pciUp+"/numa_node", relLink(t, pciUp+"/numa_node", "../outside/secret"))

	// RDMA device with a RoCE port and an IB port.
	f.file(rdmaDev+"/fw_ver", "28.39.1002\n")
	f.file(rdmaDev+"/node_guid", fakeNodeGUID+"\n")
	f.file(rdmaDev+"/sys_image_guid", fakeNodeGUID+"\n")
	f.file(rdmaDev+"/node_type", "1: CA\n")
	f.file(rdmaDev+"/hca_type", "MT4129\n")
	f.file(rdmaDev+"/board_id", "MT_0000000838\n")
	f.extra(rdmaDev+"/node_desc", "gpu-node-17 mlx5_0\n")
	f.extra(rdmaDev+"/uevent", "NAME=mlx5_0\n")
	f.link(rdmaDev+"/device", "../../../0000:03:00.0")
	f.link("sys/class/infiniband/mlx5_0", relLink(t, "sys/class/infiniband/mlx5_0", rdmaDev))
	port := func(n, layer, gid0 string) {
		p := rdmaDev + "/ports/" + n
		f.file(p+"/state", "4: ACTIVE\n")
		f.file(p+"/phys_state", "5: LinkUp\n")
		f.file(p+"/rate", "400 Gb/sec (4X NDR)\n")
		f.file(p+"/link_layer", layer+"\n")
		f.file(p+"/lid", "0x0\n")
		f.file(p+"/sm_lid", "0x0\n")
		f.file(p+"/cap_mask", "0x00010000\n")
		f.file(p+"/gids/0", gid0+"\n")
		f.file(p+"/gids/1", "0000:0000:0000:0000:0000:ffff:0a00:0001\n")
		f.extra(p+"/gids/2", "\n") // reads as EINVAL (readWithFaults)
		f.file(p+"/gids/3", "0000:0000:0000:0000:0000:0000:0000:0000\n")
		f.file(p+"/gid_attrs/types/0", "IB/RoCE v1\n")
		f.file(p+"/gid_attrs/types/1", "RoCE v2\n")
		f.extra(p+"/gid_attrs/types/2", "\n") // EINVAL
		f.file(p+"/gid_attrs/ndevs/0", "eth2\n")
		f.file(p+"/gid_attrs/ndevs/1", "eth2\n")
		f.file(p+"/counters/port_rcv_data", "1234\n")
		f.extra(p+"/counters/port_xmit_data", "5678\n") // vanishes (readWithFaults)
		f.file(p+"/hw_counters/out_of_buffer", "0\n")
		f.file(p+"/hw_counters/lifespan", "10\n")
		f.extra(p+"/pkeys/0", "0xffff\n")
	}
	port("1", "Ethernet", fakeMACGID)
	port("2", "InfiniBand", fakeIBGID)
	f.file(rdmaDev+"/hw_counters/req_cqe_error", "0\n")

	// CPUs: 4, two cores with two threads.
	for _, p := range []string{"online", "possible", "present"} {
		f.file("sys/devices/system/cpu/"+p, "0-3\n")
	}
	f.file("sys/devices/system/cpu/offline", "\n")
	f.file("sys/devices/system/cpu/kernel_max", "8191\n")
	f.extra("sys/devices/system/cpu/isolated", "\n")
	f.extra("sys/devices/system/cpu/modalias", "cpu:type:x86\n")
	for i, c := range []string{"cpu0", "cpu1", "cpu2", "cpu3"} {
		d := "sys/devices/system/cpu/" + c
		if i > 0 {
			f.file(d+"/online", "1\n")
		}
		core := []string{"0", "1", "0", "1"}[i]
		f.file(d+"/topology/core_id", core+"\n")
		f.file(d+"/topology/physical_package_id", "0\n")
		f.file(d+"/topology/thread_siblings_list", []string{"0,2", "1,3", "0,2", "1,3"}[i]+"\n")
		f.file(d+"/topology/core_cpus_list", []string{"0,2", "1,3", "0,2", "1,3"}[i]+"\n")
		f.file(d+"/topology/package_cpus", "f\n")
		f.file(d+"/cache/index0/level", "1\n")
		f.file(d+"/cache/index0/type", "Data\n")
		f.file(d+"/cache/index0/size", "48K\n")
		f.file(d+"/cache/index0/shared_cpu_map", "5\n")
		f.extra(d+"/cache/index0/uevent", "\n")
		f.extra(d+"/cpufreq/scaling_governor", "performance\n")
		f.extraLink(d+"/subsystem", "../../../../bus/cpu")
	}

	// NUMA: node0 with the CPUs, node1 a CPU-less GPU memory node.
	f.file("sys/devices/system/node/online", "0-1\n")
	f.file("sys/devices/system/node/possible", "0-1\n")
	f.file("sys/devices/system/node/has_cpu", "0\n")
	f.file("sys/devices/system/node/has_memory", "0-1\n")
	f.file("sys/devices/system/node/has_normal_memory", "0-1\n")
	f.extra("sys/devices/system/node/has_generic_initiator", "\n")
	n0, n1 := "sys/devices/system/node/node0", "sys/devices/system/node/node1"
	f.file(n0+"/cpulist", "0-3\n")
	f.file(n0+"/cpumap", "f\n")
	f.file(n0+"/distance", "10 20\n")
	f.file(n0+"/meminfo", "Node 0 MemTotal:       1048576 kB\n")
	f.extra(n0+"/numastat", "numa_hit 1\n")
	f.file(n0+"/hugepages/hugepages-2048kB/nr_hugepages", "0\n")
	f.file(n0+"/hugepages/hugepages-2048kB/free_hugepages", "0\n")
	f.write(n0+"/hugepages/hugepages-2048kB/demote", "", 0o200) // write-only
	f.forbidden = append(f.forbidden, n0+"/hugepages/hugepages-2048kB/demote")
	for i := range 4 {
		c := "cpu" + string(rune('0'+i))
		f.link(n0+"/"+c, "../../cpu/"+c)
	}
	f.extraLink(n0+"/memory0", "../../memory/memory0")
	f.file(n1+"/cpulist", "\n")
	f.file(n1+"/cpumap", "0\n")
	f.file(n1+"/distance", "20 10\n")
	f.file(n1+"/meminfo", "Node 1 MemTotal:       97517568 kB\n")
	if err := os.MkdirAll(filepath.Join(f.dir, n1, "hugepages"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.wantDirs = append(f.wantDirs, n1+"/hugepages")
	f.link(n1+"/access0/initiators/node0", "../../../node0")
	f.file(n1+"/access0/initiators/read_bandwidth", "100000\n")

	// DMI through its class link.
	f.link("sys/class/dmi/id", "../../devices/virtual/dmi/id")
	dmi := "sys/devices/virtual/dmi/id/"
	f.file(dmi+"sys_vendor", "Supermicro\n")
	f.file(dmi+"product_name", "SYS-821GE-TNHR\n")
	f.file(dmi+"product_version", "0123456789\n")
	f.file(dmi+"chassis_asset_tag", fakeAsset+"\n")
	f.file(dmi+"board_vendor", "Supermicro\n")
	f.file(dmi+"board_name", "X13DEG-OAD\n")
	f.file(dmi+"chassis_vendor", "Supermicro\n")
	for _, s := range []string{"product_serial", "board_serial", "chassis_serial", "product_uuid"} {
		f.write(dmi+s, "S3CR3T-"+s+"\n", 0o400)
		f.forbidden = append(f.forbidden, dmi+s)
	}

	// procfs: self and mounts are links on a live node; the snapshot
	// holds them as plain files at their logical paths.
	f.write("proc/4242/status", "Name:\tgpuaffinity\nCpus_allowed_list:\t0-3\n", 0o444)
	f.write("proc/4242/mounts", "sysfs /sys sysfs ro 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", 0o444)
	f.symlink("proc/self", "4242")
	f.symlink("proc/mounts", "self/mounts")
	f.want["proc/self/status"] = "Name:\tgpuaffinity\nCpus_allowed_list:\t0-3\n"
	f.want["proc/mounts"] = "sysfs /sys sysfs ro 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"
	f.forbidden = append(f.forbidden, "proc/4242/status", "proc/4242/mounts")
	f.file("proc/cpuinfo", "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n")
	f.file("proc/meminfo", "MemTotal:       1048576 kB\nHugepagesize:       2048 kB\nHugetlb:               0 kB\n")
	f.file("proc/sys/kernel/hostname", fakeHostname+"\n")
	f.file("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n")
	f.file("proc/driver/nvidia/gpus/0000:04:00.0/information", "Model: \t\t NVIDIA H200\nGPU UUID: \t "+fakeUUID+"\nBus Location: \t 0000:04:00.0\n")
	f.extra("proc/driver/nvidia/gpus/0000:04:00.0/registry", "Binary: \"\"\n")
	// A coherent GPU's memory node, as nv-procfs.c prints it (on an H200
	// the driver makes none; the reader does not care), and its
	// offline_pages beside it, which no reader uses.
	f.file("proc/driver/nvidia/gpus/0000:04:00.0/numa_status", "Node:      2\nStatus:    online\nAddress:   400000000000\nSize:      2e00000000\n")
	f.extra("proc/driver/nvidia/gpus/0000:04:00.0/offline_pages", "")
	f.file("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=UUID=1234 intel_iommu=on iommu=pt\n")

	// NVML answers.
	nf := gpunvml.ReplayFile{
		Version:       gpunvml.ReplayVersion,
		DriverVersion: gpunvml.Answer[string]{Value: "580.159.04"},
		DeviceCount:   gpunvml.Answer[int]{Value: 1},
		Devices: []gpunvml.ReplayDevice{{
			PCI:  gpunvml.Answer[gpunvml.ReplayPCI]{Value: gpunvml.ReplayPCI{BusID: "00000000:04:00.0", PCIDeviceID: 0x233510de}},
			UUID: gpunvml.Answer[string]{Value: fakeUUID},
			Name: gpunvml.Answer[string]{Value: "NVIDIA H200"},
		}},
	}
	data, err := json.MarshalIndent(nf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	f.write("nvml.json", string(data)+"\n", 0o644)
	return f
}
