package gres

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func node(t *testing.T, machine string) topology.Node {
	t.Helper()
	n, err := discover.Discover(discover.Options{Root: fakesystest.Root(t, machine)})
	if err != nil {
		t.Fatalf("discover %s: %v", machine, err)
	}
	return n
}

const header = "# Slurm gres.conf written by gpuaffinity gres (docs/gres.md).\n" +
	"# Cores= are Slurm core indices (socket-major, one per physical core), not CPU ids.\n" +
	"AutoDetect=off\n"

// The expectations are written by hand from each machine's published
// layout (the fixture specs' sources), never copied from the output.
var golden = map[string]string{
	// DGX H100: 2 x 56-core Xeon 8480C with SMT (CPUs 0-55,112-167 on
	// socket 0): Slurm cores 0-55 are socket 0's, 56-111 socket 1's. GPUs
	// 0-3 sit on CPU 0, 4-7 on CPU 1; every pair is NV18 through the
	// NVSwitches.
	"dgx-h100": `Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55 Links=-1,18,18,18,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia1 Cores=0-55 Links=18,-1,18,18,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia2 Cores=0-55 Links=18,18,-1,18,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia3 Cores=0-55 Links=18,18,18,-1,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia4 Cores=56-111 Links=18,18,18,18,-1,18,18,18
Name=gpu Type=h100 File=/dev/nvidia5 Cores=56-111 Links=18,18,18,18,18,-1,18,18
Name=gpu Type=h100 File=/dev/nvidia6 Cores=56-111 Links=18,18,18,18,18,18,-1,18
Name=gpu Type=h100 File=/dev/nvidia7 Cores=56-111 Links=18,18,18,18,18,18,18,-1
`,
	// DGX B200: 2 x 56-core Xeon 8570 with SMT (CPUs 0-55,112-167 on
	// socket 0): Slurm cores 0-55 socket 0's, 56-111 socket 1's; GPUs 0-3
	// on CPU 0, 4-7 on CPU 1; every pair NV18 through the two NVLink 5
	// switches.
	"dgx-b200": `Name=gpu Type=b200 File=/dev/nvidia0 Cores=0-55 Links=-1,18,18,18,18,18,18,18
Name=gpu Type=b200 File=/dev/nvidia1 Cores=0-55 Links=18,-1,18,18,18,18,18,18
Name=gpu Type=b200 File=/dev/nvidia2 Cores=0-55 Links=18,18,-1,18,18,18,18,18
Name=gpu Type=b200 File=/dev/nvidia3 Cores=0-55 Links=18,18,18,-1,18,18,18,18
Name=gpu Type=b200 File=/dev/nvidia4 Cores=56-111 Links=18,18,18,18,-1,18,18,18
Name=gpu Type=b200 File=/dev/nvidia5 Cores=56-111 Links=18,18,18,18,18,-1,18,18
Name=gpu Type=b200 File=/dev/nvidia6 Cores=56-111 Links=18,18,18,18,18,18,-1,18
Name=gpu Type=b200 File=/dev/nvidia7 Cores=56-111 Links=18,18,18,18,18,18,18,-1
`,
	// p5.48xlarge: 2 x 48-core EPYC 7R13 with SMT (192 vCPUs): cores 0-47
	// on socket 0 (GPUs 0-3), 48-95 on socket 1 (GPUs 4-7); NV18 pairs.
	"aws-p5": `Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-47 Links=-1,18,18,18,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia1 Cores=0-47 Links=18,-1,18,18,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia2 Cores=0-47 Links=18,18,-1,18,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia3 Cores=0-47 Links=18,18,18,-1,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia4 Cores=48-95 Links=18,18,18,18,-1,18,18,18
Name=gpu Type=h100 File=/dev/nvidia5 Cores=48-95 Links=18,18,18,18,18,-1,18,18
Name=gpu Type=h100 File=/dev/nvidia6 Cores=48-95 Links=18,18,18,18,18,18,-1,18
Name=gpu Type=h100 File=/dev/nvidia7 Cores=48-95 Links=18,18,18,18,18,18,18,-1
`,
	// p4d.24xlarge: 2 x 24-core Xeon 8275CL with SMT; A100 on NVSwitch, 12
	// NVLinks each.
	"aws-p4d": `Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-23 Links=-1,12,12,12,12,12,12,12
Name=gpu Type=a100 File=/dev/nvidia1 Cores=0-23 Links=12,-1,12,12,12,12,12,12
Name=gpu Type=a100 File=/dev/nvidia2 Cores=0-23 Links=12,12,-1,12,12,12,12,12
Name=gpu Type=a100 File=/dev/nvidia3 Cores=0-23 Links=12,12,12,-1,12,12,12,12
Name=gpu Type=a100 File=/dev/nvidia4 Cores=24-47 Links=12,12,12,12,-1,12,12,12
Name=gpu Type=a100 File=/dev/nvidia5 Cores=24-47 Links=12,12,12,12,12,-1,12,12
Name=gpu Type=a100 File=/dev/nvidia6 Cores=24-47 Links=12,12,12,12,12,12,-1,12
Name=gpu Type=a100 File=/dev/nvidia7 Cores=24-47 Links=12,12,12,12,12,12,12,-1
`,
	// ND H100 v5: 96 vCPUs, SMT off (one CPU per core), 48 per socket.
	"azure-nd-h100-v5": `Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-47 Links=-1,18,18,18,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia1 Cores=0-47 Links=18,-1,18,18,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia2 Cores=0-47 Links=18,18,-1,18,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia3 Cores=0-47 Links=18,18,18,-1,18,18,18,18
Name=gpu Type=h100 File=/dev/nvidia4 Cores=48-95 Links=18,18,18,18,-1,18,18,18
Name=gpu Type=h100 File=/dev/nvidia5 Cores=48-95 Links=18,18,18,18,18,-1,18,18
Name=gpu Type=h100 File=/dev/nvidia6 Cores=48-95 Links=18,18,18,18,18,18,-1,18
Name=gpu Type=h100 File=/dev/nvidia7 Cores=48-95 Links=18,18,18,18,18,18,18,-1
`,
	// 8 x MI300X on 2 x EPYC 9654 with SMT (CPUs 0-95,192-287 on socket
	// 0): Slurm cores 0-95 socket 0's, 96-191 socket 1's; GPUs 0-3 on CPU
	// 0, 4-7 on CPU 1 (AMD's topology-mapping.md). Each GPU's device is
	// its render node, 8 minors apart (renderD128, 136, ... as OCI's
	// gres.conf for BM.GPU.MI300X.8 lists them); every pair joined by one
	// XGMI link (a fully connected hive). Type from "AMD Instinct MI300X".
	"amd-mi300x": `Name=gpu Type=mi300x File=/dev/dri/renderD128 Cores=0-95 Links=-1,1,1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD136 Cores=0-95 Links=1,-1,1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD144 Cores=0-95 Links=1,1,-1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD152 Cores=0-95 Links=1,1,1,-1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD160 Cores=96-191 Links=1,1,1,1,-1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD168 Cores=96-191 Links=1,1,1,1,1,-1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD176 Cores=96-191 Links=1,1,1,1,1,1,-1,1
Name=gpu Type=mi300x File=/dev/dri/renderD184 Cores=96-191 Links=1,1,1,1,1,1,1,-1
`,
	// amd-mi300x with Pollara NICs: the GPUs, CPUs and XGMI hive are
	// amd-mi300x's.
	"amd-mi300x-pollara": `Name=gpu Type=mi300x File=/dev/dri/renderD128 Cores=0-95 Links=-1,1,1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD136 Cores=0-95 Links=1,-1,1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD144 Cores=0-95 Links=1,1,-1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD152 Cores=0-95 Links=1,1,1,-1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD160 Cores=96-191 Links=1,1,1,1,-1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD168 Cores=96-191 Links=1,1,1,1,1,-1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD176 Cores=96-191 Links=1,1,1,1,1,1,-1,1
Name=gpu Type=mi300x File=/dev/dri/renderD184 Cores=96-191 Links=1,1,1,1,1,1,1,-1
`,
	// amd-mi300x-faults: GPU 6 lost its direct XGMI links to GPUs 0 and 1
	// (its description), so those pairs read 0; the rest is amd-mi300x's.
	"amd-mi300x-faults": `Name=gpu Type=mi300x File=/dev/dri/renderD128 Cores=0-95 Links=-1,1,1,1,1,1,0,1
Name=gpu Type=mi300x File=/dev/dri/renderD136 Cores=0-95 Links=1,-1,1,1,1,1,0,1
Name=gpu Type=mi300x File=/dev/dri/renderD144 Cores=0-95 Links=1,1,-1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD152 Cores=0-95 Links=1,1,1,-1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD160 Cores=96-191 Links=1,1,1,1,-1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD168 Cores=96-191 Links=1,1,1,1,1,-1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD176 Cores=96-191 Links=0,0,1,1,1,1,-1,1
Name=gpu Type=mi300x File=/dev/dri/renderD184 Cores=96-191 Links=1,1,1,1,1,1,1,-1
`,
	// ND MI300X v5: 96 vCPUs, SMT off (one CPU per core), 48 per socket;
	// the VF (1002:74b5, "AMD Instinct MI300X VF") is still Type=mi300x.
	"azure-nd-mi300x-v5": `Name=gpu Type=mi300x File=/dev/dri/renderD128 Cores=0-47 Links=-1,1,1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD136 Cores=0-47 Links=1,-1,1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD144 Cores=0-47 Links=1,1,-1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD152 Cores=0-47 Links=1,1,1,-1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD160 Cores=48-95 Links=1,1,1,1,-1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD168 Cores=48-95 Links=1,1,1,1,1,-1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD176 Cores=48-95 Links=1,1,1,1,1,1,-1,1
Name=gpu Type=mi300x File=/dev/dri/renderD184 Cores=48-95 Links=1,1,1,1,1,1,1,-1
`,
	// BM.GPU.MI300X.8: 2 x 56-core Xeon 8480+ with SMT: Slurm cores 0-55
	// socket 0's (GPUs 0-3), 56-111 socket 1's; render nodes as OCI's own
	// gres.conf lists them.
	"oci-bm-gpu-mi300x": `Name=gpu Type=mi300x File=/dev/dri/renderD128 Cores=0-55 Links=-1,1,1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD136 Cores=0-55 Links=1,-1,1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD144 Cores=0-55 Links=1,1,-1,1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD152 Cores=0-55 Links=1,1,1,-1,1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD160 Cores=56-111 Links=1,1,1,1,-1,1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD168 Cores=56-111 Links=1,1,1,1,1,-1,1,1
Name=gpu Type=mi300x File=/dev/dri/renderD176 Cores=56-111 Links=1,1,1,1,1,1,-1,1
Name=gpu Type=mi300x File=/dev/dri/renderD184 Cores=56-111 Links=1,1,1,1,1,1,1,-1
`,
	// GH200: one 72-core Grace (no SMT), one GPU, no GPU-GPU NVLink.
	"grace-hopper": "Name=gpu Type=gh200 File=/dev/nvidia0 Cores=0-71\n",
	// GB200 NVL72 compute tray: 2 x 72-core Grace, no SMT (CPUs 0-71 on
	// socket 0, 72-143 on socket 1: Slurm cores are CPU ids); GPUs 0,1 on
	// Grace 0, 2,3 on Grace 1; every pair NV18 through the rack's NVLink
	// switch trays. NVML names the GPU "NVIDIA GB200".
	"gb200-nvl72-tray": `Name=gpu Type=gb200 File=/dev/nvidia0 Cores=0-71 Links=-1,18,18,18
Name=gpu Type=gb200 File=/dev/nvidia1 Cores=0-71 Links=18,-1,18,18
Name=gpu Type=gb200 File=/dev/nvidia2 Cores=72-143 Links=18,18,-1,18
Name=gpu Type=gb200 File=/dev/nvidia3 Cores=72-143 Links=18,18,18,-1
`,
	// The real H200 VM capture: 16 vCPUs, each its own core (every
	// thread_siblings_list is one CPU), numa_node -1 but local_cpulist
	// 0-15; one GPU, NVLink not visible.
	"h200-vm": "Name=gpu Type=h200 File=/dev/nvidia0 Cores=0-15\n",
}

func TestGresConfFixtures(t *testing.T) {
	for machine, want := range golden {
		t.Run(machine, func(t *testing.T) {
			lines, warns, err := GresConf(node(t, machine), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != 0 {
				t.Errorf("warnings: %q", warns)
			}
			var buf bytes.Buffer
			if err := Write(&buf, lines); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != header+want {
				t.Errorf("got\n%s\nwant\n%s%s", got, header, want)
			}
		})
	}
}

func TestCoreIndexSMTAndInterleavedSockets(t *testing.T) {
	// Sockets interleaved CPU by CPU (even CPUs on socket 0, odd on 1),
	// SMT siblings n+8: hwloc, hence Slurm, numbers socket 0's cores first.
	var cores []topology.Core
	for cpu := range 8 {
		cores = append(cores, topology.Core{Socket: cpu % 2, ID: cpu / 2, CPUs: cpuset.Of(cpu, cpu+8)})
	}
	got := CoreIndex(topology.CPUInfo{Cores: cores})
	want := map[int]int{0: 0, 8: 0, 2: 1, 10: 1, 4: 2, 6: 3, 1: 4, 9: 4, 3: 5, 5: 6, 7: 7, 15: 7}
	for cpu, idx := range want {
		if got[cpu] != idx {
			t.Errorf("CPU %d: core %d, want %d", cpu, got[cpu], idx)
		}
	}
	if len(got) != 16 {
		t.Errorf("%d CPUs mapped, want 16", len(got))
	}
}

func TestGresConfDegraded(t *testing.T) {
	n := node(t, "dgx-h100")
	// GPU 2: locality unknown; GPU 5: no minor (NVML absent).
	n.NVML.Source = "none"
	n.GPUs[2].NUMANode = nil
	n.GPUs[2].LocalCPUs = cpuset.Set{}
	n.GPUs[2].NVMLCPUAffinity = cpuset.Set{}
	n.GPUs[5].Minor = nil
	n.GPUs[5].Model = ""
	n.Warnings = nil
	warns0 := topology.ResolveLocality(&n)
	if len(warns0) != 1 || !strings.Contains(warns0[0], "GPU 2 (0000:52:00.0): no source gives its CPUs") {
		t.Errorf("locality warnings %q", warns0)
	}
	lines, warns, err := GresConf(n, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lines[2].String(); got != "Name=gpu Type=h100 File=/dev/nvidia2 Links=18,18,-1,18,18,18,18,18" {
		t.Errorf("GPU 2: %s", got)
	}
	if got := lines[5].String(); got != "Name=gpu File=/dev/nvidia5 Cores=56-111 Links=18,18,18,18,18,-1,18,18" {
		t.Errorf("GPU 5: %s", got)
	}
	joined := strings.Join(warns, "\n")
	for _, w := range []string{"GPU 2 (0000:52:00.0): locality unknown", "GPU 5 (0000:c3:00.0): no NVML minor number", "GPU 5 (0000:c3:00.0): model unknown"} {
		if !strings.Contains(joined, w) {
			t.Errorf("no warning %q in\n%s", w, joined)
		}
	}
}

func TestGresConfMinorOrderAndOptions(t *testing.T) {
	n := node(t, "dgx-h100")
	// Minors out of bus order: the lines stay in bus order (Slurm's device
	// order) and File= follows the minor.
	m0, m1 := 1, 0
	n.GPUs[0].Minor, n.GPUs[1].Minor = &m0, &m1
	lines, _, err := GresConf(n, Options{Type: "H100_SXM", DevDir: "/tmp/dev", NoLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := lines[0].String(); got != "Name=gpu Type=H100_SXM File=/tmp/dev/nvidia1 Cores=0-55" {
		t.Errorf("line 0: %s", got)
	}
	if got := lines[1].String(); got != "Name=gpu Type=H100_SXM File=/tmp/dev/nvidia0 Cores=0-55" {
		t.Errorf("line 1: %s", got)
	}

	n.GPUs[0].Minor = &m1
	if _, _, err := GresConf(n, Options{}); err == nil || !strings.Contains(err.Error(), "both map to /dev/nvidia0") {
		t.Errorf("duplicate minor: err %v", err)
	}
	for _, bad := range []string{"h100 sxm", "gpu:h100", "a=b", "x,y"} {
		if _, _, err := GresConf(n, Options{Type: bad}); err == nil {
			t.Errorf("type %q accepted", bad)
		}
	}
	if _, _, err := GresConf(n, Options{DevDir: "dev"}); err == nil {
		t.Error("relative DevDir accepted")
	}
	if _, _, err := GresConf(topology.Node{}, Options{}); err == nil {
		t.Error("no GPUs: no error")
	}
}

func TestGresConfNotInNVML(t *testing.T) {
	n := node(t, "aws-p5")
	n.GPUs[3].Minor = nil
	n.GPUs[3].State = topology.GPUNotInNVML
	lines, warns, err := GresConf(n, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7", len(lines))
	}
	if got := lines[3].String(); got != "Name=gpu Type=h100 File=/dev/nvidia4 Cores=48-95 Links=18,18,18,-1,18,18,18" {
		t.Errorf("line 3: %s", got)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "NVML does not list it") {
		t.Errorf("warnings %q", warns)
	}
}

func TestTypeName(t *testing.T) {
	for model, want := range map[string]string{
		"NVIDIA H100 80GB HBM3":   "h100",
		"NVIDIA A100-SXM4-40GB":   "a100",
		"NVIDIA GH200 480GB":      "gh200",
		"NVIDIA H200":             "h200",
		"Tesla V100-SXM2-16GB":    "v100",
		"NVIDIA RTX A6000":        "rtx_a6000",
		"NVIDIA GeForce RTX 4090": "rtx_4090",
		"NVIDIA L40S":             "l40s",
		"NVIDIA H100 NVL":         "h100",
		"":                        "",
	} {
		got := TypeName(model)
		if got != want {
			t.Errorf("TypeName(%q) = %q, want %q", model, got, want)
		}
		// Slurm's AutoDetect=nvml type: lower case, spaces to '_'; ours
		// must be a substring so the two match.
		auto := strings.ReplaceAll(strings.ToLower(model), " ", "_")
		if !strings.Contains(auto, got) {
			t.Errorf("TypeName(%q) = %q is not a substring of %q", model, got, auto)
		}
	}
}

// Without NVML the driver's own files still give each GPU's model and
// minor number (/proc/driver/nvidia/gpus/<bus id>/information): Type= and
// File= as with NVML, and no warning about either. Links= needs NVML.
func TestGresConfFromProcfs(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	if err := os.Remove(filepath.Join(root, "nvml.json")); err != nil {
		t.Fatal(err)
	}
	n, err := discover.Discover(discover.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if n.NVML.Source != "none" {
		t.Fatalf("NVML %+v", n.NVML)
	}
	lines, warns, err := GresConf(n, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55", "Name=gpu Type=h100 File=/dev/nvidia7 Cores=56-111"} {
		k := []int{0, 7}[i]
		if got := lines[k].String(); got != want {
			t.Errorf("GPU %d: %s, want %s", k, got, want)
		}
	}
	for _, w := range warns {
		if strings.Contains(w, "minor") || strings.Contains(w, "model unknown") {
			t.Errorf("warning %q: procfs names both", w)
		}
	}
}

// A node with an NVIDIA and an AMD GPU (mixed-h100-mi210: H100 PCIe GPU
// 0, MI210 GPU 1): each line has its vendor's device file and type, and
// a warning says Slurm's one numbering is neither runtime's.
func TestGresConfMixedVendors(t *testing.T) {
	lines, warns, err := GresConf(node(t, "mixed-h100-mi210"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, lines); err != nil {
		t.Fatal(err)
	}
	// One EPYC 9354, 32 cores: Slurm cores 0-31; no NVLink or XGMI pair.
	want := header + "Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-31\nName=gpu Type=mi210 File=/dev/dri/renderD128 Cores=0-31\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "NVIDIA and AMD GPUs under one Name=gpu") {
		t.Errorf("warnings %q", warns)
	}
}
