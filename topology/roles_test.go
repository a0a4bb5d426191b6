package topology

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// rails builds a two-socket node with one PCIe switch per GPU: GPU i at
// 0000:(r+3):00.0 below root bus r = 0x10*(i+1), switch USP r+1:00.0 and
// DSPs on bus r+2; GPUs 0, 1 on NUMA 0, 2, 3 on NUMA 1. Devices are
// added to a GPU's switch or on root ports of their own with the methods
// below.
type rails struct {
	n    Node
	next map[int]int // root bus -> next free DSP device number
}

func newRails(gpus int) *rails {
	r := &rails{next: map[int]int{}}
	r.n.NUMANodes = []NUMANode{
		{ID: 0, Distances: []int{10, 21}, Socket: intp(0)},
		{ID: 1, Distances: []int{21, 10}, Socket: intp(1)},
	}
	for i := range gpus {
		root := 0x10 * (i + 1)
		numa := intp(i / 2)
		hb := fmt.Sprintf("pci0000:%02x", root)
		r.n.PCIDevices = append(r.n.PCIDevices,
			PCIDevice{BusID: fmt.Sprintf("0000:%02x:01.0", root), HostBridge: hb, Kind: KindRootPort, NUMANode: numa},
			PCIDevice{BusID: fmt.Sprintf("0000:%02x:00.0", root+1), Parent: fmt.Sprintf("0000:%02x:01.0", root), HostBridge: hb, Kind: KindSwitchUpstream, NUMANode: numa})
		gpu := r.onSwitch(i, KindGPU)
		r.n.GPUs = append(r.n.GPUs, GPU{Index: i, BusID: gpu, NUMANode: numa})
	}
	return r
}

// onSwitch adds a device below a new DSP of GPU i's switch; its bus id.
func (r *rails) onSwitch(gpu int, kind Kind) string {
	root := 0x10 * (gpu + 1)
	k := r.next[root]
	r.next[root]++
	hb := fmt.Sprintf("pci0000:%02x", root)
	numa := intp(gpu / 2)
	dsp := fmt.Sprintf("0000:%02x:%02x.0", root+2, k)
	dev := fmt.Sprintf("0000:%02x:00.0", root+3+k)
	r.n.PCIDevices = append(r.n.PCIDevices,
		PCIDevice{BusID: dsp, Parent: fmt.Sprintf("0000:%02x:00.0", root+1), HostBridge: hb, Kind: KindSwitchDownstream, NUMANode: numa},
		PCIDevice{BusID: dev, Parent: dsp, HostBridge: hb, Kind: kind, NUMANode: numa, Link: PCILink{Speed: "32.0 GT/s PCIe", Width: 16}})
	return dev
}

// ownRoot adds functions fn (".0", ".1") of one adapter on a root port of
// root bus bus; their bus ids.
func (r *rails) ownRoot(bus, numa int, fns ...int) []string {
	hb := fmt.Sprintf("pci0000:%02x", bus)
	rp := fmt.Sprintf("0000:%02x:01.0", bus)
	r.n.PCIDevices = append(r.n.PCIDevices, PCIDevice{BusID: rp, HostBridge: hb, Kind: KindRootPort, NUMANode: intp(numa)})
	var out []string
	for _, f := range fns {
		id := fmt.Sprintf("0000:%02x:00.%d", bus+1, f)
		r.n.PCIDevices = append(r.n.PCIDevices, PCIDevice{BusID: id, Parent: rp, HostBridge: hb, Kind: KindNIC, NUMANode: intp(numa),
			Link: PCILink{Speed: "32.0 GT/s PCIe", Width: 16}})
		out = append(out, id)
	}
	return out
}

// nic adds an RDMA NIC with one ACTIVE port.
func (r *rails) nic(name, bus, device string, fabric Fabric, rate float64) *NIC {
	ll := "InfiniBand"
	if fabric == FabricRoCE {
		ll = "Ethernet"
	}
	var numa *int
	for _, d := range r.n.PCIDevices {
		if d.BusID == bus {
			numa = d.NUMANode
		}
	}
	r.n.NICs = append(r.n.NICs, NIC{Name: name, RDMADevice: name, BusID: bus, Vendor: "0x15b3", Device: device, Fabric: fabric, NUMANode: numa,
		Ports:   []Port{{Port: 1, State: "ACTIVE", StateID: 4, PhysState: "LinkUp", PhysStateID: 5, RateGbps: rate, LinkLayer: ll}},
		Netdevs: []string{name + "-net"}, Interfaces: []Interface{{Name: name + "-net", OperState: "up"}}})
	return &r.n.NICs[len(r.n.NICs)-1]
}

// railsCompute gives each GPU a single-port ConnectX-7 NDR NIC c<i> on its
// switch.
func railsCompute(gpus int) *rails {
	r := newRails(gpus)
	for i := range gpus {
		r.nic(fmt.Sprintf("c%d", i), r.onSwitch(i, KindNIC), "0x1021", FabricInfiniBand, 400)
	}
	return r
}

func (r *rails) link(t *testing.T, opts RoleOptions) *Node {
	t.Helper()
	slices.SortFunc(r.n.NICs, func(a, b NIC) int { return strings.Compare(a.BusID, b.BusID) })
	Link(&r.n, opts)
	return &r.n
}

func roleOf(t *testing.T, n *Node, name string) NIC {
	t.Helper()
	for _, nic := range n.NICs {
		if nic.Name == name {
			return nic
		}
	}
	t.Fatalf("no NIC %s", name)
	return NIC{}
}

func wantRoles(t *testing.T, n *Node, want map[string]Role) {
	t.Helper()
	for name, r := range want {
		if nic := roleOf(t, n, name); nic.Role != r {
			t.Errorf("%s: role %s (%s), want %s", name, nic.Role, nic.RoleReason, r)
		}
	}
}

func wantPair(t *testing.T, n *Node, gpu int, nics ...string) Pair {
	t.Helper()
	for _, p := range n.Pairs {
		if p.GPU == gpu {
			if !slices.Equal(p.NICs, nics) {
				t.Errorf("GPU %d: NICs %v, want %v (note %q)", gpu, p.NICs, nics, p.Note)
			}
			return p
		}
	}
	t.Fatalf("no pair for GPU %d", gpu)
	return Pair{}
}

// A storage card of another chip behind GPU 0's switch (PIX to it, as the
// CX-6 Dx ports of kvcache-ai/Mooncake#2039): the compute kind serves all
// four GPUs, the storage kind one; GPU 0 keeps its own compute NIC only.
func TestRolesStorageBehindAGPUSwitch(t *testing.T) {
	r := railsCompute(4)
	r.nic("s0", r.onSwitch(0, KindNIC), "0x101d", FabricRoCE, 200)
	n := r.link(t, RoleOptions{})
	wantRoles(t, n, map[string]Role{"c0": RoleCompute, "c3": RoleCompute, "s0": RoleStorage})
	if why := roleOf(t, n, "s0").RoleReason; !strings.Contains(why, "another kind of NIC serves every GPU") {
		t.Errorf("s0 reason %q", why)
	}
	wantPair(t, n, 0, "c0")
}

// GPUs 0, 1 have single-port ConnectX-7, GPUs 2, 3 a dual-port card: two
// kinds of one fabric that serve different GPUs are one compute fabric.
func TestRolesKindsJoin(t *testing.T) {
	r := newRails(4)
	r.nic("c0", r.onSwitch(0, KindNIC), "0x1021", FabricInfiniBand, 400)
	r.nic("c1", r.onSwitch(1, KindNIC), "0x1021", FabricInfiniBand, 400)
	for g := 2; g < 4; g++ {
		bus := r.onSwitch(g, KindNIC)
		r.nic(fmt.Sprintf("d%da", g), bus, "0x1021", FabricInfiniBand, 200)
		second := strings.TrimSuffix(bus, ".0") + ".1"
		r.n.PCIDevices = append(r.n.PCIDevices, PCIDevice{BusID: second, Parent: r.n.PCIDevices[len(r.n.PCIDevices)-2].BusID,
			HostBridge: r.n.PCIDevices[len(r.n.PCIDevices)-1].HostBridge, Kind: KindNIC, NUMANode: intp(1)})
		r.nic(fmt.Sprintf("d%db", g), second, "0x1021", FabricInfiniBand, 200)
	}
	n := r.link(t, RoleOptions{})
	wantRoles(t, n, map[string]Role{"c0": RoleCompute, "c1": RoleCompute, "d2a": RoleCompute, "d2b": RoleCompute, "d3b": RoleCompute})
	wantPair(t, n, 2, "d2a", "d2b")
	wantPair(t, n, 0, "c0")
	// The dual-port kind has more NICs, so it leads; the single-port one
	// joins it for the GPUs it leaves without a NIC.
	if why := roleOf(t, n, "c0").RoleReason; !strings.Contains(why, "leave without one") {
		t.Errorf("c0 reason %q", why)
	}
}

// A NIC of the compute NICs' very kind on a root port of its own is no
// GPU's nearest: storage.
func TestRolesSameKindAwayFromGPUs(t *testing.T) {
	r := railsCompute(4)
	r.nic("s0", r.ownRoot(0x80, 0, 0)[0], "0x1021", FabricInfiniBand, 400)
	n := r.link(t, RoleOptions{})
	wantRoles(t, n, map[string]Role{"c0": RoleCompute, "s0": RoleStorage})
	if why := roleOf(t, n, "s0").RoleReason; !strings.Contains(why, "no GPU's nearest NIC") {
		t.Errorf("s0 reason %q", why)
	}
	for i := range 4 {
		wantPair(t, n, i, fmt.Sprintf("c%d", i))
	}
}

// BasePOD's storage cards: port 1 InfiniBand storage, port 2 Ethernet,
// both cards' port 2 bonded as bond0, which holds the default route.
func TestRolesBondedFrontEnd(t *testing.T) {
	r := railsCompute(4)
	for k, bus := range []int{0x80, 0xa0} {
		ids := r.ownRoot(bus, k, 0, 1)
		r.nic(fmt.Sprintf("ib%d", k), ids[0], "0x1021", FabricInfiniBand, 400)
		e := r.nic(fmt.Sprintf("eth%d", k), ids[1], "0x1021", FabricRoCE, 400)
		e.Interfaces[0].Master, e.Interfaces[0].MasterKind = "bond0", "bond"
	}
	r.n.DefaultRouteInterface = "bond0"
	n := r.link(t, RoleOptions{})
	wantRoles(t, n, map[string]Role{"ib0": RoleStorage, "ib1": RoleStorage, "eth0": RoleFrontend, "eth1": RoleFrontend, "c2": RoleCompute})
	for _, name := range []string{"eth0", "eth1"} {
		nic := roleOf(t, n, name)
		if !slices.Equal(nic.Roles, []Role{RoleFrontend, RoleStorage}) || !nic.HasRole(RoleStorage) || !strings.Contains(nic.RoleReason, "bond0") {
			t.Errorf("%s: roles %v, reason %q", name, nic.Roles, nic.RoleReason)
		}
	}
	if nic := roleOf(t, n, "ib0"); !slices.Equal(nic.Roles, []Role{RoleStorage}) {
		t.Errorf("ib0 roles %v", nic.Roles)
	}
}

// A compute NIC that also holds the default route stays compute and says
// so in roles.
func TestRolesComputeHoldsRoute(t *testing.T) {
	r := railsCompute(2)
	r.n.DefaultRouteInterface = "c1-net"
	n := r.link(t, RoleOptions{})
	if nic := roleOf(t, n, "c1"); nic.Role != RoleCompute || !slices.Equal(nic.Roles, []Role{RoleCompute, RoleFrontend}) {
		t.Errorf("c1: role %s roles %v", nic.Role, nic.Roles)
	}
}

// --storage-nics and --exclude-nics beat the layout; the GPU then uses
// the nearest compute NIC left.
func TestRolesFlags(t *testing.T) {
	r := railsCompute(4)
	n := r.link(t, RoleOptions{StorageNICs: []string{"c0"}, ExcludeNICs: []string{"c1-net"}})
	wantRoles(t, n, map[string]Role{"c0": RoleStorage, "c1": RoleOther, "c2": RoleCompute})
	if why := roleOf(t, n, "c0").RoleReason; why != "named by --storage-nics" {
		t.Errorf("c0 reason %q", why)
	}
	// GPUs 0 and 1 have no compute NIC on their switch or node: SYS to
	// c2, c3 (one per GPU of the other socket, shared evenly).
	p := wantPair(t, n, 0, "c2")
	if p.Class != ClassSYS || !strings.Contains(p.Note, "crosses sockets (NUMA distance 21)") {
		t.Errorf("GPU 0 pair %+v", p)
	}
}

// The NVSwitch-side ConnectX-7 of HGX B200: PCIe x2 at 16 GT/s (~31
// Gb/s) under a 100 Gb/s port, up or down (then the ConnectX-7's 400 Gb/s
// capability counts). It is a management NIC even beside a GPU, with the
// compute NICs' very kind; never compute, never paired.
func TestRolesManagement(t *testing.T) {
	for _, up := range []bool{true, false} {
		r := railsCompute(4)
		bus := r.onSwitch(2, KindNIC)
		for i := range r.n.PCIDevices {
			if r.n.PCIDevices[i].BusID == bus {
				r.n.PCIDevices[i].Link = PCILink{Speed: "16.0 GT/s PCIe", Width: 2}
			}
		}
		m := r.nic("nvsw0", bus, "0x1021", FabricInfiniBand, 100)
		if !up {
			m.Ports[0].State, m.Ports[0].StateID, m.Ports[0].PhysState, m.Ports[0].PhysStateID, m.Ports[0].RateGbps = "DOWN", 1, "Polling", 2, 10
		}
		n := r.link(t, RoleOptions{})
		wantRoles(t, n, map[string]Role{"nvsw0": RoleManagement, "c2": RoleCompute})
		wantPair(t, n, 2, "c2")
		if nic := roleOf(t, n, "nvsw0"); nic.CapabilityGbps != 400 {
			t.Errorf("up %v: capability %v, want the ConnectX-7's 400 (never a down port's rate)", up, nic.CapabilityGbps)
		}
	}
}

// Capability: an adapter the table does not know, with its only port
// down, is worth what its PCIe link feeds, never the 10 Gb/s of a down
// port.
func TestCapability(t *testing.T) {
	down := Port{Port: 1, State: "DOWN", StateID: 1, PhysState: "Polling", PhysStateID: 2, RateGbps: 10}
	up := Port{Port: 1, State: "ACTIVE", StateID: 4, PhysState: "LinkUp", PhysStateID: 5, RateGbps: 200}
	for _, tc := range []struct {
		nic  NIC
		pcie float64
		want float64
	}{
		{NIC{Vendor: "0x15b3", Device: "0x1021", Ports: []Port{down}}, 504, 400},
		{NIC{Vendor: "0x1234", Device: "0x0001", Ports: []Port{down}}, 504, 400}, // Gen5 x16
		{NIC{Vendor: "0x1234", Device: "0x0001", Ports: []Port{down}}, 252, 200}, // Gen4 x16
		{NIC{Vendor: "0x1234", Device: "0x0001", Ports: []Port{up}}, 504, 200},
		{NIC{Vendor: "0x1234", Device: "0x0001", Ports: []Port{down}}, 0, 0},
	} {
		if got := capability(tc.nic, tc.pcie); got != tc.want {
			t.Errorf("capability(%s:%s, ports %+v, pcie %v) = %v, want %v", tc.nic.Vendor, tc.nic.Device, tc.nic.Ports, tc.pcie, got, tc.want)
		}
	}
}

// No GPU at all (a storage or CPU node): the most capable RDMA kind is
// compute, and the reason says why.
func TestRolesNoGPU(t *testing.T) {
	r := newRails(0)
	r.nic("a", r.ownRoot(0x80, 0, 0)[0], "0x1021", FabricInfiniBand, 400)
	r.nic("b", r.ownRoot(0xa0, 1, 0)[0], "0x101d", FabricRoCE, 100)
	n := r.link(t, RoleOptions{})
	wantRoles(t, n, map[string]Role{"a": RoleCompute, "b": RoleStorage})
	if why := roleOf(t, n, "a").RoleReason; !strings.Contains(why, "no GPU on the node") {
		t.Errorf("a reason %q", why)
	}
}

// Every compute NIC down: the GPU keeps no NIC, says so, and names them.
func TestPairAllDown(t *testing.T) {
	r := railsCompute(1)
	r.n.NICs[0].Ports[0].State, r.n.NICs[0].Ports[0].StateID = "DOWN", 1
	n := r.link(t, RoleOptions{})
	p := n.Pairs[0]
	if len(p.NICs) != 0 || !slices.Equal(p.DownNICs, []string{"c0"}) || !strings.Contains(p.Note, "no compute NIC with a port up is left") {
		t.Errorf("pair %+v", p)
	}
	if !slices.ContainsFunc(n.Warnings, func(w string) bool {
		return strings.Contains(w, "compute NIC c0") && strings.Contains(w, "port 1 DOWN")
	}) {
		t.Errorf("warnings %q", n.Warnings)
	}
}

// A data NIC whose PCIe link trained down (x2 of its x16) is a fault, not
// a management port: it keeps its layout role, with a warning.
func TestRolesTrainedDownLink(t *testing.T) {
	r := railsCompute(4)
	for i := range r.n.PCIDevices {
		if r.n.PCIDevices[i].BusID == r.n.NICs[1].BusID {
			r.n.PCIDevices[i].Link = PCILink{Speed: "16.0 GT/s PCIe", Width: 2, MaxSpeed: "32.0 GT/s PCIe", MaxWidth: 16}
		}
	}
	n := r.link(t, RoleOptions{})
	wantRoles(t, n, map[string]Role{"c1": RoleCompute})
	if !slices.ContainsFunc(n.Warnings, func(w string) bool { return strings.Contains(w, "NIC c1") && strings.Contains(w, "trained down to x2") }) {
		t.Errorf("warnings %q", n.Warnings)
	}
}

// A RoCE LAG NIC answers to its bond members' names and bus ids: they
// are part of it, not NICs of their own.
func TestMatchesBondMembers(t *testing.T) {
	nic := NIC{Name: "mlx5_bond_0", RDMADevice: "mlx5_bond_0", BusID: "0000:18:00.0", Netdevs: []string{"bond0"},
		Bond: &Bond{Name: "bond0", Members: []BondMember{
			{BusID: "0000:18:00.0", Interface: Interface{Name: "enp24s0f0np0"}},
			{BusID: "0000:18:00.1", Interface: Interface{Name: "enp24s0f1np1"}},
		}}}
	for _, s := range []string{"mlx5_bond_0", "bond0", "0000:18:00.0", "0000:18:00.1", "enp24s0f1np1"} {
		if !nic.matches([]string{s}) {
			t.Errorf("%q does not name the LAG NIC", s)
		}
	}
	if nic.matches([]string{"enp25s0"}) || (NIC{Name: "eth0"}).hasMember("eth0") {
		t.Error("matches a name that is not the NIC's")
	}
}

// SocketInterface: the route's interface; else the front-end NIC's
// interface that is up and, where addresses are known, holds one.
func TestSocketInterface(t *testing.T) {
	front := NIC{Name: "eth0", Role: RoleFrontend, Roles: []Role{RoleFrontend},
		Interfaces: []Interface{{Name: "eth0", OperState: "up"}}}
	lag := NIC{Name: "mlx5_bond_0", Role: RoleCompute, Roles: []Role{RoleCompute},
		Interfaces: []Interface{{Name: "bond0", OperState: "up", IPv4: []string{"10.1.0.5/16"}}}}
	n := Node{DefaultRouteInterface: "br0", NICs: []NIC{front}}
	if name, nic := SocketInterface(n); name != "br0" || nic != "" {
		t.Errorf("route: %q %q", name, nic)
	}
	n.DefaultRouteInterface = ""
	if name, nic := SocketInterface(n); name != "eth0" || nic != "eth0" {
		t.Errorf("front end, addresses unknown: %q %q", name, nic)
	}
	n.NICs = append(n.NICs, lag) // addresses now known; eth0 holds none
	if name, _ := SocketInterface(n); name != "" {
		t.Errorf("front end without an address: %q", name)
	}
	n.NICs[0].Interfaces[0].IPv4 = []string{"10.0.0.21/24"}
	if name, _ := SocketInterface(n); name != "eth0" {
		t.Errorf("front end with an address: %q", name)
	}
}

// No route table, addresses known: the front end is the first Ethernet
// NIC without RDMA that is up and holds an IPv4 address, not the first
// one that is up (a bond member or unconfigured port holds none); the
// other port of its kind joins it (rule 4), but the socket interface is
// the addressed one.
func TestRolesFrontEndNeedsAddress(t *testing.T) {
	r := railsCompute(4)
	for k, bus := range []int{0x80, 0xa0} {
		ids := r.ownRoot(bus, k, 0)
		e := r.nic(fmt.Sprintf("eth%d", k), ids[0], "0x1563", FabricEthernet, 10)
		e.RDMADevice, e.Ports, e.Vendor = "", nil, "0x8086"
		e.Interfaces[0].Name, e.Netdevs = e.Name, []string{e.Name}
	}
	r.n.NICs[len(r.n.NICs)-1].Interfaces[0].IPv4 = []string{"10.0.0.21/24"}
	n := r.link(t, RoleOptions{})
	wantRoles(t, n, map[string]Role{"eth0": RoleFrontend, "eth1": RoleFrontend})
	if why := roleOf(t, n, "eth0").RoleReason; !strings.Contains(why, "same kind of adapter") {
		t.Errorf("eth0 reason %q", why)
	}
	if why := roleOf(t, n, "eth1").RoleReason; !strings.Contains(why, "has an IPv4 address") {
		t.Errorf("eth1 reason %q", why)
	}
	if name, nic := SocketInterface(*n); name != "eth1" || nic != "eth1" {
		t.Errorf("socket interface %q (NIC %q), want eth1", name, nic)
	}
}
