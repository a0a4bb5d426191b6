package render

import (
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The fixtures are Node values written by hand: the renderers read only
// the Node, so no fake sysfs is needed. Each one exists for a reason given
// in its comment.

func intp(i int) *int { return &i }

// fixtures lists every Node the golden and syntax tests render.
var fixtures = []struct {
	name string
	node func() topology.Node
}{
	{"switch", localized(switchNode)},
	{"vm", localized(vmNode)},
	{"empty", localized(emptyNode)},
	{"hostile", localized(hostileNode)},
}

// localized resolves the GPUs' Locality of a hand-built node, as
// discovery does (topology.Link): renderers read it, never re-derive it.
func localized(build func() topology.Node) func() topology.Node {
	return func() topology.Node {
		n := build()
		topology.ResolveLocality(&n)
		return n
	}
}

// switchNode is a two-socket bare-metal machine with one PCIe switch per
// socket, each holding one GPU and one InfiniBand NIC (PIX), the GPUs
// joined through NVSwitches:
//
//	pci0000:15 (NUMA 0)                       pci0000:97 (NUMA 1)
//	└─ 0000:15:01.0 root port                 └─ 0000:97:01.0 root port
//	   └─ 0000:16:00.0 switch (usp)              └─ 0000:98:00.0 switch (usp)
//	      ├─ 0000:17:00.0 ─ 0000:18:00.0 GPU0       ├─ 0000:99:00.0 ─ 0000:9a:00.0 GPU1
//	      └─ 0000:17:01.0 ─ 0000:19:00.0 mlx5_0     └─ 0000:99:01.0 ─ 0000:9b:00.0 mlx5_1
//
// plus the host bridge's own function 0000:15:00.0, which must not be
// drawn, and an NVMe drive (nvme0) behind root port 0000:15:02.0 holding
// /raid: the one data drive, so both GPUs' nearest (PHB for GPU0 on the
// same host bridge, SYS for GPU1 across the sockets). No NIC is a storage
// NIC. nvidia-fs is loaded; P2PDMA is not possible (CUDA 12.4, the
// proprietary module, kernel 5.15); the IOMMU is off.
func switchNode() topology.Node {
	pci := func(bus, parent, hb string, kind topology.Kind, numa int) topology.PCIDevice {
		return topology.PCIDevice{BusID: bus, Parent: parent, HostBridge: hb, Kind: kind,
			NUMANode: intp(numa), LocalCPUs: cpuset.Range(numa*16, numa*16+15)}
	}
	nvswitchLinks := func() []topology.NVLink {
		var l []topology.NVLink
		for i := range 4 {
			l = append(l, topology.NVLink{Link: i, Active: true, Version: 4,
				RemoteBusID: "0000:c0:00.0", RemoteType: topology.RemoteNVSwitch})
		}
		return l
	}
	gpu := func(index int, bus string, numa int) topology.GPU {
		return topology.GPU{Index: index, BusID: bus, NVMLIndex: intp(index), State: topology.GPUOK,
			Vendor: "0x10de", Device: "0x2330", Model: "NVIDIA H100 80GB HBM3",
			UUID: "GPU-0000000" + string(rune('0'+index)), Minor: intp(index), NUMANode: intp(numa),
			LocalCPUs: cpuset.Range(numa*16, numa*16+15), NVMLCPUAffinity: cpuset.Range(numa*16, numa*16+15),
			PCIe:          topology.PCIe{Gen: 5, Width: 16, MaxGen: 5, MaxWidth: 16},
			NVLinkVisible: true, NVLinks: nvswitchLinks()}
	}
	nic := func(name, netdev, bus string, numa int) topology.NIC {
		return topology.NIC{Name: name, RDMADevice: name, Netdevs: []string{netdev}, BusID: bus,
			Vendor: "0x15b3", Device: "0x1021", Driver: "mlx5_core", Fabric: topology.FabricInfiniBand,
			Role: topology.RoleCompute, Roles: []topology.Role{topology.RoleCompute}, RoleReason: "GPU-side NIC: nearest NIC of GPU 0 (PIX)",
			NUMANode: intp(numa), LocalCPUs: cpuset.Range(numa*16, numa*16+15),
			FirmwareVersion: "28.39.1002", NodeGUID: "a088:c203:0000:0001",
			Ports: []topology.Port{{Port: 1, State: "ACTIVE", StateID: 4, PhysState: "LinkUp", PhysStateID: 5,
				RateGbps: 400, LinkLayer: "InfiniBand", Netdev: netdev}},
			Interfaces: []topology.Interface{{Name: netdev, OperState: "up", MTU: 4092}}}
	}
	return topology.Node{
		Schema:   topology.Schema,
		Hostname: "dgx-01",
		Platform: topology.Platform{Cloud: topology.CloudBareMetal, SysVendor: "NVIDIA", ProductName: "DGXH100"},
		CPU: topology.CPUInfo{Online: cpuset.Range(0, 31), Allowed: cpuset.Range(0, 31),
			Sockets: []topology.Socket{
				{ID: 0, CPUs: cpuset.Range(0, 15), NUMANodes: []int{0}},
				{ID: 1, CPUs: cpuset.Range(16, 31), NUMANodes: []int{1}},
			},
			Vendor: "GenuineIntel", ModelName: "Intel(R) Xeon(R) Platinum 8480C", Family: 6, Model: 143},
		NUMANodes: []topology.NUMANode{
			{ID: 0, CPUs: cpuset.Range(0, 15), MemoryBytes: 1 << 40, Distances: []int{10, 21}, Socket: intp(0)},
			{ID: 1, CPUs: cpuset.Range(16, 31), MemoryBytes: 1 << 40, Distances: []int{21, 10}, Socket: intp(1)},
		},
		PCIDevices: []topology.PCIDevice{
			pci("0000:15:00.0", "", "pci0000:15", topology.KindHostBridge, 0),
			pci("0000:15:01.0", "", "pci0000:15", topology.KindRootPort, 0),
			pci("0000:15:02.0", "", "pci0000:15", topology.KindRootPort, 0),
			pci("0000:16:00.0", "0000:15:01.0", "pci0000:15", topology.KindSwitchUpstream, 0),
			pci("0000:17:00.0", "0000:16:00.0", "pci0000:15", topology.KindSwitchDownstream, 0),
			pci("0000:17:01.0", "0000:16:00.0", "pci0000:15", topology.KindSwitchDownstream, 0),
			pci("0000:18:00.0", "0000:17:00.0", "pci0000:15", topology.KindGPU, 0),
			pci("0000:19:00.0", "0000:17:01.0", "pci0000:15", topology.KindNIC, 0),
			pci("0000:1a:00.0", "0000:15:02.0", "pci0000:15", topology.KindOther, 0),
			pci("0000:97:01.0", "", "pci0000:97", topology.KindRootPort, 1),
			pci("0000:98:00.0", "0000:97:01.0", "pci0000:97", topology.KindSwitchUpstream, 1),
			pci("0000:99:00.0", "0000:98:00.0", "pci0000:97", topology.KindSwitchDownstream, 1),
			pci("0000:99:01.0", "0000:98:00.0", "pci0000:97", topology.KindSwitchDownstream, 1),
			pci("0000:9a:00.0", "0000:99:00.0", "pci0000:97", topology.KindGPU, 1),
			pci("0000:9b:00.0", "0000:99:01.0", "pci0000:97", topology.KindNIC, 1),
		},
		GPUs: []topology.GPU{gpu(0, "0000:18:00.0", 0), gpu(1, "0000:9a:00.0", 1)},
		NICs: []topology.NIC{
			nic("mlx5_0", "ibp25s0", "0000:19:00.0", 0),
			nic("mlx5_1", "ibp155s0", "0000:9b:00.0", 1),
		},
		NVML:   topology.NVMLInfo{Source: "live", DriverVersion: "550.54.15", NVMLVersion: "12.550.54.15", CUDAVersion: 12040},
		Kernel: topology.KernelInfo{Release: "5.15.0-1042-nvidia"},
		Paths: []topology.Path{
			{GPU: 0, NIC: "mlx5_0", Class: topology.ClassPIX},
			{GPU: 0, NIC: "mlx5_1", Class: topology.ClassSYS},
			{GPU: 1, NIC: "mlx5_0", Class: topology.ClassSYS},
			{GPU: 1, NIC: "mlx5_1", Class: topology.ClassPIX},
		},
		GPUPaths: []topology.GPUPath{{A: 0, B: 1, Class: topology.ClassSYS, NVLinks: 4}},
		Pairs: []topology.Pair{
			{GPU: 0, NICs: []string{"mlx5_0"}, Class: topology.ClassPIX, Decided: true},
			{GPU: 1, NICs: []string{"mlx5_1"}, Class: topology.ClassPIX, Decided: true},
		},
		Storage: topology.Storage{
			NVMe: []topology.NVMe{{Name: "nvme0", BusID: "0000:1a:00.0", Transport: "pcie",
				Model: "SAMSUNG MZWLJ3T8HBLS-00007", Serial: "S4YPNA0T123456", Firmware: "EPK9GB5Q", State: "live",
				NUMANode: intp(0), Link: topology.PCILink{Speed: "16.0 GT/s PCIe", Width: 4, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 4},
				Namespaces: []topology.NVMeNamespace{{Block: "nvme0n1", SizeBytes: 3840755982336}}, Use: topology.NVMeData}},
			Mounts: []topology.Mount{{Source: "/dev/md0", Target: "/raid", FSType: "xfs", Kind: topology.MountNVMe,
				Options: []string{"rw", "relatime"}, Devices: []string{"nvme0"}, NICs: []string{}}},
			GDS: topology.GDS{NvidiaFS: true, NvidiaFSVersion: "2.17", OpenKernelModule: new(bool),
				// What topology.Link's decideP2PDMA says of this node, in its order.
				P2PDMA: topology.P2PDMA{Missing: []string{"CUDA driver 12.4 < 12.8",
					"the proprietary NVIDIA kernel module is loaded (P2PDMA needs the open one)",
					"kernel 5.15.0-1042-nvidia < 6.2"}},
				IOMMU: topology.IOMMU{Mode: topology.IOMMUOff, Units: []string{}, Cmdline: []string{}}},
			Pairs: []topology.StoragePair{
				{GPU: 0, NVMe: []string{"nvme0"}, NVMeClass: topology.ClassPHB, NICs: []string{}},
				{GPU: 1, NVMe: []string{"nvme0"}, NVMeClass: topology.ClassSYS, NICs: []string{}},
			},
		},
	}
}

// vmNode is a cloud VM that hides the PCIe switches: every GPU and NIC sits
// alone on its own host bridge, numa_node is -1 everywhere (so locality
// was inferred from CPU lists: NODE*), NVLinks are invisible, the
// front-end NIC is on VMBus (no PCI function), and the two compute NICs tie
// at NODE for both GPUs, so both pairs are undecided. GPU1's local_cpulist
// is empty, so its CPU affinity comes from NVML.
func vmNode() topology.Node {
	ib := func(name, netdev, bus string) topology.NIC {
		return topology.NIC{Name: name, RDMADevice: name, Netdevs: []string{netdev}, BusID: bus,
			Vendor: "0x15b3", Device: "0x101e", Driver: "mlx5_core", Fabric: topology.FabricInfiniBand,
			Role: topology.RoleCompute, Roles: []topology.Role{topology.RoleCompute}, RoleReason: "GPU-side NIC: nearest NIC of GPU 0 (PIX)",
			LocalCPUs: cpuset.Range(0, 15), Virtual: true,
			Ports: []topology.Port{{Port: 1, State: "ACTIVE", StateID: 4, PhysState: "LinkUp", PhysStateID: 5,
				RateGbps: 400, LinkLayer: "InfiniBand"}}}
	}
	const undecided = "2 compute NICs tie at NODE: spread in GPU index / NIC bus order"
	return topology.Node{
		Schema:   topology.Schema,
		Hostname: "vm-h200",
		Platform: topology.Platform{Cloud: topology.CloudAzure, InstanceType: "Standard_ND96isr_H200_v5",
			SysVendor: "Microsoft Corporation", ProductName: "Virtual Machine"},
		CPU: topology.CPUInfo{Online: cpuset.Range(0, 15), Allowed: cpuset.Range(0, 15),
			Vendor: "GenuineIntel", ModelName: "Intel(R) Xeon(R) Processor"},
		NUMANodes: []topology.NUMANode{
			{ID: 0, CPUs: cpuset.Range(0, 15), MemoryBytes: 4443 << 20, Distances: []int{10}, Socket: intp(0)},
		},
		PCIDevices: []topology.PCIDevice{
			{BusID: "0001:00:00.0", HostBridge: "pci0001:00", Kind: topology.KindGPU, LocalCPUs: cpuset.Range(0, 15)},
			{BusID: "0002:00:00.0", HostBridge: "pci0002:00", Kind: topology.KindGPU},
			{BusID: "0101:00:00.0", HostBridge: "pci0101:00", Kind: topology.KindNIC, LocalCPUs: cpuset.Range(0, 15)},
			{BusID: "0102:00:00.0", HostBridge: "pci0102:00", Kind: topology.KindNIC, LocalCPUs: cpuset.Range(0, 15)},
		},
		GPUs: []topology.GPU{
			{Index: 0, BusID: "0001:00:00.0", NVMLIndex: intp(0), State: topology.GPUOK, Vendor: "0x10de",
				Device: "0x2335", Model: "NVIDIA H200", LocalCPUs: cpuset.Range(0, 15),
				NVMLCPUAffinity: cpuset.Range(0, 15), PCIe: topology.PCIe{Gen: 5, Width: 16, MaxGen: 5, MaxWidth: 16}},
			{Index: 1, BusID: "0002:00:00.0", NVMLIndex: intp(1), State: topology.GPUOK, Vendor: "0x10de",
				Device: "0x2335", Model: "NVIDIA H200", NVMLCPUAffinity: cpuset.Range(0, 15),
				PCIe: topology.PCIe{Gen: 5, Width: 16, MaxGen: 5, MaxWidth: 16}},
		},
		NICs: []topology.NIC{
			{Name: "eth0", Netdevs: []string{"eth0"}, Driver: "hv_netvsc", Fabric: topology.FabricEthernet,
				Role: topology.RoleFrontend, Roles: []topology.Role{topology.RoleFrontend}, RoleReason: "holds the default route (eth0)",
				Interfaces: []topology.Interface{{Name: "eth0", OperState: "up", MTU: 1500, SpeedMbps: 50000}}},
			ib("mlx5_0", "ibP257s1", "0101:00:00.0"),
			ib("mlx5_1", "ibP258s2", "0102:00:00.0"),
		},
		NVML: topology.NVMLInfo{Source: "replay", DriverVersion: "580.159.04", CUDAVersion: 13000},
		Paths: []topology.Path{
			{GPU: 0, NIC: "eth0"},
			{GPU: 0, NIC: "mlx5_0", Class: topology.ClassNODE, Inferred: true},
			{GPU: 0, NIC: "mlx5_1", Class: topology.ClassNODE, Inferred: true},
			{GPU: 1, NIC: "eth0"},
			{GPU: 1, NIC: "mlx5_0", Class: topology.ClassNODE, Inferred: true},
			{GPU: 1, NIC: "mlx5_1", Class: topology.ClassNODE, Inferred: true},
		},
		GPUPaths: []topology.GPUPath{{A: 0, B: 1, Class: topology.ClassNODE}},
		Pairs: []topology.Pair{
			{GPU: 0, NICs: []string{"mlx5_0"}, Class: topology.ClassNODE, Note: undecided},
			{GPU: 1, NICs: []string{"mlx5_1"}, Class: topology.ClassNODE, Note: undecided},
		},
		Warnings: []string{
			"numa_node of 0001:00:00.0 is -1: locality inferred from local_cpulist",
			"NVML GetNvLinkState: ERROR_NOT_SUPPORTED on every link of every GPU",
		},
	}
}

// emptyNode is a machine with no GPU and no NIC and nothing else known:
// every list is nil.
func emptyNode() topology.Node {
	return topology.Node{Schema: topology.Schema, Platform: topology.Platform{Cloud: topology.CloudUnknown},
		NVML: topology.NVMLInfo{Source: "none", Error: "ERROR_LIBRARY_NOT_FOUND"}}
}

// hostileNode carries names that try to break every format: quotes,
// braces, semicolons, angle brackets, backslashes (a trailing one would
// escape DOT's closing quote), HTML entities, Mermaid keywords and arrows,
// tabs, newlines and terminal escapes.
func hostileNode() topology.Node {
	return topology.Node{
		Schema:   topology.Schema,
		Hostname: `host"; rankdir=LR; x="\`,
		Platform: topology.Platform{Cloud: topology.CloudBareMetal, ProductName: "box\n}"},
		NUMANodes: []topology.NUMANode{
			{ID: 0, CPUs: cpuset.Range(0, 3), MemoryBytes: 8 << 30, Distances: []int{10}, Socket: intp(0)},
			{ID: 1, MemoryBytes: 96 << 30, Distances: []int{10}}, // memory only
		},
		PCIDevices: []topology.PCIDevice{
			{BusID: "0000:00:01.0", HostBridge: "pci0000:00", Kind: topology.KindRootPort, NUMANode: intp(0)},
			{BusID: "0000:01:00.0", Parent: "0000:00:01.0", HostBridge: "pci0000:00", Kind: topology.KindGPU, NUMANode: intp(0)},
			{BusID: "0000:02:00.0", Parent: "0000:00:01.0", HostBridge: "pci0000:00", Kind: topology.KindNIC, NUMANode: intp(0)},
			{BusID: "0000:03:00.0", Parent: "gone\"}", HostBridge: `pci"0000:}`, Kind: topology.KindNIC},
		},
		GPUs: []topology.GPU{{Index: 0, BusID: "0000:01:00.0", State: topology.GPUNoNVML,
			Model: `NVIDIA "H100" {x} <b>&amp; \`, NUMANode: intp(0), LocalCPUs: cpuset.Range(0, 3)}},
		NICs: []topology.NIC{
			{Name: `eth"0;}`, Netdevs: []string{`a b<c>`}, BusID: "0000:02:00.0",
				Fabric: topology.FabricEthernet, Role: topology.RoleCompute, Roles: []topology.Role{topology.RoleCompute}, RoleReason: "named by --compute-nics"},
			{Name: `a b<c>`, RDMADevice: `a b<c>`, Netdevs: []string{`x\`, "tab\there"}, BusID: "0000:02:00.0",
				Fabric: topology.FabricRoCE, Role: topology.RoleStorage, Roles: []topology.Role{topology.RoleStorage}},
			{Name: "end", Netdevs: []string{"#1|-->", "`md`"}, BusID: "0000:03:00.0", Fabric: topology.FabricEthernet,
				Role: topology.RoleOther, Roles: []topology.Role{topology.RoleOther}},
		},
		Paths: []topology.Path{
			{GPU: 0, NIC: `eth"0;}`, Class: topology.ClassPIX},
			{GPU: 0, NIC: `a b<c>`, Class: topology.ClassPIX},
			{GPU: 0, NIC: "end", Class: topology.ClassNODE},
		},
		Pairs: []topology.Pair{{GPU: 0, NICs: []string{`eth"0;}`}, Class: topology.ClassPIX, Decided: true,
			Note: `note with "quotes" & <tags>`}},
		// An NVMe over TCP controller (no PCI function, so not drawn) and a
		// mount whose names carry tabs, quotes and escapes.
		Storage: topology.Storage{
			NVMe: []topology.NVMe{{Name: "nvme1", Transport: "tcp", Model: "evil\nmodel\t\x1b[1m", Use: topology.NVMeUnmounted}},
			Mounts: []topology.Mount{{Source: `srv:/"x"`, Target: "/mnt/a\tb <c>", FSType: "nfs4", Kind: topology.MountNFS,
				NICs: []string{`a b<c>`}, NICsReason: "holds clientaddr=\x1b[31m"}},
			GDS:   topology.GDS{IOMMU: topology.IOMMU{Mode: topology.IOMMUUnknown, Cmdline: []string{"iommu=\"pt\""}}},
			Pairs: []topology.StoragePair{{GPU: 0, NICs: []string{`a b<c>`}, NICClass: topology.ClassPIX, Note: "note\twith tab"}},
		},
		Warnings: []string{"line1\nline2\t\x1b[31mred\x1b[0m", "bad utf8 \xff\xfe end"},
	}
}
