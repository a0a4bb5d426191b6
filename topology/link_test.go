package topology

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
)

func intp(i int) *int { return &i }

// dev makes a PCI function; parent "" means on the root bus hb.
func dev(bus, parent, hb string, kind Kind, numa *int) PCIDevice {
	return PCIDevice{BusID: bus, Parent: parent, HostBridge: hb, Kind: kind, NUMANode: numa}
}

// The tree used below (one socket per NUMA node):
//
//	pci0000:15 (NUMA 0)                          pci0000:97 (NUMA 1)
//	 └ 15:01.0 RP                                  └ 97:01.0 RP
//	    └ 16:00.0 USP                                 └ 98:00.0 GPU3
//	       ├ 17:00.0 DSP ─ 18:00.0 GPU0
//	       ├ 17:01.0 DSP ─ 19:00.0 NIC a
//	       └ 17:02.0 DSP ─ 1a:00.0 USP ─ 1b:00.0 DSP ─ 1c:00.0 GPU1
//	 └ 15:02.0 RP ─ 20:00.0 GPU2 (same root bus as the first RP)
//	pci0000:30 (NUMA 0) ─ 30:00.0 NIC b (root bus device)
func testTree() []PCIDevice {
	n0, n1 := intp(0), intp(1)
	return []PCIDevice{
		dev("0000:15:01.0", "", "pci0000:15", KindRootPort, n0),
		dev("0000:15:02.0", "", "pci0000:15", KindRootPort, n0),
		dev("0000:16:00.0", "0000:15:01.0", "pci0000:15", KindSwitchUpstream, n0),
		dev("0000:17:00.0", "0000:16:00.0", "pci0000:15", KindSwitchDownstream, n0),
		dev("0000:17:01.0", "0000:16:00.0", "pci0000:15", KindSwitchDownstream, n0),
		dev("0000:17:02.0", "0000:16:00.0", "pci0000:15", KindSwitchDownstream, n0),
		dev("0000:18:00.0", "0000:17:00.0", "pci0000:15", KindGPU, n0),
		dev("0000:19:00.0", "0000:17:01.0", "pci0000:15", KindNIC, n0),
		dev("0000:1a:00.0", "0000:17:02.0", "pci0000:15", KindSwitchUpstream, n0),
		dev("0000:1b:00.0", "0000:1a:00.0", "pci0000:15", KindSwitchDownstream, n0),
		dev("0000:1c:00.0", "0000:1b:00.0", "pci0000:15", KindGPU, n0),
		dev("0000:20:00.0", "0000:15:02.0", "pci0000:15", KindGPU, n0),
		dev("0000:30:00.0", "", "pci0000:30", KindNIC, n0),
		dev("0000:97:01.0", "", "pci0000:97", KindRootPort, n1),
		dev("0000:98:00.0", "0000:97:01.0", "pci0000:97", KindGPU, n1),
	}
}

func TestClass(t *testing.T) {
	tr := newTree(testTree())
	for _, tc := range []struct {
		a, b string
		want Class
	}{
		{"0000:18:00.0", "0000:19:00.0", ClassPIX}, // two DSPs of one switch
		{"0000:1c:00.0", "0000:19:00.0", ClassPXB}, // two switches
		{"0000:18:00.0", "0000:1c:00.0", ClassPXB},
		{"0000:20:00.0", "0000:19:00.0", ClassPHB},  // two root ports of one root bus
		{"0000:18:00.0", "0000:30:00.0", ClassNODE}, // two root buses, one NUMA node
		{"0000:98:00.0", "0000:19:00.0", ClassSYS},
		{"0000:98:00.0", "0000:ff:00.0", ClassUnknown}, // not in the tree
	} {
		got, inferred := tr.class(tc.a, tc.b)
		if got != tc.want || inferred {
			t.Errorf("class(%s, %s) = %v (inferred %v), want %v", tc.a, tc.b, got, inferred, tc.want)
		}
		if back, _ := tr.class(tc.b, tc.a); back != got {
			t.Errorf("class is not symmetric for %s, %s: %v vs %v", tc.a, tc.b, got, back)
		}
	}
}

// numa_node -1 (VMs): local CPU lists decide, and the path says so.
func TestClassUnknownNUMA(t *testing.T) {
	a := PCIDevice{BusID: "0001:00:00.0", HostBridge: "pci0001:00", LocalCPUs: cpuset.Range(0, 47)}
	b := PCIDevice{BusID: "0002:00:00.0", HostBridge: "pci0002:00", LocalCPUs: cpuset.Range(48, 95)}
	c := PCIDevice{BusID: "0003:00:00.0", HostBridge: "pci0003:00", LocalCPUs: cpuset.Range(0, 47)}
	tr := newTree([]PCIDevice{a, b, c})
	if got, inf := tr.class(a.BusID, b.BusID); got != ClassSYS || !inf {
		t.Errorf("disjoint CPUs: %v %v", got, inf)
	}
	if got, inf := tr.class(a.BusID, c.BusID); got != ClassNODE || !inf {
		t.Errorf("same CPUs: %v %v", got, inf)
	}
}

// A parent loop in corrupt input must not hang.
func TestClassParentLoop(t *testing.T) {
	tr := newTree([]PCIDevice{
		{BusID: "0000:01:00.0", Parent: "0000:02:00.0", HostBridge: "pci0000:00"},
		{BusID: "0000:02:00.0", Parent: "0000:01:00.0", HostBridge: "pci0000:00"},
		{BusID: "0000:03:00.0", HostBridge: "pci0000:00"},
	})
	if got, _ := tr.class("0000:01:00.0", "0000:03:00.0"); got != ClassPHB {
		t.Errorf("got %v", got)
	}
}

func rdmaNIC(name, bus string, rate float64, fabric Fabric) NIC {
	return NIC{Name: name, RDMADevice: name, BusID: bus, Fabric: fabric, Ports: []Port{{Port: 1, RateGbps: rate}}}
}

func TestRolesAndPairs(t *testing.T) {
	n := Node{PCIDevices: testTree(), NUMANodes: []NUMANode{
		{ID: 0, Distances: []int{10, 21}, Socket: intp(0)}, {ID: 1, Distances: []int{21, 10}, Socket: intp(1)}}}
	n.GPUs = []GPU{{Index: 0, BusID: "0000:18:00.0"}, {Index: 1, BusID: "0000:1c:00.0"}, {Index: 2, BusID: "0000:98:00.0"}}
	n.NICs = []NIC{
		rdmaNIC("mlx5_0", "0000:19:00.0", 400, FabricInfiniBand),
		rdmaNIC("mlx5_1", "0000:30:00.0", 200, FabricRoCE), // storage: under no GPU's switch
	}
	Link(&n, RoleOptions{})
	if n.NICs[0].Role != RoleCompute || n.NICs[1].Role != RoleStorage {
		t.Fatalf("roles = %s, %s", n.NICs[0].Role, n.NICs[1].Role)
	}
	want := []Pair{
		{GPU: 0, NICs: []string{"mlx5_0"}, Class: ClassPIX, Decided: true},
		{GPU: 1, NICs: []string{"mlx5_0"}, Class: ClassPXB, Decided: true},
		// GPU 2 is on the other socket: the slower same-socket... there is
		// none; it gets the compute NIC across sockets, never the storage NIC.
		{GPU: 2, NICs: []string{"mlx5_0"}, Class: ClassSYS, Decided: true},
	}
	for i, w := range want {
		p := n.Pairs[i]
		if p.GPU != w.GPU || !slices.Equal(p.NICs, w.NICs) || p.Class != w.Class || p.Decided != w.Decided {
			t.Errorf("pair %d = %+v, want %+v", i, p, w)
		}
	}
	if !strings.Contains(n.Pairs[2].Note, "crosses sockets") {
		t.Errorf("SYS pair note = %q", n.Pairs[2].Note)
	}

	// Pinning: only the storage NIC is compute now.
	Link(&n, RoleOptions{ComputeNICs: []string{"0000:30:00.0"}, ExcludeNICs: []string{"nosuch"}})
	if n.NICs[0].Role != RoleStorage || n.NICs[1].Role != RoleCompute || n.Pairs[0].NICs[0] != "mlx5_1" {
		t.Errorf("pinned: roles %s %s, pair %+v", n.NICs[0].Role, n.NICs[1].Role, n.Pairs[0])
	}
	if !slices.ContainsFunc(n.Warnings, func(w string) bool { return strings.Contains(w, `"nosuch"`) }) {
		t.Errorf("a flag naming no NIC must warn: %v", n.Warnings)
	}
}

// Spreading: 2 GPUs over 1 NIC share it; 1 GPU over 4 NICs takes all;
// 4 GPUs tied at NODE over 4 NICs get one each, undecided.
func TestSpread(t *testing.T) {
	var devs []PCIDevice
	var gpus []GPU
	var nics []NIC
	for i := range 4 {
		hb := "pci000" + string(rune('1'+i)) + ":00"
		g := "000" + string(rune('1'+i)) + ":00:00.0"
		nb := "010" + string(rune('1'+i)) + ":00:00.0"
		devs = append(devs, PCIDevice{BusID: g, HostBridge: hb, NUMANode: intp(0)},
			PCIDevice{BusID: nb, HostBridge: "pci010" + string(rune('1'+i)) + ":00", NUMANode: intp(0)})
		gpus = append(gpus, GPU{Index: i, BusID: g})
		nics = append(nics, rdmaNIC("mlx5_ib"+string(rune('0'+i)), nb, 400, FabricInfiniBand))
	}
	n := Node{PCIDevices: devs, GPUs: gpus, NICs: nics}
	Link(&n, RoleOptions{})
	for i, p := range n.Pairs {
		if p.Class != ClassNODE || len(p.NICs) != 1 || p.NICs[0] != nics[i].Name || p.Decided {
			t.Errorf("pair %d = %+v", i, p)
		}
		if !strings.Contains(p.Note, "undecided") {
			t.Errorf("pair %d note = %q", i, p.Note)
		}
	}
	// One GPU, the same four NICs: it takes all four, nothing to decide.
	n.GPUs = gpus[:1]
	Link(&n, RoleOptions{})
	if p := n.Pairs[0]; len(p.NICs) != 4 || !p.Decided {
		t.Errorf("one GPU: %+v", p)
	}
}

func TestNoComputeNIC(t *testing.T) {
	n := Node{
		PCIDevices: []PCIDevice{{BusID: "0000:00:06.0", HostBridge: "pci0000:00"}, {BusID: "0000:00:03.0", HostBridge: "pci0000:00"}},
		GPUs:       []GPU{{Index: 0, BusID: "0000:00:06.0"}},
		NICs:       []NIC{{Name: "eth0", BusID: "0000:00:03.0", Fabric: FabricEthernet, Netdevs: []string{"eth0"}}},
	}
	Link(&n, RoleOptions{})
	if n.NICs[0].Role != RoleOther || len(n.Pairs) != 1 || len(n.Pairs[0].NICs) != 0 || n.Pairs[0].Decided {
		t.Fatalf("got roles %+v pairs %+v", n.NICs, n.Pairs)
	}
	if n.Paths[0].Class != ClassPHB {
		t.Errorf("virtio NIC and GPU on one root bus: %v", n.Paths[0].Class)
	}
}

func TestNVLinksBetween(t *testing.T) {
	sw := func(k int) []NVLink {
		var l []NVLink
		for i := range k {
			l = append(l, NVLink{Link: i, Active: true, RemoteType: RemoteNVSwitch})
		}
		return l
	}
	a := GPU{BusID: "0000:18:00.0", NVLinks: sw(18)}
	b := GPU{BusID: "0000:2a:00.0", NVLinks: append(sw(17), NVLink{Link: 17, Active: false, RemoteType: RemoteNVSwitch})}
	if got := nvlinksBetween(a, b); got != 17 {
		t.Errorf("NVSwitch: got NV%d, want NV17 (one link down)", got)
	}
	c := GPU{BusID: "0000:07:00.0", NVLinks: []NVLink{{Active: true, RemoteType: RemoteGPU, RemoteBusID: "0000:0F:00.0"}, {Active: true, RemoteType: RemoteGPU, RemoteBusID: "0000:0f:00.0"}}}
	d := GPU{BusID: "0000:0f:00.0"}
	if got := nvlinksBetween(c, d); got != 2 {
		t.Errorf("direct: got NV%d, want NV2", got)
	}
}

func TestNCCLBusID(t *testing.T) {
	for _, tc := range []struct {
		bus    string
		fabric Fabric
		want   string
	}{
		{"0000:29:00.1", FabricRoCE, "0000:29:00.0"},       // second port of a dual-port adapter
		{"0101:00:00.0", FabricInfiniBand, "0101:00:00.0"}, // Azure VF
		{"10001:02:03.4", FabricInfiniBand, "10001:02:00.0"},
		{"0000:10:1b.0", FabricEFA, "0000:10:1b.0"}, // aws-ofi-nccl keeps the function
		{"0000:06:00.1", FabricEthernet, "0000:06:00.1"},
	} {
		if got := (NIC{BusID: tc.bus, Fabric: tc.fabric}).NCCLBusID(); got != tc.want {
			t.Errorf("%s (%s): %s, want %s", tc.bus, tc.fabric, got, tc.want)
		}
	}
}
