package nccl

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func envIntp(i int) *int       { return &i }
func envStrp(s string) *string { return &s }

func envMustBuild(t *testing.T, n topology.Node, req EnvRequest) Env {
	t.Helper()
	e, err := BuildEnv(n, req)
	if err != nil {
		t.Fatalf("BuildEnv: %v", err)
	}
	return e
}

// envFixtures: the front end each spec names (default_route; "" where the
// root has no route table) and the last local rank.
var envFixtures = []struct {
	name, route string
	last        int
	warnings    int   // warnings of rank 0
	extra       []int // further ranks with an expected file
}{
	{"aws-p4d", "ens32", 7, 0, nil},
	{"dgx-h100-numa-disagree", "enp4s0f0", 0, 1, nil},
	{"aws-p5", "enp71s0", 7, 0, nil},
	{"aws-p6-b200", "enp71s0", 7, 0, nil},
	{"azure-nd-h100-v5", "eth0", 7, 0, nil},
	{"cgroup-half", "", 7, 1, nil},                        // no front end
	{"dgx-h100", "enp4s0f0", 7, 0, nil},                   //
	{"dgx-h100-faults", "enp4s0f0", 7, 1, []int{2}},       // mlx5_4 down
	{"dgx-h100-ib-storage", "enp4s0f0", 7, 0, nil},        //
	{"dgx-h100-gds", "enp4s0f0", 7, 0, nil},               // storage changes no NCCL variable
	{"dgx-h100-acs", "enp4s0f0", 7, 0, nil},               //
	{"dgx-b200", "enp4s0", 7, 0, nil},                     // NVSwitch management ports never in NCCL_IB_HCA
	{"dgx-b300", "enp100s0", 7, 0, nil},                   // GPUs behind their ConnectX-8's own switch
	{"b300-roce-lag", "", 7, 0, nil},                      // RoCE LAG: mlx5_bond_N; front end without a route table
	{"gcp-a3-mega", "enp0s12", 7, 0, nil},                 //
	{"gcp-a3-ultragpu", "enp0s19", 7, 0, nil},             //
	{"grace-hopper", "", 0, 1, nil},                       //
	{"h200-vm", "", 0, 1, nil},                            //
	{"numa-unknown-2s", "", 3, 2, nil},                    // no front end, no RDMA
	{"oci-bm-gpu-h100", "eth0", 7, 0, nil},                //
	{"oci-bm-gpu-h100-port-down", "eth0", 7, 1, []int{2}}, // mlx5_5 down
	{"smt-off-2s", "", 3, 2, nil},                         // no front end, no RDMA
	{"snc2-2s", "", 7, 1, nil},                            // no front end
	{"snc2-2s-nic-absent", "", 7, 1, []int{2}},            // no front end
	{"unequal-nodes", "", 7, 1, nil},                      // no front end
	// gb200-nvl72-tray: fabric and IMEX ready, nothing to warn;
	// gb200-nvl72-fabric-failed: GPU 2's fabric, no IMEX channel.
	{"gb200-nvl72-tray", "enP6p3s0f0np0", 3, 0, nil},
	{"gb200-nvl72-fabric-failed", "enP6p3s0f0np0", 3, 2, []int{2}},
	// gb300-nvl72-tray: each GPU's NIC is the ConnectX-8 whose Data
	// Direct function is beside it, not the one bus order gives.
	{"gb300-nvl72-tray", "enP6p3s0f0np0", 3, 0, nil},
	{"gb200-nvl72-tray-no-nvml", "enP6p3s0f0np0", 3, 0, nil}, // NVML not found: no env warning
	// AMD Instinct MI300X (RCCL): no CUDA_DEVICE_ORDER, the rank's HIP
	// ordinals (env_amd.go); amd-mi300x-faults' faults change nothing
	// env sets; GPU 6 is the one that lost XGMI links.
	{"amd-mi300x", "ens99f0np0", 7, 0, nil},
	{"amd-mi300x-faults", "ens99f0np0", 7, 0, []int{6}},
	{"amd-mi300x-pollara", "ens99f0np0", 7, 0, nil},
	// CPX: 64 HIP devices, one rank per partition (RanksPerGPU): rank 8
	// is the first partition of GPU 1, rank 63 the last of GPU 7.
	{"amd-mi300x-cpx", "ens99f0np0", 63, 0, []int{8}},
	{"amd-mi355x", "ens99f0np0", 7, 0, nil}, // MI355X (gfx950), Pollara
	{"azure-nd-mi300x-v5", "eth0", 7, 0, nil},
	{"oci-bm-gpu-mi300x", "eth0", 7, 0, nil},
	// NVIDIA H100 + AMD MI210: each rank its own GPU's library's
	// variables, and the warning that one job cannot span both.
	{"mixed-h100-mi210", "enp97s0f0np0", 1, 1, nil},
}

// envNoGPU are the fixtures without a GPU gpuaffinity supports: env fails
// for every rank, naming what is on the bus. None today: amd-mi300x, the
// one there was, has 8 supported AMD GPUs since issue 18.
var envNoGPU = map[string]string{}

// envExpected reads a hand-written expectation, dropping # comment lines.
func envExpected(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/env", file))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for line := range strings.Lines(string(data)) {
		if !strings.HasPrefix(line, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func TestEnvFixtures(t *testing.T) {
	var names []string
	for _, f := range envFixtures {
		names = append(names, f.name)
	}
	for _, m := range fakesys.Machines() {
		if !slices.Contains(names, m) && envNoGPU[m] == "" {
			t.Errorf("fixture %s has no expected env output in testdata/env", m)
		}
	}
	for m, why := range envNoGPU {
		n := fixtureNode(t, m)
		for _, rank := range []int{0, 7} {
			_, err := BuildEnv(n, EnvRequest{Rank: envIntp(rank)})
			if !errors.Is(err, ErrRank) || !strings.Contains(err.Error(), why) {
				t.Errorf("%s rank %d: err %v, want ErrRank naming %q", m, rank, err, why)
			}
		}
	}
	for _, f := range envFixtures {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			n := fixtureNode(t, f.name)
			if n.DefaultRouteInterface != f.route {
				t.Fatalf("default route interface %q, the expectations assume %q (spec default_route)", n.DefaultRouteInterface, f.route)
			}
			for _, rank := range slices.Compact(append([]int{0, f.last}, f.extra...)) {
				e := envMustBuild(t, n, EnvRequest{Rank: envIntp(rank)})
				var b bytes.Buffer
				if err := WriteSh(&b, e.Vars); err != nil {
					t.Fatal(err)
				}
				file := f.name + ".rank" + strconv.Itoa(rank) + ".sh"
				if want := envExpected(t, file); b.String() != want {
					t.Errorf("rank %d: got\n%s\nwant (testdata/env/%s)\n%s", rank, b.String(), file, want)
				}
				// One rank per GPU, or per compute partition (CPX).
				gpu := rank / RanksPerGPU(n, EnvRequest{})
				if e.GPU == nil || *e.GPU != gpu || e.Rank == nil || *e.Rank != rank {
					t.Errorf("rank %d: Env.Rank %v, Env.GPU %v", rank, e.Rank, e.GPU)
				}
				if rank == 0 && len(e.Warnings) != f.warnings {
					t.Errorf("rank 0: %d warnings, want %d: %q", len(e.Warnings), f.warnings, e.Warnings)
				}
			}
		})
	}
}

func envMustGet(t *testing.T, e Env, name, want string) {
	t.Helper()
	got, ok := e.Get(name)
	if !ok {
		t.Errorf("%s not set; vars %v", name, e.Vars)
	} else if got != want {
		t.Errorf("%s = %q, want %q", name, got, want)
	}
}

func envMustUnset(t *testing.T, e Env, name string) {
	t.Helper()
	if v, ok := e.Get(name); ok {
		t.Errorf("%s = %q, want unset", name, v)
	}
}

func envWarned(t *testing.T, e Env, substr string) {
	t.Helper()
	for _, w := range e.Warnings {
		if strings.Contains(w, substr) {
			return
		}
	}
	t.Errorf("no warning containing %q in %q", substr, e.Warnings)
}

func TestEnvNodeLevelOnly(t *testing.T) {
	n := fixtureNode(t, "dgx-h100")
	e := envMustBuild(t, n, EnvRequest{})
	if e.Rank != nil || e.GPU != nil {
		t.Errorf("rank %v gpu %v without a rank", e.Rank, e.GPU)
	}
	var names []string
	for _, v := range e.Vars {
		names = append(names, v.Name)
	}
	if want := []string{"CUDA_DEVICE_ORDER", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"}; !slices.Equal(names, want) {
		t.Errorf("vars %v, want %v", names, want)
	}
}

// TestEnvTopoFile: NCCL_TOPO_FILE everywhere but on EFA nodes.
func TestEnvTopoFile(t *testing.T) {
	for _, m := range []string{"azure-nd-h100-v5", "dgx-h100", "oci-bm-gpu-h100", "gcp-a3-mega", "h200-vm"} {
		e := envMustBuild(t, fixtureNode(t, m), EnvRequest{Rank: envIntp(0), TopoFile: "/run/gpuaffinity/nccl-topo.xml"})
		envMustGet(t, e, "NCCL_TOPO_FILE", "/run/gpuaffinity/nccl-topo.xml")
		// Node-level variables come before the per-rank ones.
		if i := slices.IndexFunc(e.Vars, func(v Var) bool { return v.Name == "NCCL_TOPO_FILE" }); e.Vars[i+1].Name != "GPUAFFINITY_GPU" {
			t.Errorf("%s: NCCL_TOPO_FILE is not the last node-level variable: %v", m, e.Vars)
		}
	}
	for _, m := range []string{"aws-p4d", "aws-p5"} {
		n := fixtureNode(t, m)
		e := envMustBuild(t, n, EnvRequest{Rank: envIntp(0), TopoFile: "/opt/x.xml"})
		envMustUnset(t, e, "NCCL_TOPO_FILE")
		envWarned(t, e, "aws-ofi-nccl writes its own topology")
		if !PluginWritesTopology(n) {
			t.Errorf("%s: PluginWritesTopology false", m)
		}
	}
	if PluginWritesTopology(fixtureNode(t, "azure-nd-h100-v5")) {
		t.Error("azure: PluginWritesTopology true")
	}
}

// TestEnvEFA: never NCCL_IB_HCA, FI_EFA_FORK_SAFE, RDMAV_*, UCX; no
// FI_EFA_USE_DEVICE_RDMA on an instance type without EFA RDMA.
func TestEnvEFA(t *testing.T) {
	n := fixtureNode(t, "aws-p5")
	e := envMustBuild(t, n, EnvRequest{Rank: envIntp(3)})
	for _, v := range e.Vars {
		if v.Name == "NCCL_IB_HCA" || v.Name == "FI_EFA_FORK_SAFE" || strings.HasPrefix(v.Name, "RDMAV_") || strings.HasPrefix(v.Name, "UCX_") {
			t.Errorf("EFA node sets %s", v.Name)
		}
	}
	for _, it := range []string{"p5en.48xlarge", "p5e.48xlarge", "p6-b200.48xlarge", "trn1.32xlarge", "trn2.48xlarge", "p4de.24xlarge"} {
		n.Platform.InstanceType = it
		envMustGet(t, envMustBuild(t, n, EnvRequest{}), "FI_EFA_USE_DEVICE_RDMA", "1")
	}
	for _, it := range []string{"g5.48xlarge", "p4.24xlarge", ""} {
		n.Platform.InstanceType = it
		e := envMustBuild(t, n, EnvRequest{})
		envMustGet(t, e, "FI_PROVIDER", "efa")
		envMustUnset(t, e, "FI_EFA_USE_DEVICE_RDMA")
		envWarned(t, e, "not known to support EFA RDMA")
	}
}

// TestEnvInactivePort: a compute port not ACTIVE leaves NCCL_IB_HCA and
// UCX_NET_DEVICES, with warnings.
func TestEnvInactivePort(t *testing.T) {
	n := fixtureNode(t, "dgx-h100")
	for i := range n.NICs {
		if n.NICs[i].Name == "mlx5_3" {
			n.NICs[i].Ports[0].StateID, n.NICs[i].Ports[0].State = 1, "DOWN"
		}
	}
	e := envMustBuild(t, n, EnvRequest{Rank: envIntp(1)})
	envMustGet(t, e, "NCCL_IB_HCA", "=mlx5_0:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1")
	envMustUnset(t, e, "UCX_NET_DEVICES")
	envMustGet(t, e, "GPUAFFINITY_NICS", "mlx5_3")
	envWarned(t, e, "mlx5_3 port 1 is DOWN")
	envWarned(t, e, "UCX_NET_DEVICES not set")

	for i := range n.NICs {
		for j := range n.NICs[i].Ports {
			n.NICs[i].Ports[j].StateID = 1
		}
	}
	e = envMustBuild(t, n, EnvRequest{})
	envMustUnset(t, e, "NCCL_IB_HCA")
	envWarned(t, e, "no compute NIC has an ACTIVE port")
}

// TestEnvGIDIndex: the RoCE v2 IPv4 index must agree on every compute port.
func TestEnvGIDIndex(t *testing.T) {
	n := fixtureNode(t, "oci-bm-gpu-h100")
	envMustGet(t, envMustBuild(t, n, EnvRequest{}), "NCCL_IB_GID_INDEX", "3")

	// One port holds its IPv4 v2 GID at 5 instead: disagreement.
	moved := n
	moved.NICs = slices.Clone(n.NICs)
	for i := range moved.NICs {
		if moved.NICs[i].Name == "mlx5_9" {
			moved.NICs[i].Ports = slices.Clone(moved.NICs[i].Ports)
			gids := slices.Clone(moved.NICs[i].Ports[0].GIDs)
			for j := range gids {
				if gids[j].Index == 3 {
					gids[j].Index = 5
				}
			}
			moved.NICs[i].Ports[0].GIDs = gids
		}
	}
	e := envMustBuild(t, moved, EnvRequest{})
	envMustUnset(t, e, "NCCL_IB_GID_INDEX")
	envWarned(t, e, "different indexes")

	// One port lacks an IPv4 address (only link-local GIDs).
	for i := range n.NICs {
		if n.NICs[i].Name == "mlx5_17" {
			n.NICs[i].Ports[0].GIDs = n.NICs[i].Ports[0].GIDs[:2]
		}
	}
	e = envMustBuild(t, n, EnvRequest{})
	envMustUnset(t, e, "NCCL_IB_GID_INDEX")
	envWarned(t, e, "mlx5_17:1 have no RoCE v2 GID")
}

// TestEnvFrontEnd: without a default route, NCCL_SOCKET_IFNAME is the
// front-end NIC's interface (topology.SocketInterface), never a guess.
func TestEnvFrontEnd(t *testing.T) {
	n := fixtureNode(t, "dgx-h100")
	n.DefaultRouteInterface = ""
	e := envMustBuild(t, n, EnvRequest{})
	envMustGet(t, e, "NCCL_SOCKET_IFNAME", "=enp4s0f0") // the front-end NIC, up
	if len(e.Warnings) != 0 {
		t.Errorf("warnings %q", e.Warnings)
	}
	for i := range n.NICs {
		for j := range n.NICs[i].Interfaces {
			if n.NICs[i].Interfaces[j].Name == "enp4s0f0" {
				n.NICs[i].Interfaces[j].OperState = "down"
			}
		}
	}
	// Both X550 ports (the front-end NICs) down: no other NIC's netdev is
	// guessed (an InfiniBand port's or a bond member's carries no socket).
	e = envMustBuild(t, n, EnvRequest{})
	envMustUnset(t, e, "NCCL_SOCKET_IFNAME")
	envWarned(t, e, "no front-end interface found")

	// Azure without its route: the front end is still the NIC that held
	// it, the accelerated-networking VF's netdev.
	az := fixtureNode(t, "azure-nd-h100-v5")
	az.DefaultRouteInterface = ""
	e = envMustBuild(t, az, EnvRequest{})
	envMustGet(t, e, "NCCL_SOCKET_IFNAME", "=enP53091s1np0")

	// Addresses known (some interface holds one) and the front end's
	// interface holds none: not named.
	h := fixtureNode(t, "dgx-h100")
	h.DefaultRouteInterface = ""
	for i := range h.NICs {
		if h.NICs[i].Name == "mlx5_0" && len(h.NICs[i].Interfaces) > 0 {
			h.NICs[i].Interfaces[0].IPv4 = []string{"10.0.0.1/24"}
		}
	}
	e = envMustBuild(t, h, EnvRequest{})
	envMustUnset(t, e, "NCCL_SOCKET_IFNAME")
	envWarned(t, e, "with an IPv4 address")

	// Nothing at all: omitted with a warning (also TCPXO's CTRL_DEV).
	g := fixtureNode(t, "gcp-a3-mega")
	g.DefaultRouteInterface = ""
	g.NICs = slices.DeleteFunc(g.NICs, func(nic topology.NIC) bool { return nic.Role != topology.RoleCompute })
	e = envMustBuild(t, g, EnvRequest{})
	envMustUnset(t, e, "NCCL_SOCKET_IFNAME")
	envMustUnset(t, e, "NCCL_FASTRAK_CTRL_DEV")
	envMustGet(t, e, "NCCL_FASTRAK_IFNAME", "enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0")
	envWarned(t, e, "NCCL_SOCKET_IFNAME not set")

	// A name NCCL's lists cannot carry.
	n.DefaultRouteInterface = "a,b"
	e = envMustBuild(t, n, EnvRequest{})
	envMustUnset(t, e, "NCCL_SOCKET_IFNAME")
	envWarned(t, e, "contains ','")
}

// TestEnvTCPX: a3-highgpu-8g (one gVNIC per two GPUs) gets the TCPX names.
func TestEnvTCPX(t *testing.T) {
	n := fixtureNode(t, "gcp-a3-mega")
	// Keep enp6s0, enp13s0, enp134s0, enp141s0 as the A3 High data NICs
	// (one per switch, GPUs 2k and 2k+1 on it).
	keep := []string{"enp6s0", "enp13s0", "enp134s0", "enp141s0"}
	for i := range n.NICs {
		if n.NICs[i].Role == topology.RoleCompute && !slices.Contains(keep, n.NICs[i].Name) {
			n.NICs[i].Role = topology.RoleOther
		}
	}
	for i := range n.Pairs {
		n.Pairs[i].NICs = []string{keep[i/2]}
	}
	for _, it := range []string{"a3-highgpu-8g", ""} {
		n.Platform.InstanceType = it
		e := envMustBuild(t, n, EnvRequest{Rank: envIntp(3)})
		envMustGet(t, e, "NCCL_GPUDIRECTTCPX_CTRL_DEV", "enp0s12")
		envMustGet(t, e, "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "enp6s0,enp13s0,enp134s0,enp141s0")
		envMustUnset(t, e, "NCCL_FASTRAK_IFNAME")
		envMustUnset(t, e, "NCCL_IB_DISABLE")
		envMustGet(t, e, "GPUAFFINITY_NICS", "enp13s0")
		for _, v := range e.Vars {
			if strings.Contains(v.Name, "CHUNKSIZE") || v.Name == "NCCL_PROTO" || v.Name == "NCCL_ALGO" {
				t.Errorf("tuning variable %s set", v.Name)
			}
		}
	}
	// Three data NICs for eight GPUs: neither profile.
	n.Platform.InstanceType = ""
	n.NICs[slices.IndexFunc(n.NICs, func(nic topology.NIC) bool { return nic.Name == "enp141s0" })].Role = topology.RoleOther
	e := envMustBuild(t, n, EnvRequest{})
	envWarned(t, e, "match neither")
}

// TestEnvSocketOnly: no RDMA and no gVNIC compute NIC.
func TestEnvSocketOnly(t *testing.T) {
	e := envMustBuild(t, fixtureNode(t, "h200-vm"), EnvRequest{Rank: envIntp(0)})
	envMustGet(t, e, "NCCL_IB_DISABLE", "1")
	envWarned(t, e, "cannot do GPUDirect RDMA")
	envMustUnset(t, e, "NCCL_IB_HCA")
	envMustUnset(t, e, "UCX_NET_DEVICES")
}

// TestEnvCPUsAndNUMA: the CPU fallbacks and NUMA of unknown GPUs.
func TestEnvCPUsAndNUMA(t *testing.T) {
	n := fixtureNode(t, "dgx-h100")
	// A cgroup limited to socket 1: GPU 0's local CPUs are not allowed.
	n.CPU.Allowed = cpuset.Range(56, 111)
	e := envMustBuild(t, n, EnvRequest{Rank: envIntp(0)})
	envMustGet(t, e, "GPUAFFINITY_CPUS", "56-111")
	envWarned(t, e, "GPUAFFINITY_CPUS is every allowed CPU")
	e = envMustBuild(t, n, EnvRequest{Rank: envIntp(5)})
	envMustGet(t, e, "GPUAFFINITY_CPUS", "56-111")
	if len(e.Warnings) != 0 {
		t.Errorf("warnings %q", e.Warnings)
	}
	// numa_node -1, no local_cpulist: NVML's affinity, held by node 0.
	n.CPU.Allowed = cpuset.Range(0, 223)
	n.GPUs[2].LocalCPUs = cpuset.Set{}
	n.GPUs[2].NUMANode = nil
	topology.ResolveLocality(&n)
	e = envMustBuild(t, n, EnvRequest{Rank: envIntp(2)})
	envMustGet(t, e, "GPUAFFINITY_CPUS", "0-55,112-167")
	envMustGet(t, e, "GPUAFFINITY_NUMA", "0")
	// Only a local_cpulist spanning both nodes: no NUMA node.
	n.GPUs[2].NVMLCPUAffinity = cpuset.Set{}
	n.GPUs[2].LocalCPUs = cpuset.Range(0, 223)
	topology.ResolveLocality(&n)
	e = envMustBuild(t, n, EnvRequest{Rank: envIntp(2)})
	envMustGet(t, e, "GPUAFFINITY_CPUS", "0-223")
	envMustUnset(t, e, "GPUAFFINITY_NUMA")
	envWarned(t, e, "GPUAFFINITY_NUMA not set")
}

func TestEnvRankMapping(t *testing.T) {
	n := fixtureNode(t, "dgx-h100")
	for _, tc := range []struct {
		rank int
		cvd  *string
		gpu  int
	}{
		{3, nil, 3},
		{1, envStrp("3,2"), 2},
		{0, envStrp(" 6 , 2"), 6},
		{0, envStrp("GPU-dgxh100-0000-0000-0000-000000000005"), 5},
	} {
		e, err := BuildEnv(n, EnvRequest{Rank: envIntp(tc.rank), CUDAVisibleDevices: tc.cvd})
		if err != nil {
			t.Errorf("rank %d cvd %v: %v", tc.rank, tc.cvd, err)
			continue
		}
		if *e.GPU != tc.gpu {
			t.Errorf("rank %d cvd %v: GPU %d, want %d", tc.rank, tc.cvd, *e.GPU, tc.gpu)
		}
		envMustGet(t, e, "GPUAFFINITY_GPU", strconv.Itoa(tc.gpu))
	}
	// A unique UUID prefix, case-insensitive as CUDA compares.
	e, err := BuildEnv(n, EnvRequest{Rank: envIntp(1), CUDAVisibleDevices: envStrp("0,GPU-DGXH100-0000-0000-0000-000000000007")})
	if err != nil || *e.GPU != 7 {
		t.Errorf("UUID prefix: %v, %v", e.GPU, err)
	}

	for _, tc := range []struct {
		rank int
		cvd  *string
		want []string
		is   error
	}{
		{8, nil, []string{"local rank 8", "8 GPU(s)"}, ErrRank},
		{-1, nil, []string{"local rank -1"}, ErrRank},
		{2, envStrp("0,1"), []string{"local rank 2", `"0,1"`, "lists 2 GPU(s)"}, ErrRank},
		{0, envStrp("9"), []string{"local rank 0", `"9"`, "GPU index 9"}, ErrRank},
		{1, envStrp("0,9"), []string{"local rank 1", "GPU index 9"}, ErrRank},
		{1, envStrp("9,0"), []string{"local rank 1", "entry 0", "GPU index 9"}, ErrRank},
		{2, envStrp("0,1,0"), []string{"local rank 2", "entry 2", "named twice"}, ErrRank},
		{0, envStrp(""), []string{"local rank 0", "empty"}, ErrRank},
		{0, envStrp("GPU-ffff"), []string{"local rank 0", `"GPU-ffff"`}, ErrRank},
		{0, envStrp("GPU-dgxh100"), []string{"local rank 0", "matches the UUIDs of GPU 0 and GPU 1"}, ErrRank},
		{0, envStrp("MIG-4f8b6f5c-1111-2222-3333-444444444444"), []string{"local rank 0", "MIG-4f8b", "not supported"}, ErrMIG},
		{0, envStrp("abc"), []string{"local rank 0", `"abc"`}, ErrRank},
		{0, envStrp(",0"), []string{"local rank 0", "empty entry"}, ErrRank},
	} {
		_, err := BuildEnv(n, EnvRequest{Rank: envIntp(tc.rank), CUDAVisibleDevices: tc.cvd})
		if err == nil {
			t.Errorf("rank %d cvd %v: no error", tc.rank, tc.cvd)
			continue
		}
		if !errors.Is(err, tc.is) {
			t.Errorf("rank %d cvd %v: %v does not wrap %v", tc.rank, tc.cvd, err, tc.is)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("rank %d cvd %v: error %q lacks %q", tc.rank, tc.cvd, err, w)
			}
		}
	}
}

// TestEnvPlatform: the platforms' own settings are defaults the caller's
// environment and --platform-settings=false override; gIB's need its
// plugin, and its tuner follows the GPU.
func TestEnvPlatform(t *testing.T) {
	oci := fixtureNode(t, "oci-bm-gpu-h100")
	e := envMustBuild(t, oci, EnvRequest{})
	for name, want := range map[string]string{"NCCL_IB_QPS_PER_CONNECTION": "1", "NCCL_IB_SPLIT_DATA_ON_QPS": "0",
		"NCCL_IB_TC": "41", "NCCL_IB_SL": "0", "NCCL_IB_TIMEOUT": "22"} {
		envMustGet(t, e, name, want)
	}
	preset := func(name string) (string, bool) {
		if name == "NCCL_IB_TC" {
			return "106", true
		}
		return "", false
	}
	e = envMustBuild(t, oci, EnvRequest{Preset: preset})
	envMustUnset(t, e, "NCCL_IB_TC")
	envMustGet(t, e, "NCCL_IB_SL", "0")
	e = envMustBuild(t, oci, EnvRequest{NoPlatform: true})
	for _, name := range []string{"NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_TC", "NCCL_IB_TIMEOUT"} {
		envMustUnset(t, e, name)
	}
	envMustGet(t, e, "NCCL_IB_GID_INDEX", "3") // topology, not a platform setting

	// None of OCI's settings anywhere else.
	for _, m := range []string{"dgx-h100", "azure-nd-h100-v5", "aws-p5"} {
		envMustUnset(t, envMustBuild(t, fixtureNode(t, m), EnvRequest{}), "NCCL_IB_TC")
	}

	gcp := fixtureNode(t, "gcp-a3-ultragpu")
	e = envMustBuild(t, gcp, EnvRequest{})
	envMustGet(t, e, "NCCL_NET", "gIB")
	envMustGet(t, e, "NCCL_TUNER_CONFIG_PATH", "/usr/local/gib/configs/tuner_config_a3u.txtpb")
	for i := range gcp.GPUs {
		gcp.GPUs[i].Model = "NVIDIA B200"
	}
	envMustGet(t, envMustBuild(t, gcp, EnvRequest{}), "NCCL_TUNER_CONFIG_PATH", "/usr/local/gib/configs/tuner_config_a4.txtpb")
	gcp.GPUs[0].Model = "NVIDIA H100 80GB HBM3"
	e = envMustBuild(t, gcp, EnvRequest{})
	envMustUnset(t, e, "NCCL_TUNER_CONFIG_PATH")
	envWarned(t, e, "no tuner configuration known")
	gcp.NetPlugins = nil
	e = envMustBuild(t, gcp, EnvRequest{})
	envMustUnset(t, e, "NCCL_NET")
	envMustUnset(t, e, "NCCL_IB_FIFO_TC")
	envWarned(t, e, "gIB NCCL plugin is not installed")
	envMustGet(t, e, "NCCL_IB_GID_INDEX", "3")
	// A TCPXO node (gVNIC, no RDMA) is no gIB node.
	envMustUnset(t, envMustBuild(t, fixtureNode(t, "gcp-a3-mega"), EnvRequest{}), "NCCL_NET")
}
