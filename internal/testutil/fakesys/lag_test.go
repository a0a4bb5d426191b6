package fakesys

import (
	"errors"
	"strings"
	"testing"
)

// lagSpec is minimal with a two-PF Ethernet adapter in RoCE LAG: one RDMA
// device, mlx5_bond_0, on the first PF; both netdevs in bond0.
const lagSpec = `
name: lag
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
            netdevs: [{name: enp17s0f0np0, speed: 400000, master: bond0}]
            rdma: {name: mlx5_bond_0, ports: [{port: 1, link_layer: Ethernet}]}
          - bdf: "0000:11:00.1"
            kind: nic
            netdevs: [{name: enp17s0f1np1, speed: 400000, master: bond0}]
bonds:
  - {name: bond0, ipv4: ["10.1.0.5/16"]}
`

// TestLAGLayout: the bond takes its first slave's MAC, reports the sum of
// its slaves' speeds and holds the address; the RDMA device's GIDs name
// the bond (roce_gid_mgmt.c); the second PF has no RDMA device.
func TestLAGLayout(t *testing.T) {
	root := buildSpec(t, "lag.yaml", lagSpec)
	for p, want := range map[string]string{
		"sys/class/net/bond0/bonding/slaves":                             "enp17s0f0np0 enp17s0f1np1\n",
		"sys/class/net/bond0/bonding/mode":                               "802.3ad 4\n",
		"sys/class/net/bond0/speed":                                      "800000\n",
		"sys/class/net/bond0/address":                                    "0c:42:a1:11:00:00\n",
		"sys/class/infiniband/mlx5_bond_0/ports/1/gid_attrs/ndevs/0":     "bond0\n",
		"sys/class/infiniband/mlx5_bond_0/ports/1/gid_attrs/ndevs/1":     "bond0\n",
		"sys/class/net/enp17s0f1np1/master/bonding/slaves":               "enp17s0f0np0 enp17s0f1np1\n",
		"sys/bus/pci/devices/0000:11:00.0/infiniband/mlx5_bond_0/fw_ver": "28.39.1002\n",
	} {
		if got, _ := readAttr(t, root, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if _, ok := readAttr(t, root, "sys/bus/pci/devices/0000:11:00.1/infiniband"); ok {
		t.Error("the second PF has an RDMA device")
	}
	if got, _ := readAttr(t, root, "addresses.json"); !strings.Contains(got, `"bond0": [`) || strings.Contains(got, "enp17s0") {
		t.Errorf("addresses.json:\n%s", got)
	}
}

// TestLAGRejects: mlx5_bond_N only in the kernel's LAG layout; a bond
// entry with an unknown key or a bad address.
func TestLAGRejects(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"not enslaved", `netdevs: [{name: enp17s0f0np0, speed: 400000, master: bond0}]`, `netdevs: [{name: enp17s0f0np0, speed: 400000}]`, "only for a RoCE LAG"},
		{"one slave", `netdevs: [{name: enp17s0f1np1, speed: 400000, master: bond0}]`, `netdevs: [{name: enp17s0f1np1, speed: 400000}]`, "needs two ports"},
		{"second RDMA device", `netdevs: [{name: enp17s0f1np1, speed: 400000, master: bond0}]`,
			`netdevs: [{name: enp17s0f1np1, speed: 400000, master: bond0}]
            rdma: {name: mlx5_1, ports: [{port: 1, link_layer: Ethernet}]}`, "no RDMA device of their own"},
		{"other adapter", `- bdf: "0000:11:00.1"`, `- bdf: "0000:11:01.0"`, "not a function of"},
		{"bond key", `{name: bond0, ipv4: ["10.1.0.5/16"]}`, `{name: bond0, ipv6: ["::1/64"]}`, "field ipv6"},
		{"bond address", `ipv4: ["10.1.0.5/16"]`, `ipv4: ["10.1.0.5"]`, "CIDR"},
	} {
		spec := strings.Replace(lagSpec, c.from, c.to, 1)
		if spec == lagSpec {
			t.Fatalf("%s: replacement did not apply", c.name)
		}
		_, err := Parse("lag.yaml", []byte(spec))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
		if err != nil && c.name != "bond key" && !errors.Is(err, ErrSpec) {
			t.Errorf("%s: %v does not wrap ErrSpec", c.name, err)
		}
	}
}
