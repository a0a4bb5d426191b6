package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/ncclxml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The B300 fixtures of issue 32, every answer written by hand from the
// specs' layouts (internal/testutil/fakesys/testdata/machines/dgx-b300.yaml and
// b300-roce-lag.yaml, their sources: rdma-core rdma_topo's inline
// complex, the B300 `nvidia-smi topo -m` of DeepEP#590 and nccl#2150).
// Both: 8 B300, 2 sockets of 64 cores with SMT (CPUs 0-63,128-191 and
// 64-127,192-255), GPU g at bus 1b/43/52/61/9d/c3/d1/df behind the
// ConnectX-8 whose switch upstream port is at 16/3e/4d/5c/98/be/cc/da,
// its PF at 18/40/4f/5e/9a/c0/ce/dc.
var (
	b300GPUBus = []string{"1b", "43", "52", "61", "9d", "c3", "d1", "df"}
	b300USP    = []string{"16", "3e", "4d", "5c", "98", "be", "cc", "da"}
	b300NICBus = []string{"18", "40", "4f", "5e", "9a", "c0", "ce", "dc"}
	// dgx-b300's compute NICs in bus order: the BlueField-3 ports take
	// mlx5_1-2 (bus 2b) and mlx5_7-8 (bus ab) between them.
	b300IB = []string{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"}
)

func b300Lag(g int) string { return fmt.Sprintf("mlx5_bond_%d", g) }

func b300Topo(t *testing.T, machine string) topology.Node {
	t.Helper()
	var n topology.Node
	if err := json.Unmarshal([]byte(mustRun(t, "topo", "--demo", machine, "-o", "json")), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestB300TopoJSON: each GPU is PXB to its own CX-8 (two CX switches on
// the path: the shared one and the GPU's own), the CX switch ports say
// they are the NIC's (nic_switch ConnectX, 15b3:197c), the BlueField-3's
// say BlueField-3, and on the LAG node each CX-8 is one NIC: the RDMA
// device mlx5_bond_g, netdev bond<g>, members the two PFs' netdevs, the
// second PF no NIC of its own.
func TestB300TopoJSON(t *testing.T) {
	for _, machine := range []string{"dgx-b300", "b300-roce-lag"} {
		t.Run(machine, func(t *testing.T) {
			n := b300Topo(t, machine)
			lag := machine == "b300-roce-lag"
			nic := func(g int) string {
				if lag {
					return b300Lag(g)
				}
				return b300IB[g]
			}
			// 8 compute + 4 BlueField-3 ports + the host port: 13 NICs
			// on both; the LAG's second PFs add none.
			if len(n.NICs) != 13 {
				t.Errorf("%d NICs, want 13", len(n.NICs))
			}
			byName := map[string]topology.NIC{}
			for _, c := range n.NICs {
				byName[c.Name] = c
			}
			for g := range 8 {
				c, ok := byName[nic(g)]
				if !ok {
					t.Fatalf("no NIC %s", nic(g))
				}
				if c.Role != topology.RoleCompute || c.BusID != "0000:"+b300NICBus[g]+":00.0" {
					t.Errorf("%s: role %s bus %s", c.Name, c.Role, c.BusID)
				}
				want := topology.Pair{GPU: g, NICs: []string{nic(g)}, Class: topology.ClassPXB}
				if i := slices.IndexFunc(n.Pairs, func(p topology.Pair) bool { return p.GPU == g }); i < 0 ||
					!slices.Equal(n.Pairs[i].NICs, want.NICs) || n.Pairs[i].Class != want.Class || !n.Pairs[i].Decided {
					t.Errorf("GPU %d pair %+v, want %s PXB decided", g, n.Pairs, nic(g))
				}
				if lag {
					if c.Fabric != topology.FabricRoCE || !slices.Equal(c.Netdevs, []string{fmt.Sprintf("bond%d", g)}) || c.Bond == nil {
						t.Fatalf("%s: fabric %s netdevs %v bond %v", c.Name, c.Fabric, c.Netdevs, c.Bond)
					}
					dec, _ := strconv.ParseUint(b300NICBus[g], 16, 8) // udev's enp<bus>s0: the bus in decimal
					var members []string
					for _, m := range c.Bond.Members {
						members = append(members, m.BusID+"="+m.Name)
						if len(m.IPv4) != 0 || m.Master != c.Bond.Name {
							t.Errorf("%s member %s: ipv4 %v master %q", c.Name, m.Name, m.IPv4, m.Master)
						}
					}
					wantM := []string{
						fmt.Sprintf("0000:%s:00.0=enp%ds0f0np0", b300NICBus[g], dec),
						fmt.Sprintf("0000:%s:00.1=enp%ds0f1np1", b300NICBus[g], dec),
					}
					if !slices.Equal(members, wantM) || c.Bond.Mode != "802.3ad 4" {
						t.Errorf("%s members %v mode %q, want %v", c.Name, members, c.Bond.Mode, wantM)
					}
					if len(c.Interfaces) != 1 || c.Interfaces[0].Name != c.Bond.Name ||
						!slices.Equal(c.Interfaces[0].IPv4, []string{fmt.Sprintf("10.%d.0.5/16", g+1)}) {
						t.Errorf("%s interfaces %+v", c.Name, c.Interfaces)
					}
					if _, ok := byName[wantM[1][strings.IndexByte(wantM[1], '=')+1:]]; ok {
						t.Errorf("the second PF's netdev is a NIC of its own")
					}
				}
			}
			// No PCI function of a NIC's bus is listed twice: the second
			// PF (LAG) is no NIC.
			for _, c := range n.NICs {
				if strings.HasSuffix(c.BusID, ":00.1") && strings.HasPrefix(c.Name, "enp") {
					t.Errorf("bond member %s listed as a NIC", c.Name)
				}
			}
			sw := map[string]string{}
			for _, d := range n.PCIDevices {
				if d.NICSwitch != "" {
					sw[d.BusID] = d.NICSwitch + " " + d.Vendor + ":" + d.Device
				}
			}
			for g := range 8 {
				// USP, the DSP to the NIC, the DSP to the GPU's switch, that
				// switch's USP and DSP: five CX ports per complex.
				usp := "0000:" + b300USP[g] + ":00.0"
				if sw[usp] != "ConnectX 0x15b3:0x197c" {
					t.Errorf("switch %s: %q, want ConnectX 0x15b3:0x197c", usp, sw[usp])
				}
			}
			// 8 × 5 ConnectX ports + 2 BlueField-3 switches × 2 ports.
			cx, bf := 0, 0
			for _, v := range sw {
				switch {
				case strings.HasPrefix(v, "ConnectX "):
					cx++
				case strings.HasPrefix(v, "BlueField-3 "):
					bf++
				}
			}
			if cx != 40 || bf != 4 {
				t.Errorf("%d ConnectX and %d BlueField-3 switch ports, want 40 and 4", cx, bf)
			}
			table := mustRun(t, "topo", "--demo", machine)
			for _, want := range []string{
				"NIC switches (PCIe switches inside a network adapter):",
				"0000:16:00.0  ConnectX internal switch (15b3:197c)",
				"NIC0 " + nic(0) + ", GPU0",
				"BlueField-3 internal switch (15b3:197b)",
			} {
				if !strings.Contains(table, want) {
					t.Errorf("table lacks %q:\n%s", want, table)
				}
			}
			if lag && !strings.Contains(table, "NIC0: mlx5_bond_0 (bond0 = enp24s0f0np0 + enp24s0f1np1)") {
				t.Errorf("table does not list the bond's members:\n%s", table)
			}
		})
	}
}

// TestB300Env: rank 0 and the last rank. The front end is enp100s0 on
// both: dgx-b300's default route; on the LAG node (no route table,
// addresses known) the first Ethernet NIC without RDMA that is up and
// holds an address, never a bond member.
func TestB300Env(t *testing.T) {
	envCleanEnv(t)
	hca := map[string]string{
		"dgx-b300":      "=" + strings.Join(b300IB, ":1,") + ":1",
		"b300-roce-lag": "=mlx5_bond_0:1,mlx5_bond_1:1,mlx5_bond_2:1,mlx5_bond_3:1,mlx5_bond_4:1,mlx5_bond_5:1,mlx5_bond_6:1,mlx5_bond_7:1",
	}
	for _, machine := range []string{"dgx-b300", "b300-roce-lag"} {
		for _, c := range []struct {
			rank      int
			nic, cpus string
		}{
			{0, "0", "0-63,128-191"},
			{7, "7", "64-127,192-255"},
		} {
			out, stderr, err := envRun(t, "--demo", machine, "--local-rank", fmt.Sprint(c.rank))
			if err != nil {
				t.Fatalf("%s rank %d: %v\n%s", machine, c.rank, err, stderr)
			}
			nic := b300IB[c.rank]
			if machine == "b300-roce-lag" {
				nic = b300Lag(c.rank)
			}
			for _, want := range []string{
				"export NCCL_SOCKET_IFNAME='=enp100s0'\n",
				"export NCCL_IB_HCA='" + hca[machine] + "'\n",
				"export GPUAFFINITY_GPU='" + c.nic + "'\n",
				"export GPUAFFINITY_NICS='" + nic + "'\n",
				"export GPUAFFINITY_CPUS='" + c.cpus + "'\n",
				"export UCX_NET_DEVICES='" + nic + ":1'\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("%s rank %d: no %q in\n%s", machine, c.rank, want, out)
				}
			}
			// RoCE: the RoCE v2 IPv4 GID is at index 3 on every bond.
			if gid := strings.Contains(out, "export NCCL_IB_GID_INDEX='3'\n"); gid != (machine == "b300-roce-lag") {
				t.Errorf("%s: NCCL_IB_GID_INDEX=3 %v:\n%s", machine, gid, out)
			}
			if strings.Contains(out, "f1np1") || strings.Contains(out, "f0np0") {
				t.Errorf("%s: a bond member in the environment:\n%s", machine, out)
			}
			if stderr != "" {
				t.Errorf("%s rank %d: stderr %q", machine, c.rank, stderr)
			}
		}
	}
}

// TestB300NCCLTopo: the XML passes NCCL's loader rules and puts each
// GPU and its NIC under the same CX switch upstream port; the LAG's
// second PF is not in it (NCCL names the adapter by function 0).
func TestB300NCCLTopo(t *testing.T) {
	for _, machine := range []string{"dgx-b300", "b300-roce-lag"} {
		out := mustRun(t, "nccl-topo", "--demo", machine)
		if err := ncclxml.Check([]byte(out)); err != nil {
			t.Fatalf("%s: %v\n%s", machine, err, out)
		}
		for g := range 8 {
			usp := `<pci busid="0000:` + b300USP[g] + `:00.0" class="0x060400" vendor="0x15b3" device="0x197c"`
			i := strings.Index(out, usp)
			nicAt := strings.Index(out, `<pci busid="0000:`+b300NICBus[g]+`:00.0" class=`)
			gpuAt := strings.Index(out, `<pci busid="0000:`+b300GPUBus[g]+`:00.0" class="0x030200"`)
			if i < 0 || nicAt < i || gpuAt < nicAt {
				t.Errorf("%s GPU %d: switch at %d, NIC at %d, GPU at %d\n%s", machine, g, i, nicAt, gpuAt, out)
			}
		}
		if strings.Contains(out, ":00.1\"") && machine == "b300-roce-lag" {
			t.Errorf("%s: a second PF in the XML:\n%s", machine, out)
		}
	}
}

// TestB300Cpumap: exclusive mode, 4 GPUs per 64-core socket: 16 cores
// each with their SMT siblings (+128).
func TestB300Cpumap(t *testing.T) {
	for _, machine := range []string{"dgx-b300", "b300-roce-lag"} {
		out := mustRun(t, "cpumap", "--demo", machine)
		lines := strings.Split(out, "\n")
		for i, want := range []string{
			"RANK GPU NODE MODE CPUS MEMS",
			"0 0 0 exclusive 0-15,128-143 0",
			"1 1 0 exclusive 16-31,144-159 0",
			"7 7 1 exclusive 112-127,240-255 1",
		} {
			row := []int{0, 1, 2, 8}[i]
			if got := strings.Join(strings.Fields(lines[row]), " "); got != want {
				t.Errorf("%s line %d = %q, want %q\n%s", machine, row, got, want, out)
			}
		}
	}
}

// TestB300Check: healthy; 8 compute NICs; every GPU aligned (PXB through
// its NIC's switch); the LAG devices at their one port's 400 Gb/s.
func TestB300Check(t *testing.T) {
	for machine, rate := range map[string]string{"dgx-b300": "800", "b300-roce-lag": "400"} {
		root := checkRoot(t, machine)
		out, code := runCheck(t, "--root", root, "--interval", "0")
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", machine, code, out)
		}
		for _, want := range []string{
			"PASS  nic.count           8 compute NICs",
			"PASS  nic.port_state      8 ports ACTIVE/LinkUp",
			"PASS  nic.rate            8 compute NICs at " + rate + " Gb/s or more",
			"PASS  topo.aligned        8 GPUs with a compute NIC at PXB or better",
			"PASS  storage.ports       4 ports of 4 storage NICs up",
			"healthy (profile pretrain)",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q in\n%s", machine, want, out)
			}
		}
	}
}

// TestB300Gres: Type from the model ("NVIDIA B300 SXM6 AC"), Cores= the
// socket's 64 cores, 18 NVLinks to every other GPU.
func TestB300Gres(t *testing.T) {
	for _, machine := range []string{"dgx-b300", "b300-roce-lag"} {
		out, stderr, err := gresRun(t, "--demo", machine)
		if err != nil || stderr != "" {
			t.Fatalf("%s: %v %q", machine, err, stderr)
		}
		for _, want := range []string{
			"\nName=gpu Type=b300 File=/dev/nvidia0 Cores=0-63 Links=-1,18,18,18,18,18,18,18\n",
			"\nName=gpu Type=b300 File=/dev/nvidia7 Cores=64-127 Links=18,18,18,18,18,18,18,-1\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q in\n%s", machine, want, out)
			}
		}
		if n := strings.Count(out, "Name=gpu "); n != 8 {
			t.Errorf("%s: %d GPU lines, want 8", machine, n)
		}
	}
}
