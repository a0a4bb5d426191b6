package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/ncclxml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The acceptance of gb200-nvl72-tray-no-nvml: the GB200 NVL72 compute
// tray of gb200-nvl72-tray with libnvidia-ml.so not found. Every answer
// below is written by hand from the tray's layout (the base spec's
// sources): two Grace CPUs of 72 cores without SMT (node 0 = CPUs 0-71,
// node 1 = 72-143), GPUs 0008:01:00.0 and 0009:01:00.0 on Grace 0 with
// HBM nodes 2 and 10, 0018:01:00.0 and 0019:01:00.0 on Grace 1 with HBM
// nodes 18 and 26 (the driver's numa_status, the GPU NUMA IDs of the
// GB200 nvidia-smi topo -m in sglang#11208); ConnectX-7 mlx5_0, mlx5_1
// on Grace 0, mlx5_4, mlx5_5 on Grace 1; the default route on
// enP6p3s0f0np0 (BlueField-3 P1).
const gb200NoNVML = "gb200-nvl72-tray-no-nvml"

// topo -o json: NVML is reported failed (library not found), each GPU is
// state no-nvml, and its memory node comes from numa_status, online;
// the GPUs' own numa_node (the Grace's) still decides their locality.
func TestGB200NoNVMLTopo(t *testing.T) {
	out := mustRun(t, "topo", "--demo", gb200NoNVML, "-o", "json")
	var n topology.Node
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		t.Fatal(err)
	}
	if n.NVML.Source != "none" || !n.NVML.Failed || !strings.Contains(n.NVML.Error, "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("nvml %+v: want source none, failed, naming ERROR_LIBRARY_NOT_FOUND", n.NVML)
	}
	want := []struct {
		bus        string
		mem, node  int
		cpus, nics string
	}{
		{"0008:01:00.0", 2, 0, "0-71", "mlx5_0"},
		{"0009:01:00.0", 10, 0, "0-71", "mlx5_1"},
		{"0018:01:00.0", 18, 1, "72-143", "mlx5_4"},
		{"0019:01:00.0", 26, 1, "72-143", "mlx5_5"},
	}
	if len(n.GPUs) != len(want) {
		t.Fatalf("%d GPUs, want %d", len(n.GPUs), len(want))
	}
	for i, w := range want {
		g := n.GPUs[i]
		if g.Index != i || g.BusID != w.bus || g.State != topology.GPUNoNVML || g.NVMLIndex != nil {
			t.Errorf("GPU %d: index %d bus %s state %s nvml_index %v; want %s, no-nvml", i, g.Index, g.BusID, g.State, g.NVMLIndex, w.bus)
		}
		if g.GPUNUMAID == nil || *g.GPUNUMAID != w.mem || g.GPUNUMASource != topology.GPUNUMAFromProcfs || g.GPUNUMAStatus != "online" {
			t.Errorf("GPU %d: gpu_numa_id %v source %q status %q; want %d from numa_status, online", i, g.GPUNUMAID, g.GPUNUMASource, g.GPUNUMAStatus, w.mem)
		}
		if g.NUMANode == nil || *g.NUMANode != w.node || g.Locality.Node == nil || *g.Locality.Node != w.node ||
			g.Locality.CPUs.String() != w.cpus || g.Locality.Source != topology.LocalityNUMANode {
			t.Errorf("GPU %d: numa_node %v locality %+v; want node %d, CPUs %s from numa_node", i, g.NUMANode, g.Locality, w.node, w.cpus)
		}
		// The driver's information file still names the model and minor.
		if g.Model != "NVIDIA GB200" || g.Minor == nil || *g.Minor != i || g.InfoSource != "procfs" {
			t.Errorf("GPU %d: model %q minor %v info source %q", i, g.Model, g.Minor, g.InfoSource)
		}
		if p := n.Pairs[i]; p.GPU != i || strings.Join(p.NICs, ",") != w.nics || p.Class != topology.ClassNODE || p.Decided {
			t.Errorf("pair %d: %+v; want %s at NODE, undecided", i, p, w.nics)
		}
	}
	for _, w := range n.Warnings {
		if strings.Contains(w, "numa_status") || strings.Contains(w, "memory node") {
			t.Errorf("warning about the memory nodes on a healthy tray: %q", w)
		}
	}
	// The table's GPU NUMA ID column has them too.
	if tab := mustRun(t, "topo", "--demo", gb200NoNVML); !strings.Contains(tab, "GPU NUMA ID") {
		t.Errorf("table without the GPU NUMA ID column:\n%s", tab)
	}
}

// env, rank 0 and the last (3): the base's answer, none of it from NVML.
// InfiniBand compute HCAs in bus order (0000, 0002, 0010, 0012), the
// front end the default route's, the GPU's Grace node for CPUs and
// memory, its NODE pair for UCX. No multi-node NVLink warning: without
// NVML no GPU reports a cluster UUID.
func TestGB200NoNVMLEnv(t *testing.T) {
	envCleanEnv(t)
	const node = `export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1'
`
	for rank, want := range map[string]string{
		"0": node + `export GPUAFFINITY_GPU='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-71'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
`,
		"3": node + `export GPUAFFINITY_GPU='3'
export GPUAFFINITY_NICS='mlx5_5'
export GPUAFFINITY_CPUS='72-143'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_5:1'
`,
	} {
		out, stderr, err := envRun(t, "--demo", gb200NoNVML, "--local-rank", rank)
		if err != nil {
			t.Fatalf("rank %s: %v", rank, err)
		}
		if out != want {
			t.Errorf("rank %s:\n%s\nwant\n%s", rank, out, want)
		}
		if strings.Contains(stderr, "multi-node NVLink") || strings.Contains(stderr, "numa_status") {
			t.Errorf("rank %s: stderr %q", rank, stderr)
		}
	}
}

// nccl-topo: what NVML adds is nothing the file holds (no <gpu>, no
// <nvlink>), so the file is the base tray's, byte for byte. Each GPU
// hangs straight off its Grace's cpu (its parent is a root port, which
// NCCL's walk leaves out), each ConnectX-7 below its first bridge; and a
// C2C GPU, which the GPU memory node from numa_status marks, is never
// put under a synthesized PCIe switch with its NODE NIC (NCCL reaches the
// NIC over C2C; a switch would claim PIX).
func TestGB200NoNVMLNCCLTopo(t *testing.T) {
	out := mustRun(t, "nccl-topo", "--demo", gb200NoNVML)
	if base := mustRun(t, "nccl-topo", "--demo", "gb200-nvl72-tray"); out != base {
		t.Errorf("nccl-topo differs from the tray with NVML:\n%s\nbase:\n%s", out, base)
	}
	if err := ncclxml.Check([]byte(out)); err != nil {
		t.Fatalf("loader check: %v\n%s", err, out)
	}
	for _, w := range []string{
		`<cpu numaid="0" `, `<cpu numaid="1" `,
		`<pci busid="0008:01:00.0" `, `<pci busid="0019:01:00.0" `,
		`<pci busid="0000:01:00.0" `, `<pci busid="0000:03:00.0" `, `<pci busid="0012:03:00.0" `,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("no %s in\n%s", w, out)
		}
	}
	for _, bad := range []string{"<gpu", "<nvlink", "<nic", "0006:03:00.0", "ffff:ff:"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s in\n%s", bad, out)
		}
	}
	syn := mustRun(t, "nccl-topo", "--demo", gb200NoNVML, "--synthesize-switches")
	if strings.Contains(syn, "ffff:ff:") {
		t.Errorf("--synthesize-switches grouped a C2C GPU with a NIC:\n%s", syn)
	}
}

// cpumap: exclusive (the default) splits each Grace's 72 cores between
// its two GPUs, 36 each, memory on the Grace's node (the GPU's locality
// node; the HBM node is never a binding target, docs/cpumap.md); node
// mode gives each GPU its whole Grace. exec --dry-run binds rank 3 the
// same way.
func TestGB200NoNVMLCpumap(t *testing.T) {
	out := mustRun(t, "cpumap", "--demo", gb200NoNVML)
	lines := strings.Split(out, "\n")
	for i, want := range []string{
		"RANK GPU NODE MODE CPUS MEMS",
		"0 0 0 exclusive 0-35 0",
		"1 1 0 exclusive 36-71 0",
		"2 2 1 exclusive 72-107 1",
		"3 3 1 exclusive 108-143 1",
	} {
		if i >= len(lines) || strings.Join(strings.Fields(lines[i]), " ") != want {
			t.Errorf("line %d: want %q in\n%s", i, want, out)
		}
	}
	if !strings.Contains(out, "Leftover CPUs: -") {
		t.Errorf("leftover CPUs on a tray whose 144 cores divide evenly:\n%s", out)
	}
	node := mustRun(t, "cpumap", "--demo", gb200NoNVML, "--mode", "node", "-o", "numactl", "--local-rank", "2")
	if strings.TrimSpace(node) != "--physcpubind=72-143 --membind=1" {
		t.Errorf("node mode rank 2: %q", node)
	}

	plan, stderr, err := runErr(t, "exec", "--dry-run", "--demo", gb200NoNVML, "--local-rank", "3", "--", "true")
	if err != nil {
		t.Fatalf("exec --dry-run: %v: %s", err, stderr)
	}
	for field, want := range map[string]string{
		"gpu": "3", "cpus": "108-143 (exclusive map)", "mems": "1 (exclusive map)", "policy": "bind",
	} {
		if got := planField(t, plan, field); got != want {
			t.Errorf("exec plan %s: %q, want %q", field, got, want)
		}
	}
}

// check: NVML is there and failed, so the gate does not pass the GPUs it
// could not see: gpu.visible fails naming NVML's answer, the checks that
// read NVML's answers say so instead of passing, and the exit is 1.
func TestGB200NoNVMLCheck(t *testing.T) {
	root := checkRoot(t, gb200NoNVML)
	out, code := runCheck(t, "--root", root, "--interval", "0", "-o", "json")
	var rep health.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if code != checkExitUnhealthy || rep.Healthy {
		t.Errorf("exit %d, healthy %v; want unhealthy", code, rep.Healthy)
	}
	byID := map[string]health.Result{}
	for _, r := range rep.Results {
		byID[r.ID] = r
	}
	if r := byID["gpu.visible"]; r.Verdict != health.Fail || !strings.Contains(r.Reason, "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("gpu.visible: %+v; want fail naming ERROR_LIBRARY_NOT_FOUND", r)
	}
	for _, id := range []string{"gpu.ecc", "gpu.row_remap", "gpu.fabric", "gpu.persistence"} {
		if r := byID[id]; r.Verdict == health.Pass || !strings.Contains(r.Reason, "NVML failed") {
			t.Errorf("%s: %+v; want not checked: NVML failed", id, r)
		}
	}
	// The tree does not need NVML: the NICs are still aligned as the
	// base's (NODE, one C2C hop).
	if r := byID["topo.aligned"]; r.Verdict == health.Fail {
		t.Errorf("topo.aligned: %+v", r)
	}
}

// gres: the driver's information file names the model (Type=gb200) and
// minor (File=/dev/nvidiaN); Cores= are Slurm core indices, which on
// Grace (no SMT, socket-major) equal the CPU ids: 0-71 and 72-143. No
// Links=: without NVML no NVLink is seen.
func TestGB200NoNVMLGres(t *testing.T) {
	out, _, err := gresRun(t, "--demo", gb200NoNVML)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nName=gpu Type=gb200 File=/dev/nvidia0 Cores=0-71\n",
		"\nName=gpu Type=gb200 File=/dev/nvidia1 Cores=0-71\n",
		"\nName=gpu Type=gb200 File=/dev/nvidia2 Cores=72-143\n",
		"\nName=gpu Type=gb200 File=/dev/nvidia3 Cores=72-143\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "Name=gpu "); n != 4 || strings.Contains(out, "Links=") {
		t.Errorf("%d GPU lines (want 4), Links= present %v:\n%s", n, strings.Contains(out, "Links="), out)
	}
}
