package discover

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
)

// bondSpec: two adapters, each port with an RDMA device of its own,
// their netdevs bonded (in-band and storage on one bond, no LAG: ports of
// different adapters cannot be).
const bondSpec = `
name: bond-two-adapters
cpu: {sockets: 1, cores_per_socket: 4, threads_per_core: 2}
numa:
  nodes: [{id: 0, socket: 0, memory_gib: 16}]
pci:
  - host_bridge: "0000:10"
    numa: 0
    devices:
      - bdf: "0000:10:01.0"
        kind: bridge
        children:
          - bdf: "0000:11:00.0"
            kind: nic
            netdevs: [{name: enp17s0np0, master: bond0}]
            rdma: {name: mlx5_0, ports: [{port: 1, link_layer: Ethernet}]}
      - bdf: "0000:10:02.0"
        kind: bridge
        children:
          - bdf: "0000:12:00.0"
            kind: nic
            netdevs: [{name: enp18s0np0, master: bond0}]
            rdma: {name: mlx5_1, ports: [{port: 1, link_layer: Ethernet}]}
bonds: [bond0]
`

// TestBondAcrossAdaptersIsNoLAG: both RDMA devices' GIDs name bond0 (the
// kernel gives a slave's GIDs to its bond), but each adapter has its
// own device: two NICs, no bond member list.
func TestBondAcrossAdaptersIsNoLAG(t *testing.T) {
	s, err := fakesys.Parse("bond.yaml", []byte(bondSpec))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := fakesys.Build(s, dir); err != nil {
		t.Fatal(err)
	}
	n, err := Discover(Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nic := range n.NICs {
		names = append(names, nic.Name)
		if nic.Bond != nil {
			t.Errorf("%s: bond %+v on a bond across adapters", nic.Name, nic.Bond)
		}
		if len(nic.Interfaces) != 1 || nic.Interfaces[0].Master != "bond0" {
			t.Errorf("%s: interfaces %+v, want its own netdev enslaved to bond0", nic.Name, nic.Interfaces)
		}
	}
	if !slices.Equal(names, []string{"mlx5_0", "mlx5_1"}) {
		t.Errorf("NICs %v, want mlx5_0 mlx5_1", names)
	}
	for _, w := range n.Warnings {
		if strings.Contains(w, "bond") {
			t.Errorf("warning %q", w)
		}
	}
}
