package nccl

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

var amdFixtures = []string{"amd-mi300x", "amd-mi300x-faults", "amd-mi300x-pollara", "azure-nd-mi300x-v5", "oci-bm-gpu-mi300x"}

// TestEnvAMDNoCUDA: an AMD node's ranks never get CUDA_DEVICE_ORDER
// (HIP does not read it) nor any visibility variable (env sets none for
// NVIDIA ranks either); GPUAFFINITY_HIP_DEVICES is the rank's HIP ordinal,
// which on these SPX fixtures is its GPU's place among the KFD GPU nodes
// (= the GPU index: no NVIDIA GPU precedes them).
func TestEnvAMDNoCUDA(t *testing.T) {
	for _, m := range amdFixtures {
		n := fixtureNode(t, m)
		for r := range 8 {
			e := envMustBuild(t, n, EnvRequest{Rank: envIntp(r)})
			for _, v := range []string{"CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HSA_FORCE_FINE_GRAIN_PCIE"} {
				envMustUnset(t, e, v)
			}
			envMustGet(t, e, "GPUAFFINITY_GPU", string(rune('0'+r)))
			envMustGet(t, e, hipDevicesVar, string(rune('0'+r)))
			if len(e.Warnings) > 0 {
				t.Errorf("%s rank %d: warnings %q", m, r, e.Warnings)
			}
		}
	}
	// Node level: NCCL's fabric variables, which RCCL reads, and nothing
	// of CUDA.
	e := envMustBuild(t, fixtureNode(t, "amd-mi300x"), EnvRequest{})
	var names []string
	for _, v := range e.Vars {
		names = append(names, v.Name)
	}
	if want := []string{"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX"}; !slices.Equal(names, want) {
		t.Errorf("node-level vars %v, want %v", names, want)
	}
}

// TestEnvAMDAllRanks: the --all-ranks table of amd-mi300x, by hand from
// AMD's topology-mapping.md adjacency table (GPU k <-> its NIC) and the
// fixture's CPUs (2 x EPYC 9654, SMT: node 0 = 0-95,192-287).
func TestEnvAMDAllRanks(t *testing.T) {
	n := fixtureNode(t, "amd-mi300x")
	var envs []Env
	for r := range 8 {
		envs = append(envs, envMustBuild(t, n, EnvRequest{Rank: envIntp(r)}))
	}
	var b bytes.Buffer
	if err := WriteRanks(&b, n, envs); err != nil {
		t.Fatal(err)
	}
	want := `Every rank:
  NCCL_SOCKET_IFNAME==ens99f0np0
  NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1
  NCCL_IB_GID_INDEX=3

RANK  GPU  BUS ID        NUMA  CPUS            NICS    CLASS  UCX_NET_DEVICES
0     0    0000:05:00.0  0     0-95,192-287    mlx5_0  PXB    mlx5_0:1
1     1    0000:2b:00.0  0     0-95,192-287    mlx5_1  PXB    mlx5_1:1
2     2    0000:5b:00.0  0     0-95,192-287    mlx5_2  PXB    mlx5_2:1
3     3    0000:65:00.0  0     0-95,192-287    mlx5_3  PXB    mlx5_3:1
4     4    0000:7d:00.0  1     96-191,288-383  mlx5_4  PXB    mlx5_4:1
5     5    0000:a5:00.0  1     96-191,288-383  mlx5_5  PXB    mlx5_5:1
6     6    0000:d5:00.0  1     96-191,288-383  mlx5_6  PXB    mlx5_6:1
7     7    0000:e7:00.0  1     96-191,288-383  mlx5_7  PXB    mlx5_7:1
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("all ranks (-want +got):\n%s", d)
	}
}

// envMixedNode is dgx-h100 with GPUs 4-7 made AMD MI300X (HIP ordinals
// 0-3: HIP counts AMD GPUs only), in one XGMI hive: a node with both
// vendors, which no fixture has.
func envMixedNode(t *testing.T) topology.Node {
	n := fixtureNode(t, "dgx-h100")
	for i := 4; i < 8; i++ {
		g := &n.GPUs[i]
		g.Vendor, g.Device, g.Model = topology.VendorAMD, "0x74a1", "AMD Instinct MI300X"
		g.AMD = &topology.AMDGPU{KFDNodes: []int{i - 2}, Ordinals: []int{i - 4}, GFXTarget: "gfx942", ComputeUnits: 304,
			HiveID: "0x00000000000000aa", ComputePartition: "SPX", MemoryPartition: "NPS1"}
	}
	return n
}

// TestEnvAMDMixed: on a node with NVIDIA and AMD GPUs each rank gets its
// own GPU's library's variables, with a warning that one job cannot span
// both; the topology file (NCCL's there) goes to NVIDIA ranks only.
func TestEnvAMDMixed(t *testing.T) {
	n := envMixedNode(t)
	const topo = "/run/gpuaffinity/nccl-topo.xml"
	req := func(r int) EnvRequest {
		return EnvRequest{Rank: envIntp(r), TopoFile: topo, CuFileJSON: "/run/gpuaffinity/cufile.json"}
	}
	nv := envMustBuild(t, n, req(0))
	envMustGet(t, nv, "CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	envMustGet(t, nv, "NCCL_TOPO_FILE", topo)
	envMustGet(t, nv, "CUFILE_ENV_PATH_JSON", "/run/gpuaffinity/cufile.json")
	envMustUnset(t, nv, hipDevicesVar)
	envWarned(t, nv, "this node has NVIDIA GPUs (GPU 0-3) and AMD GPUs (GPU 4-7)")
	envWarned(t, nv, "each rank gets the variables of its own GPU's library")

	amd := envMustBuild(t, n, req(4))
	envMustUnset(t, amd, "CUDA_DEVICE_ORDER")
	envMustUnset(t, amd, "NCCL_TOPO_FILE")
	envMustUnset(t, amd, "CUFILE_ENV_PATH_JSON")
	envMustGet(t, amd, "GPUAFFINITY_GPU", "4")
	envMustGet(t, amd, hipDevicesVar, "0")
	// dgx-h100's GPU 4 (9d:00.0) and its compute NIC mlx5_6 (ibp154s0)
	// behind one switch (the base fixture's spec), NUMA 1.
	envMustGet(t, amd, "GPUAFFINITY_NICS", "mlx5_6")
	envMustGet(t, amd, "GPUAFFINITY_NUMA", "1")
	envMustGet(t, amd, "NCCL_IB_HCA", func() string { v, _ := nv.Get("NCCL_IB_HCA"); return v }())
	envWarned(t, amd, "one communicator cannot span both")
	envWarned(t, amd, "which RCCL refuses")
	envWarned(t, amd, "cuFile (GPUDirect Storage) is NVIDIA's library")

	// No rank: NCCL's node-level variables, and the warning says so.
	node := envMustBuild(t, n, EnvRequest{TopoFile: topo})
	envMustGet(t, node, "CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	envMustGet(t, node, "NCCL_TOPO_FILE", topo)
	envWarned(t, node, "no local rank on a node with NVIDIA and AMD GPUs: the node-level variables are NCCL's")

	// The all-ranks table lists what every rank shares, then what only
	// some ranks have.
	var envs []Env
	for r := range 8 {
		envs = append(envs, envMustBuild(t, n, EnvRequest{Rank: envIntp(r)}))
	}
	var b bytes.Buffer
	if err := WriteRanks(&b, n, envs); err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(b.String(), "\nRANK")
	want := `Every rank:
  NCCL_SOCKET_IFNAME==enp4s0f0
  NCCL_IB_HCA==mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1
Ranks 0-3 also:
  CUDA_DEVICE_ORDER=PCI_BUS_ID
`
	if d := cmp.Diff(want, head); d != "" {
		t.Errorf("all ranks, mixed (-want +got):\n%s", d)
	}
}

// TestEnvAMDPCIe: AMD GPUs that share no XGMI hive reach each other over
// PCIe, where HIP's peer-to-peer needs HSA_FORCE_FINE_GRAIN_PCIE=1 (RCCL
// README): a warning, never the variable.
func TestEnvAMDPCIe(t *testing.T) {
	n := fixtureNode(t, "amd-mi300x")
	for i := 4; i < 8; i++ {
		n.GPUs[i].AMD.HiveID = "0x00000000000000bb"
	}
	n.GPUs[7].AMD.HiveID = ""
	for _, r := range []int{0, 7} {
		e := envMustBuild(t, n, EnvRequest{Rank: envIntp(r)})
		envMustUnset(t, e, "HSA_FORCE_FINE_GRAIN_PCIE")
		envWarned(t, e, "AMD GPUs without an XGMI link between them: GPUs 0-3 (XGMI hive 0x7c2e5a91d04b36f8); GPUs 4-6 (XGMI hive 0x00000000000000bb); GPU 7 (no XGMI hive)")
		envWarned(t, e, "needs HSA_FORCE_FINE_GRAIN_PCIE=1")
	}
	// Through the launch view (launch.node), which drops the links but
	// keeps the hive: the same answer.
	full := envMustBuild(t, n, EnvRequest{Rank: envIntp(2)})
	lean := envMustBuild(t, n.ForLaunch(), EnvRequest{Rank: envIntp(2)})
	if d := cmp.Diff(full, lean); d != "" {
		t.Errorf("launch view differs (-full +launch):\n%s", d)
	}
	// One hive: nothing to say (amd-mi300x itself: TestEnvAMDNoCUDA).
	// An NVIDIA rank of a mixed node gets no RCCL warning.
	m := envMixedNode(t)
	m.GPUs[7].AMD.HiveID = ""
	e := envMustBuild(t, m, EnvRequest{Rank: envIntp(0)})
	for _, w := range e.Warnings {
		if strings.Contains(w, "HSA_FORCE_FINE_GRAIN_PCIE") {
			t.Errorf("NVIDIA rank warned: %s", w)
		}
	}
	envWarned(t, envMustBuild(t, m, EnvRequest{Rank: envIntp(5)}), "GPUs 4-6 (XGMI hive 0x00000000000000aa); GPU 7 (no XGMI hive)")
}

// TestEnvAMDRanksPerPartition: on amd-mi300x-cpx local ranks count
// partitions (rank 9 = HIP device 9 = GPU 1 partition 1, renderD137);
// --ranks-per-gpu 1, a device list, or GPUs split unequally map ranks to
// whole GPUs again.
func TestEnvAMDRanksPerPartition(t *testing.T) {
	n := fixtureNode(t, "amd-mi300x-cpx")
	if k := RanksPerGPU(n, EnvRequest{}); k != 8 {
		t.Fatalf("RanksPerGPU %d, want 8", k)
	}
	e := envMustBuild(t, n, EnvRequest{Rank: envIntp(9)})
	envMustGet(t, e, "GPUAFFINITY_GPU", "1")
	envMustGet(t, e, hipDevicesVar, "9")
	envMustGet(t, e, partitionVar, "1")
	envMustGet(t, e, renderNodeVar, "renderD137")
	envMustGet(t, e, "GPUAFFINITY_NICS", "mlx5_1")
	if len(e.Warnings) != 0 {
		t.Errorf("warnings %q", e.Warnings)
	}

	e = envMustBuild(t, n, EnvRequest{Rank: envIntp(1), RanksPerGPU: 1})
	envMustGet(t, e, "GPUAFFINITY_GPU", "1")
	envMustGet(t, e, hipDevicesVar, "8,9,10,11,12,13,14,15")
	envMustUnset(t, e, partitionVar)
	envWarned(t, e, "--ranks-per-gpu 8")

	preset := func(name string) (string, bool) {
		if name == "HIP_VISIBLE_DEVICES" {
			return "8", true
		}
		return "", false
	}
	if k := RanksPerGPU(n, EnvRequest{Preset: preset}); k != 1 {
		t.Errorf("with HIP_VISIBLE_DEVICES: RanksPerGPU %d, want 1", k)
	}

	n.GPUs[7].AMD.Partitions = n.GPUs[7].AMD.Partitions[:7]
	if k := RanksPerGPU(n, EnvRequest{}); k != 1 {
		t.Errorf("GPU 7 with 7 partitions: RanksPerGPU %d, want 1", k)
	}
}

// TestEnvAMDCPX: a GPU in CPX mode is 8 HIP devices; without the
// partitions' list (a node from before it) or with ranks mapped to whole
// GPUs, the rank's GPUAFFINITY_HIP_DEVICES lists all 8 with a warning. KFD numbers the
// partitions' nodes in a row, so GPU 1's are ordinals 8-15
// (ROCm/k8s-device-plugin testdata/topo-mi300-cpx: 8 nodes per GPU).
func TestEnvAMDCPX(t *testing.T) {
	n := fixtureNode(t, "amd-mi300x")
	for i := range n.GPUs {
		a := n.GPUs[i].AMD
		a.ComputePartition = "CPX"
		a.KFDNodes, a.Ordinals = nil, nil
		for p := range 8 {
			a.KFDNodes = append(a.KFDNodes, 2+8*i+p)
			a.Ordinals = append(a.Ordinals, 8*i+p)
		}
	}
	e := envMustBuild(t, n, EnvRequest{Rank: envIntp(1)})
	envMustGet(t, e, "GPUAFFINITY_GPU", "1")
	envMustGet(t, e, hipDevicesVar, "8,9,10,11,12,13,14,15")
	envMustUnset(t, e, "HIP_VISIBLE_DEVICES")
	envWarned(t, e, "GPU 1 is split into 8 compute partitions (CPX)")
	envWarned(t, e, "lists all of them (8,9,10,11,12,13,14,15)")
	envWarned(t, e, "--ranks-per-gpu 8")
}

// TestEnvAMDVisibleDevices: a caller with ROCR_VISIBLE_DEVICES or
// HIP_VISIBLE_DEVICES but no CUDA_VISIBLE_DEVICES gets the rank's GPU
// from that list (rank 1 of "4,5" is GPU 5 on amd-mi300x, where GPU i
// is HIP ordinal i) and is warned that GPUAFFINITY_HIP_DEVICES counts
// every GPU; with CUDA_VISIBLE_DEVICES (which wins) nothing is said.
func TestEnvAMDVisibleDevices(t *testing.T) {
	n := fixtureNode(t, "amd-mi300x")
	preset := func(name, value string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == name {
				return value, true
			}
			return "", false
		}
	}
	for _, name := range []string{"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"} {
		e := envMustBuild(t, n, EnvRequest{Rank: envIntp(1), Preset: preset(name, "4,5")})
		envWarned(t, e, name+`="4,5" is set and CUDA_VISIBLE_DEVICES is not`)
		envMustGet(t, e, "GPUAFFINITY_GPU", "5")
		envMustGet(t, e, hipDevicesVar, "5")
		e = envMustBuild(t, n, EnvRequest{Rank: envIntp(1), Preset: preset(name, "4,5"), CUDAVisibleDevices: envStrp("4,5")})
		if len(e.Warnings) > 0 {
			t.Errorf("%s with CUDA_VISIBLE_DEVICES: %q", name, e.Warnings)
		}
		envMustGet(t, e, "GPUAFFINITY_GPU", "5")
		envMustGet(t, e, hipDevicesVar, "5")
	}
}

// TestEnvAMDTopoFile: on an AMD-only node the file is RCCL's, and every
// rank gets NCCL_TOPO_FILE; cuFile's is NVIDIA's and is not set.
func TestEnvAMDTopoFile(t *testing.T) {
	for _, m := range amdFixtures {
		n := fixtureNode(t, m)
		e := envMustBuild(t, n, EnvRequest{Rank: envIntp(3), TopoFile: "/run/gpuaffinity/nccl-topo.xml", CuFileJSON: "/run/c.json"})
		envMustGet(t, e, "NCCL_TOPO_FILE", "/run/gpuaffinity/nccl-topo.xml")
		envMustUnset(t, e, "CUFILE_ENV_PATH_JSON")
		envWarned(t, e, "cuFile (GPUDirect Storage) is NVIDIA's library")
	}
}

// TestEnvAMDNotInKFD: an AMD GPU KFD does not list has no HIP device.
func TestEnvAMDNotInKFD(t *testing.T) {
	n := fixtureNode(t, "amd-mi300x")
	n.GPUs[2].AMD, n.GPUs[2].State = nil, topology.GPUNotInKFD
	e := envMustBuild(t, n, EnvRequest{Rank: envIntp(2)})
	envMustUnset(t, e, hipDevicesVar)
	envWarned(t, e, "GPU 2 (0000:5b:00.0) is not a HIP device (state not-in-kfd")
}
