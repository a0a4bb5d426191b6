package health

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// storageNode is a hand-built two-socket node:
//
//	socket 0: root port 0000:15:01.0 → switch upstream 0000:16:00.0 →
//	          downstream 0000:17:00.0 → GPU 0 (0000:18:00.0)
//	          downstream 0000:17:01.0 → nvme0 (0000:19:00.0), data, x4 Gen5
//	          root port 0000:28:01.0 → storage NIC mlx5_1 (0000:29:00.0)
//	socket 1: root port 0000:97:01.0 → GPU 1 (0000:9a:00.0)
//	          root port 0000:a8:01.0 → nvme1 (0000:a9:00.0), data, x4 Gen5
//
// GPU 0's nearest NVMe shares its switch (PIX); GPU 1's sits on another
// root port of its socket (NODE). Both GPUs' nearest storage NIC is
// mlx5_1: NODE for GPU 0, SYS for GPU 1 unless a test moves it. Every
// bridge has ACS off; nvidia-fs is loaded; the IOMMU is off; x86_64.
func storageNode() topology.Node {
	zero, one := 0, 1
	off := &topology.ACS{State: "off", Control: "0x0000"}
	acs := func() *topology.ACS { a := *off; return &a }
	gen5x4 := topology.PCILink{Speed: "32.0 GT/s PCIe", Width: 4, MaxSpeed: "32.0 GT/s PCIe", MaxWidth: 4}
	n := topology.Node{
		CPU: topology.CPUInfo{Arch: "x86_64"},
		PCIDevices: []topology.PCIDevice{
			{BusID: "0000:15:01.0", HostBridge: "pci0000:15", Kind: topology.KindRootPort, NUMANode: &zero, ACS: acs()},
			{BusID: "0000:16:00.0", Parent: "0000:15:01.0", HostBridge: "pci0000:15", Kind: topology.KindSwitchUpstream, NUMANode: &zero, ACS: acs()},
			{BusID: "0000:17:00.0", Parent: "0000:16:00.0", HostBridge: "pci0000:15", Kind: topology.KindSwitchDownstream, NUMANode: &zero, ACS: acs()},
			{BusID: "0000:17:01.0", Parent: "0000:16:00.0", HostBridge: "pci0000:15", Kind: topology.KindSwitchDownstream, NUMANode: &zero, ACS: acs()},
			{BusID: "0000:18:00.0", Parent: "0000:17:00.0", HostBridge: "pci0000:15", Kind: topology.KindGPU, NUMANode: &zero},
			{BusID: "0000:19:00.0", Parent: "0000:17:01.0", HostBridge: "pci0000:15", Kind: topology.KindOther, NUMANode: &zero, Link: gen5x4},
			{BusID: "0000:28:01.0", HostBridge: "pci0000:28", Kind: topology.KindRootPort, NUMANode: &zero, ACS: acs()},
			{BusID: "0000:29:00.0", Parent: "0000:28:01.0", HostBridge: "pci0000:28", Kind: topology.KindNIC, NUMANode: &zero},
			{BusID: "0000:97:01.0", HostBridge: "pci0000:97", Kind: topology.KindRootPort, NUMANode: &one, ACS: acs()},
			{BusID: "0000:9a:00.0", Parent: "0000:97:01.0", HostBridge: "pci0000:97", Kind: topology.KindGPU, NUMANode: &one},
			{BusID: "0000:a8:01.0", HostBridge: "pci0000:a8", Kind: topology.KindRootPort, NUMANode: &one, ACS: acs()},
			{BusID: "0000:a9:00.0", Parent: "0000:a8:01.0", HostBridge: "pci0000:a8", Kind: topology.KindOther, NUMANode: &one, Link: gen5x4},
		},
		GPUs: []topology.GPU{
			{Index: 0, BusID: "0000:18:00.0", Device: "0x2330", NUMANode: &zero},
			{Index: 1, BusID: "0000:9a:00.0", Device: "0x2330", NUMANode: &one},
		},
		NICs: []topology.NIC{
			{Name: "mlx5_1", RDMADevice: "mlx5_1", BusID: "0000:29:00.0", Fabric: topology.FabricInfiniBand,
				Role: topology.RoleStorage, Roles: []topology.Role{topology.RoleStorage}, NUMANode: &zero,
				Ports: []topology.Port{{Port: 1, State: "ACTIVE", StateID: 4, PhysState: "LinkUp", PhysStateID: 5, RateGbps: 400}}},
		},
		Storage: topology.Storage{
			NVMe: []topology.NVMe{
				{Name: "nvme0", BusID: "0000:19:00.0", Transport: "pcie", NUMANode: &zero, Link: gen5x4, Use: topology.NVMeData},
				{Name: "nvme1", BusID: "0000:a9:00.0", Transport: "pcie", NUMANode: &one, Link: gen5x4, Use: topology.NVMeData},
			},
			Mounts: []topology.Mount{
				{Source: "/dev/md0", Target: "/raid", FSType: "xfs", Kind: topology.MountNVMe, Devices: []string{"nvme0", "nvme1"}, NICs: []string{}},
			},
			GDS: topology.GDS{NvidiaFS: true, NvidiaFSVersion: "2.17",
				P2PDMA: topology.P2PDMA{Missing: []string{"CUDA driver 12.4 < 12.8"}},
				IOMMU:  topology.IOMMU{Mode: topology.IOMMUOff, Units: []string{}, Cmdline: []string{}}},
			Pairs: []topology.StoragePair{
				{GPU: 0, NVMe: []string{"nvme0"}, NVMeClass: topology.ClassPIX, NICs: []string{"mlx5_1"}, NICClass: topology.ClassNODE},
				{GPU: 1, NVMe: []string{"nvme1"}, NVMeClass: topology.ClassNODE, NICs: []string{"mlx5_1"}, NICClass: topology.ClassSYS},
			},
		},
	}
	return n
}

func storageIDs() []string {
	return []string{"storage.gds", "storage.acs", "storage.iommu", "storage.ports", "storage.nvme-link", "storage.locality"}
}

func runStorage(t *testing.T, n topology.Node, opts Options, id string) Result {
	t.Helper()
	opts.Root = "/nonexistent"
	opts.Only = []string{id}
	rep := run(t, n, opts)
	if len(rep.Results) != 1 || rep.Results[0].ID != id {
		t.Fatalf("results %+v", rep.Results)
	}
	return rep.Results[0]
}

func bridge(n *topology.Node, bus string) *topology.PCIDevice {
	for i := range n.PCIDevices {
		if n.PCIDevices[i].BusID == bus {
			return &n.PCIDevices[i]
		}
	}
	panic("no bridge " + bus)
}

// want checks a result's verdict and that its reason holds every
// substring.
func want(t *testing.T, r Result, v Verdict, subs ...string) {
	t.Helper()
	if r.Verdict != v {
		t.Errorf("%s = %s %q, want %s", r.ID, r.Verdict, r.Reason, v)
	}
	for _, s := range subs {
		if !strings.Contains(r.Reason, s) {
			t.Errorf("%s reason %q lacks %q", r.ID, r.Reason, s)
		}
	}
	if (v == Fail || v == Warn) && r.Hint == "" {
		t.Errorf("%s %s without a hint", r.ID, v)
	}
}

func TestStorageChecksRegistered(t *testing.T) {
	for _, id := range storageIDs() {
		found := false
		for _, c := range Checks() {
			if c.ID == id {
				found = true
				if c.Group != GroupStorage || c.What == "" {
					t.Errorf("%s: group %q, what %q", id, c.Group, c.What)
				}
			}
		}
		if !found {
			t.Errorf("no check %s", id)
		}
	}
}

// Without a GDS target (no data NVMe, no RDMA network mount) every
// storage check but storage.ports skips; storage.ports needs a storage
// NIC, storage.locality too.
func TestStorageSkips(t *testing.T) {
	n := storageNode()
	for i := range n.Storage.NVMe {
		n.Storage.NVMe[i].Use = topology.NVMeUnmounted
	}
	n.Storage.Mounts = []topology.Mount{{Source: "10.0.0.1:/home", Target: "/home", FSType: "nfs", Kind: topology.MountNFSTCP,
		Options: []string{"proto=tcp"}, NICs: []string{}}}
	n.Storage.GDS = topology.GDS{} // no GDS path, translated IOMMU would not matter either
	n.Storage.GDS.IOMMU.Mode = topology.IOMMUTranslated
	bridge(&n, "0000:17:01.0").ACS = &topology.ACS{State: "on", Enabled: []string{"RR"}}
	n.Storage.NVMe[0].Link.Width = 1
	n.Storage.Pairs[1].NICClass = topology.ClassSYS
	for _, id := range []string{"storage.gds", "storage.acs", "storage.iommu", "storage.nvme-link", "storage.locality"} {
		want(t, runStorage(t, n, Options{}, id), Skip, "no GDS target", "1 NFS mount over TCP")
	}
	want(t, runStorage(t, n, Options{}, "storage.ports"), Pass, "1 port of 1 storage NIC up")

	// A GDS target but no storage NIC: ports and locality skip.
	n = storageNode()
	n.NICs = nil
	for _, id := range []string{"storage.ports", "storage.locality"} {
		want(t, runStorage(t, n, Options{}, id), Skip, "no storage NIC")
	}
	// A network mount alone is a target: the locality check runs.
	n = storageNode()
	n.Storage.NVMe = nil
	n.Storage.Mounts = []topology.Mount{{Source: "10.1.0.1@o2ib:/lustre", Target: "/lustre", FSType: "lustre", Kind: topology.MountLustre, NICs: []string{"mlx5_1"}}}
	n.Storage.Pairs[1].NICClass = topology.ClassNODE
	want(t, runStorage(t, n, Options{}, "storage.locality"), Pass)

	// No NVIDIA GPU: GDS does not apply.
	n.GPUs = nil
	want(t, runStorage(t, n, Options{}, "storage.gds"), Skip, "no NVIDIA GPU")
}

func TestStorageGDS(t *testing.T) {
	n := storageNode()
	want(t, runStorage(t, n, Options{}, "storage.gds"), Pass, "nvidia-fs 2.17 loaded")

	n.Storage.GDS.NvidiaFS = false
	n.Storage.GDS.P2PDMA = topology.P2PDMA{Supported: true, Missing: []string{}}
	want(t, runStorage(t, n, Options{}, "storage.gds"), Pass, "P2PDMA supported")

	n.Storage.GDS.P2PDMA = topology.P2PDMA{Missing: []string{"CUDA driver 12.4 < 12.8", "kernel 5.15.0-1042-nvidia < 6.2"}}
	r := runStorage(t, n, Options{}, "storage.gds")
	want(t, r, Fail, "nvidia-fs not loaded", "CUDA driver 12.4 < 12.8; kernel 5.15.0-1042-nvidia < 6.2", "compat mode", "staging through CPU memory")
	if !strings.Contains(r.Hint, "modprobe nvidia-fs") || !strings.Contains(r.Hint, "P2PDMA") {
		t.Errorf("hint %q", r.Hint)
	}

	// P2PDMA serves NVMe only: a Lustre mount without nvidia-fs is
	// compat mode.
	n.Storage.GDS.P2PDMA = topology.P2PDMA{Supported: true, Missing: []string{}}
	n.Storage.Mounts = append(n.Storage.Mounts, topology.Mount{Source: "10.1.0.1@o2ib:/lustre", Target: "/lustre", FSType: "lustre", Kind: topology.MountLustre})
	want(t, runStorage(t, n, Options{}, "storage.gds"), Warn, "/lustre (lustre)", "compat mode")
}

func TestStorageACS(t *testing.T) {
	n := storageNode()
	// Only GPU 0 ↔ nvme0 shares a switch: its two downstream ports are
	// checked; GPU 0 ↔ mlx5_1 (NODE) and GPU 1's pairs are not.
	want(t, runStorage(t, n, Options{}, "storage.acs"), Pass, "no ACS enabled on the 2 bridges between 1 GPU↔storage pair")

	// ACS on the switch's upstream port or the root port above the
	// common ancestor does not touch the peer path.
	bridge(&n, "0000:16:00.0").ACS = &topology.ACS{State: "on", Enabled: []string{"SV", "RR"}, Control: "0x0005"}
	bridge(&n, "0000:15:01.0").ACS = &topology.ACS{State: "on", Enabled: []string{"SV"}, Control: "0x0001"}
	bridge(&n, "0000:28:01.0").ACS = &topology.ACS{State: "on", Enabled: []string{"SV"}, Control: "0x0001"}
	want(t, runStorage(t, n, Options{}, "storage.acs"), Pass)

	bridge(&n, "0000:17:01.0").ACS = &topology.ACS{State: "on", Enabled: []string{"SV", "RR", "CR", "UF"}, Control: "0x001d"}
	r := runStorage(t, n, Options{}, "storage.acs")
	want(t, r, Fail, "bridge 0000:17:01.0 has ACS on (SV RR CR UF, control 0x001d) between GPU 0 (0000:18:00.0) ↔ nvme0 (0000:19:00.0)")
	if !strings.Contains(r.Hint, "setpci -s 0000:17:01.0 ECAP_ACS+6.w=0000") || !strings.Contains(r.Hint, "BIOS") {
		t.Errorf("hint %q", r.Hint)
	}
	if rep := run(t, n, Options{Root: "/nonexistent", Only: []string{"storage.acs"}}); rep.Healthy {
		t.Error("pretrain: ACS on must fail the node")
	}

	// Both downstream ports on: each is named, in bus order.
	bridge(&n, "0000:17:00.0").ACS = &topology.ACS{State: "on", Enabled: []string{"RR"}, Control: "0x0004"}
	r = runStorage(t, n, Options{}, "storage.acs")
	want(t, r, Fail, "bridge 0000:17:00.0 has ACS on (RR, control 0x0004)", "(and 1 more)")
	if len(r.Details) != 2 || !strings.HasPrefix(r.Details[1], "bridge 0000:17:01.0 has ACS on") {
		t.Errorf("details %q", r.Details)
	}

	// A storage NIC in the GPU's switch is checked like an NVMe drive.
	n = storageNode()
	bridge(&n, "0000:29:00.0").Parent = "0000:17:01.0" // move mlx5_1 beside nvme0's port
	n.Storage.Pairs[0].NICClass = topology.ClassPIX
	bridge(&n, "0000:17:01.0").ACS = &topology.ACS{State: "unknown", Reason: "config: only 64 bytes readable (the extended configuration space needs root)"}
	r = runStorage(t, n, Options{}, "storage.acs")
	want(t, r, Warn, "bridge 0000:17:01.0: ACS state unknown between GPU 0 (0000:18:00.0) ↔ nvme0 (0000:19:00.0) (and 1 more pair)", "needs root")
	if !strings.Contains(r.Hint, "root") {
		t.Errorf("hint %q", r.Hint)
	}

	// No GPU shares a switch with its storage: nothing to check.
	n = storageNode()
	n.Storage.Pairs[0].NVMeClass = topology.ClassPHB
	bridge(&n, "0000:17:01.0").ACS = &topology.ACS{State: "on", Enabled: []string{"RR"}}
	want(t, runStorage(t, n, Options{}, "storage.acs"), Skip, "no GPU shares a PCIe switch")

	// A bridge whose ACS was never read is not passed.
	n = storageNode()
	bridge(&n, "0000:17:00.0").ACS = nil
	want(t, runStorage(t, n, Options{}, "storage.acs"), Warn, "bridge 0000:17:00.0: ACS not read")
}

func TestStorageIOMMU(t *testing.T) {
	for _, c := range []struct {
		name, arch string
		mode       topology.IOMMUMode
		units      []string
		cmdline    []string
		groups     map[string]string
		verdict    Verdict
		subs       []string
	}{
		{"x86 off", "x86_64", topology.IOMMUOff, nil, nil, nil, Pass,
			[]string{"IOMMU off (no IOMMU unit; cmdline sets no IOMMU option)", "NVIDIA's guidance on x86_64"}},
		{"x86 passthrough", "x86_64", topology.IOMMUPassthrough, []string{"dmar0", "dmar1"}, []string{"intel_iommu=on", "iommu=pt"},
			map[string]string{"0000:18:00.0": "identity"}, Pass, []string{"IOMMU passthrough (units dmar0,dmar1; cmdline intel_iommu=on iommu=pt)", "supported"}},
		{"x86 translated", "x86_64", topology.IOMMUTranslated, []string{"dmar0", "dmar1", "dmar2", "dmar3", "dmar4"}, []string{"intel_iommu=on"},
			map[string]string{"0000:9a:00.0": "DMA-FQ", "0000:18:00.0": "DMA-FQ", "0000:19:00.0": "identity"}, Fail,
			[]string{"IOMMU translated (units dmar0,dmar1,dmar2 and 2 more; cmdline intel_iommu=on)", "0000:18:00.0 in a DMA-FQ group (and 1 more devices)", "not supported"}},
		{"x86 unknown", "x86_64", topology.IOMMUUnknown, []string{"dmar0"}, nil, nil, Warn, []string{"IOMMU unknown", "could not be told"}},
		{"grace translated", "arm64", topology.IOMMUTranslated, []string{"smmu3.0x0000000011000000"}, nil,
			map[string]string{"0009:01:00.0": "DMA"}, Pass, []string{"enabled without passthrough", "Grace"}},
		{"grace passthrough", "arm64", topology.IOMMUPassthrough, []string{"smmu3.0x0000000011000000"}, []string{"iommu.passthrough=1"},
			map[string]string{"0009:01:00.0": "identity"}, Warn, []string{"IOMMU passthrough", "iommu.passthrough=1", "Grace (arm64)"}},
		{"grace off", "arm64", topology.IOMMUOff, nil, nil, nil, Warn, []string{"IOMMU off", "Grace (arm64)"}},
		{"grace unknown", "arm64", topology.IOMMUUnknown, []string{"smmu3.0x0000000011000000"}, nil, nil, Warn, []string{"could not be told"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := storageNode()
			n.CPU.Arch = c.arch
			n.Storage.GDS.IOMMU = topology.IOMMU{Mode: c.mode, Units: c.units, Cmdline: c.cmdline, Groups: groupsOf(c.groups)}
			want(t, runStorage(t, n, Options{}, "storage.iommu"), c.verdict, c.subs...)
		})
	}
	n := storageNode()
	n.CPU.Arch = "arm64"
	n.Storage.GDS.IOMMU.Mode = topology.IOMMUPassthrough
	if r := runStorage(t, n, Options{}, "storage.iommu"); !strings.Contains(r.Hint, "iommu.passthrough=1") {
		t.Errorf("grace passthrough hint %q", r.Hint)
	}
}

func TestStoragePorts(t *testing.T) {
	n := storageNode()
	n.NICs = append(n.NICs, topology.NIC{Name: "mlx5_2", RDMADevice: "mlx5_2", BusID: "0000:29:00.1", Fabric: topology.FabricRoCE,
		Role: topology.RoleStorage, Roles: []topology.Role{topology.RoleStorage},
		Ports: []topology.Port{{Port: 1, State: "ACTIVE", StateID: 4, PhysState: "LinkUp", PhysStateID: 5}}},
		// A compute NIC's down port is nic.port_state's, not this check's.
		topology.NIC{Name: "mlx5_0", BusID: "0000:18:00.1", Fabric: topology.FabricInfiniBand, Role: topology.RoleCompute,
			Roles: []topology.Role{topology.RoleCompute}, Ports: []topology.Port{{Port: 1, State: "DOWN", StateID: 1, PhysState: "Polling", PhysStateID: 2}}})
	want(t, runStorage(t, n, Options{}, "storage.ports"), Pass, "2 ports of 2 storage NICs up")

	n.NICs[0].Ports[0] = topology.Port{Port: 1, State: "DOWN", StateID: 1, PhysState: "Polling", PhysStateID: 2}
	n.Storage.Mounts = append(n.Storage.Mounts, topology.Mount{Target: "/lustre", FSType: "lustre", Kind: topology.MountLustre, NICs: []string{"mlx5_1"}})
	r := runStorage(t, n, Options{}, "storage.ports")
	want(t, r, Fail, "storage NIC mlx5_1 (0000:29:00.0) port 1 DOWN/Polling (carries /lustre)")
	if strings.Contains(r.Reason, "mlx5_0") || strings.Contains(r.Reason, "more") {
		t.Errorf("only mlx5_1 is down: %q", r.Reason)
	}

	// A storage NIC without RDMA ports: its netdev's operstate.
	n = storageNode()
	n.NICs[0].Ports = nil
	n.NICs[0].Interfaces = []topology.Interface{{Name: "enp41s0f1np1", OperState: "down"}}
	want(t, runStorage(t, n, Options{}, "storage.ports"), Fail, "storage NIC mlx5_1 (0000:29:00.0) netdev enp41s0f1np1 down")

	n.NICs[0].Interfaces[0].OperState = ""
	want(t, runStorage(t, n, Options{}, "storage.ports"), Skip, "no port state")
}

func TestStorageNVMeLink(t *testing.T) {
	n := storageNode()
	want(t, runStorage(t, n, Options{}, "storage.nvme-link"), Pass, "2 data NVMe drives at full PCIe width and speed")

	n.Storage.NVMe[1].Link.Width = 2
	want(t, runStorage(t, n, Options{}, "storage.nvme-link"), Fail, "nvme1 (0000:a9:00.0) PCIe link x2 32.0 GT/s, max x4 32.0 GT/s")

	n = storageNode()
	n.Storage.NVMe[0].Link.Speed = "16.0 GT/s PCIe"
	want(t, runStorage(t, n, Options{}, "storage.nvme-link"), Fail, "nvme0 (0000:19:00.0) PCIe link x4 16.0 GT/s, max x4 32.0 GT/s")

	// A system drive's narrow link is not a data drive's: with data
	// drives present, only they count.
	n = storageNode()
	n.Storage.NVMe = append(n.Storage.NVMe, topology.NVMe{Name: "nvme2", BusID: "0000:05:00.0", Use: topology.NVMeSystem,
		Link: topology.PCILink{Speed: "8.0 GT/s PCIe", Width: 2, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 4}},
		topology.NVMe{Name: "nvme3", BusID: "0000:06:00.0", Use: topology.NVMeUnmounted,
			Link: topology.PCILink{Speed: "8.0 GT/s PCIe", Width: 2, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 4}})
	want(t, runStorage(t, n, Options{}, "storage.nvme-link"), Pass, "2 data NVMe drives")

	// No data drive (the target is a network mount): the unmounted
	// drives are the data drives.
	for i := range n.Storage.NVMe[:2] {
		n.Storage.NVMe[i].Use = topology.NVMeOther
	}
	n.Storage.Mounts = []topology.Mount{{Target: "/lustre", FSType: "lustre", Kind: topology.MountLustre, NICs: []string{"mlx5_1"}}}
	want(t, runStorage(t, n, Options{}, "storage.nvme-link"), Fail, "nvme3 (0000:06:00.0) PCIe link x2 8.0 GT/s, max x4 16.0 GT/s")

	// Links not reported at all: nothing to check.
	n = storageNode()
	for i := range n.Storage.NVMe {
		n.Storage.NVMe[i].Link = topology.PCILink{}
	}
	want(t, runStorage(t, n, Options{}, "storage.nvme-link"), Skip, "no PCIe link")
}

func TestStorageLocality(t *testing.T) {
	n := storageNode()
	r := runStorage(t, n, Options{}, "storage.locality")
	want(t, r, Fail, "GPU 1 (0000:9a:00.0)'s nearest storage NIC mlx5_1 is across sockets (SYS)", "crosses the CPU interconnect",
		"classes: NODE GPU 0; SYS GPU 1", "rdma_dynamic_routing")
	if len(r.Details) != 3 || r.Details[2] != "GPU 1 (0000:9a:00.0): mlx5_1 SYS" {
		t.Errorf("details %q", r.Details)
	}

	n.Storage.Pairs[1].NICClass = topology.ClassNODE
	want(t, runStorage(t, n, Options{}, "storage.locality"), Pass, "2 GPUs with a storage NIC at NODE or better", "classes: NODE GPU 0,1",
		"note: GPU 0,1 share no PCIe switch with a storage NIC")

	// Every GPU behind a switch with a storage NIC: no bounce note.
	n.Storage.Pairs[0].NICClass = topology.ClassPIX
	n.Storage.Pairs[1].NICClass = topology.ClassPXB
	r = runStorage(t, n, Options{}, "storage.locality")
	want(t, r, Pass, "classes: PIX GPU 0; PXB GPU 1")
	if strings.Contains(r.Reason, "rdma_dynamic_routing") {
		t.Errorf("no GPU needs dynamic routing: %q", r.Reason)
	}

	// The selection narrows the GPUs judged.
	n.Storage.Pairs[1].NICClass = topology.ClassSYS
	want(t, runStorage(t, n, Options{GPUs: []int{0}}, "storage.locality"), Pass, "1 GPU with a storage NIC")

	// An unknown path is not passed.
	n.Storage.Pairs[1].NICClass = topology.ClassUnknown
	want(t, runStorage(t, n, Options{}, "storage.locality"), Warn, "GPU 1 (0000:9a:00.0)'s path to storage NIC mlx5_1 is unknown")
	n.Storage.Pairs = n.Storage.Pairs[:1]
	want(t, runStorage(t, n, Options{}, "storage.locality"), Warn, "GPU 1 (0000:9a:00.0) has no storage NIC pair")
}

// pretrain enforces the storage checks; finetune (with or without
// --multi-node) and inference turn their failures into warnings.
func TestStorageProfiles(t *testing.T) {
	n := storageNode() // storage.locality fails: GPU 1's storage NIC is SYS
	for _, c := range []struct {
		p       Profile
		multi   bool
		healthy bool
	}{{Pretrain, false, false}, {Pretrain, true, false}, {Finetune, false, true}, {Finetune, true, true}, {Inference, false, true}} {
		rep := run(t, n, Options{Root: "/nonexistent", Profile: c.p, MultiNode: c.multi, Only: storageIDs()})
		r := result(t, rep, "storage.locality")
		switch {
		case rep.Healthy != c.healthy:
			t.Errorf("%s multi=%v: healthy %v (%s)", c.p, c.multi, rep.Healthy, rep.Summary())
		case c.healthy && (r.Verdict != Warn || !r.Downgraded):
			t.Errorf("%s multi=%v: storage.locality %s downgraded=%v", c.p, c.multi, r.Verdict, r.Downgraded)
		case !c.healthy && (r.Verdict != Fail || r.Downgraded):
			t.Errorf("%s multi=%v: storage.locality %s downgraded=%v", c.p, c.multi, r.Verdict, r.Downgraded)
		}
		for _, o := range rep.Results {
			if o.ID != "storage.locality" && o.Verdict != Pass {
				t.Errorf("%s: %s %s %q", c.p, o.ID, o.Verdict, o.Reason)
			}
		}
	}
}

// A storage failure reaches the NHC line and the JSON report like any
// other check's.
func TestStorageOutputs(t *testing.T) {
	n := storageNode()
	bridge(&n, "0000:17:01.0").ACS = &topology.ACS{State: "on", Enabled: []string{"RR"}, Control: "0x0004"}
	rep := run(t, n, Options{Root: "/nonexistent", Only: []string{"storage.acs"}})
	if l := NHCLine(rep); l != "ERROR:  nhc:  Health check failed:  check_gpuaffinity:  storage.acs: bridge 0000:17:01.0 has ACS on (RR, control 0x0004) between GPU 0 (0000:18:00.0) ↔ nvme0 (0000:19:00.0)" {
		t.Errorf("nhc %q", l)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Healthy bool
		Results []struct{ ID, Verdict, Hint string }
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Healthy || len(got.Results) != 1 || got.Results[0].ID != "storage.acs" || got.Results[0].Verdict != "fail" || got.Results[0].Hint == "" {
		t.Errorf("json %s", b.String())
	}
	b.Reset()
	if err := WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "FAIL  storage.acs         bridge 0000:17:01.0") {
		t.Errorf("text %q", b.String())
	}
}

// groupsOf lists IOMMU group types in bus order, as discovery does.
func groupsOf(m map[string]string) []topology.IOMMUGroup {
	var out []topology.IOMMUGroup
	for b, t := range m {
		out = append(out, topology.IOMMUGroup{BusID: b, Type: t})
	}
	slices.SortFunc(out, func(a, b topology.IOMMUGroup) int { return strings.Compare(a.BusID, b.BusID) })
	return out
}

// The fixtures whose spec writes the storage checks' verdicts (expect:
// storage: checks, acs_bridges) give those verdicts under pretrain, and
// storage.acs names exactly the bridges the spec lists.
func TestStorageFixtureVerdicts(t *testing.T) {
	tested := 0
	for _, m := range fakesys.Machines() {
		e, err := fakesys.Expectation(m)
		if err != nil {
			t.Fatal(err)
		}
		if e.Storage == nil || len(e.Storage.Checks) == 0 {
			continue
		}
		tested++
		t.Run(m, func(t *testing.T) {
			n := discoverRoot(t, fakesystest.Root(t, m))
			rep := run(t, n, Options{Root: "/nonexistent", Only: storageIDs()})
			for _, id := range storageIDs() {
				w, ok := e.Storage.Checks[id]
				if !ok {
					t.Errorf("the spec gives no verdict for %s", id)
					continue
				}
				if r := result(t, rep, id); string(r.Verdict) != w {
					t.Errorf("%s = %s %q, want %s", id, r.Verdict, r.Reason, w)
				}
			}
			r := result(t, rep, "storage.acs")
			lines := r.Details
			if len(lines) == 0 {
				lines = []string{r.Reason}
			}
			var named []string
			for _, l := range lines {
				if f := strings.Fields(l); len(f) > 3 && f[0] == "bridge" && strings.Join(f[2:5], " ") == "has ACS on" {
					named = append(named, f[1])
				}
			}
			if strings.Join(named, " ") != strings.Join(e.Storage.ACSBridges, " ") {
				t.Errorf("storage.acs names bridges %q, want %q (%q)", named, e.Storage.ACSBridges, lines)
			}
		})
	}
	if tested == 0 {
		t.Skip("no fixture writes storage check verdicts yet")
	}
}
