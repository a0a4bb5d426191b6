package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/ncclxml"
)

// TestAMDEnvCmd: env on amd-mi300x, written by hand from the fixture's
// sources (AMD's topology-mapping.md: GPU k <-> its NIC, GPUs 0-3 on CPU
// 0; 2 x EPYC 9654 with SMT, node 0 = CPUs 0-95,192-287): RCCL reads
// NCCL's variables, no CUDA_DEVICE_ORDER (HIP does not read it), no
// HIP_VISIBLE_DEVICES (env sets no CUDA_VISIBLE_DEVICES for NVIDIA ranks
// either), the HIP ordinal in GPUAFFINITY_HIP_DEVICES, nothing on stderr.
func TestAMDEnvCmd(t *testing.T) {
	envCleanEnv(t)
	const node = `export NCCL_SOCKET_IFNAME='=ens99f0np0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1'
export NCCL_IB_GID_INDEX='3'
`
	for rank, want := range map[string]string{
		"0": node + `export GPUAFFINITY_GPU='0'
export GPUAFFINITY_HIP_DEVICES='0'
export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-95,192-287'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
`,
		"7": node + `export GPUAFFINITY_GPU='7'
export GPUAFFINITY_HIP_DEVICES='7'
export GPUAFFINITY_NICS='mlx5_7'
export GPUAFFINITY_CPUS='96-191,288-383'
export GPUAFFINITY_NUMA='1'
export UCX_NET_DEVICES='mlx5_7:1'
`,
	} {
		out, stderr, err := envRun(t, "--demo", "amd-mi300x", "--local-rank", rank)
		if err != nil {
			t.Fatalf("rank %s: %v", rank, err)
		}
		if out != want {
			t.Errorf("rank %s:\n%s\nwant\n%s", rank, out, want)
		}
		if stderr != "" {
			t.Errorf("rank %s: stderr %q", rank, stderr)
		}
	}
	out, _, err := envRun(t, "--demo", "amd-mi300x", "--all-ranks")
	if err != nil {
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
	if out != want {
		t.Errorf("--all-ranks:\n%s\nwant\n%s", out, want)
	}
	// -o json: every rank's HIP ordinal.
	out, _, err = envRun(t, "--demo", "amd-mi300x", "--all-ranks", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ranks []struct {
		GPU int               `json:"gpu"`
		Env map[string]string `json:"env"`
	}
	if err := json.Unmarshal([]byte(out), &ranks); err != nil || len(ranks) != 8 {
		t.Fatalf("%v: %d ranks\n%s", err, len(ranks), out)
	}
	for i, r := range ranks {
		if r.GPU != i || r.Env["GPUAFFINITY_HIP_DEVICES"] != string(rune('0'+i)) || r.Env["CUDA_DEVICE_ORDER"] != "" {
			t.Errorf("rank %d: gpu %d env %v", i, r.GPU, r.Env)
		}
	}
}

// TestAMDEnvCmdFixtures: the other AMD layouts, one rank each, by hand:
// Azure ND MI300X v5 (InfiniBand mlx5_ib0..7, no GID index, Azure's
// relaxed ordering; GPU 0 0011 <-> mlx5_ib0 0010 in RCCL's VM model),
// OCI BM.GPU.MI300X.8 (RoCE, OCI's list mlx5_0,2,3,4,5,7,8,9, GID 3 and
// OCI's RoCE settings; GPU 7 da <-> rdma7 = mlx5_9), the Pollara node
// (ionic_N as mlx5 would be, GID 1; GPU 0 05 <-> 09 = benic1p1 = ionic_6).
func TestAMDEnvCmdFixtures(t *testing.T) {
	envCleanEnv(t)
	for _, tt := range []struct {
		demo, rank string
		want       []string
	}{
		{"azure-nd-mi300x-v5", "0", []string{
			"NCCL_SOCKET_IFNAME='=eth0'",
			"NCCL_IB_HCA='=mlx5_ib0:1,mlx5_ib1:1,mlx5_ib2:1,mlx5_ib3:1,mlx5_ib4:1,mlx5_ib5:1,mlx5_ib6:1,mlx5_ib7:1'",
			"NCCL_IB_PCI_RELAXED_ORDERING='1'", "UCX_IB_PCI_RELAXED_ORDERING='on'",
			"GPUAFFINITY_GPU='0'", "GPUAFFINITY_HIP_DEVICES='0'", "GPUAFFINITY_NICS='mlx5_ib0'",
			"GPUAFFINITY_CPUS='0-47'", "GPUAFFINITY_NUMA='0'", "UCX_NET_DEVICES='mlx5_ib0:1'"}},
		{"oci-bm-gpu-mi300x", "7", []string{
			"NCCL_SOCKET_IFNAME='=eth0'",
			"NCCL_IB_HCA='=mlx5_0:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_7:1,mlx5_8:1,mlx5_9:1'",
			"NCCL_IB_GID_INDEX='3'", "NCCL_IB_QPS_PER_CONNECTION='1'", "NCCL_IB_SPLIT_DATA_ON_QPS='0'",
			"NCCL_IB_TC='41'", "NCCL_IB_SL='0'", "NCCL_IB_TIMEOUT='22'",
			"GPUAFFINITY_GPU='7'", "GPUAFFINITY_HIP_DEVICES='7'", "GPUAFFINITY_NICS='mlx5_9'",
			"GPUAFFINITY_CPUS='56-111,168-223'", "GPUAFFINITY_NUMA='1'", "UCX_NET_DEVICES='mlx5_9:1'"}},
		{"amd-mi300x-pollara", "0", []string{
			"NCCL_SOCKET_IFNAME='=ens99f0np0'",
			"NCCL_IB_HCA='=ionic_6:1,ionic_5:1,ionic_4:1,ionic_7:1,ionic_3:1,ionic_2:1,ionic_0:1,ionic_1:1'",
			"NCCL_IB_GID_INDEX='1'",
			"GPUAFFINITY_GPU='0'", "GPUAFFINITY_HIP_DEVICES='0'", "GPUAFFINITY_NICS='ionic_6'",
			"GPUAFFINITY_CPUS='0-95,192-287'", "GPUAFFINITY_NUMA='0'", "UCX_NET_DEVICES='ionic_6:1'"}},
	} {
		out, stderr, err := envRun(t, "--demo", tt.demo, "--local-rank", tt.rank)
		if err != nil {
			t.Fatalf("%s: %v", tt.demo, err)
		}
		var want strings.Builder
		for _, l := range tt.want {
			want.WriteString("export " + l + "\n")
		}
		if out != want.String() {
			t.Errorf("%s rank %s:\n%s\nwant\n%s", tt.demo, tt.rank, out, want.String())
		}
		if stderr != "" {
			t.Errorf("%s: stderr %q", tt.demo, stderr)
		}
	}
}

// TestAMDEnvCmdWriteTopo: --write-topo on an AMD node writes RCCL's file
// (version 2; RCCL refuses NCCL's version 1) and points NCCL_TOPO_FILE at
// it.
func TestAMDEnvCmdWriteTopo(t *testing.T) {
	envCleanEnv(t)
	dir := t.TempDir()
	out, _, err := envRun(t, "--demo", "amd-mi300x", "--local-rank", "0", "--write-topo", dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, topoFileName)
	if !strings.Contains(out, "export NCCL_TOPO_FILE='"+path+"'\n") {
		t.Errorf("no NCCL_TOPO_FILE:\n%s", out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := ncclxml.CheckFor(data, ncclxml.RCCL); err != nil || !bytes.HasPrefix(data, []byte(`<system version="2">`)) {
		t.Errorf("written file: %v\n%s", err, data)
	}
}

// TestAMDNCCLTopoCmd: nccl-topo on an AMD node prints RCCL's file: the
// GPU under its OAM bridge under the platform switch (AMD's
// topology-mapping.md path 00:01.1/01:00.0/02:00.0/03:00.0/04:00.0/
// 05:00.0), and no <gpu>, which RCCL fills itself.
func TestAMDNCCLTopoCmd(t *testing.T) {
	out := mustRun(t, "nccl-topo", "--demo", "amd-mi300x")
	if !strings.HasPrefix(out, "<system version=\"2\">\n") {
		t.Errorf("not RCCL's version:\n%s", out)
	}
	for _, want := range []string{
		`    <pci busid="0000:01:00.0" class="0x060400"`,
		`      <pci busid="0000:03:00.0" class="0x060400" vendor="0x1022" device="0x1500"`,
		`        <pci busid="0000:05:00.0" class="0x120000" vendor="0x1002" device="0x74a1"`,
		`      <pci busid="0000:09:00.0" class="0x020000" vendor="0x15b3" device="0x1021"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "<gpu") || strings.Contains(out, "<xgmi") {
		t.Errorf("gpu/xgmi written:\n%s", out)
	}
}

// TestAMDExecCmd: exec --dry-run shows env's RCCL environment and the
// cpumap binding (GPU 3: the fourth quarter of node 0's 96 cores, 72-95,
// and their SMT siblings 264-287).
func TestAMDExecCmd(t *testing.T) {
	envCleanEnv(t)
	out := mustRun(t, "exec", "--demo", "amd-mi300x", "--local-rank", "3", "--dry-run", "--", "python", "train.py")
	for _, want := range []string{"gpu:     3\n", "cpus:    72-95,264-287 (exclusive map)\n", "mems:    0 (exclusive map)\n",
		"  GPUAFFINITY_HIP_DEVICES=3\n", "  NCCL_IB_GID_INDEX=3\n", "  UCX_NET_DEVICES=mlx5_3:1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "CUDA_DEVICE_ORDER") || strings.Contains(out, "HIP_VISIBLE_DEVICES") {
		t.Errorf("CUDA/HIP visibility variable:\n%s", out)
	}
}

// TestAMDEnvCmdMixed: mixed-h100-mi210 (an H100 PCIe as GPU 0, an MI210
// as GPU 1, one ConnectX-7, by hand from its spec): each rank gets its
// own GPU's library's variables, the warning that one job cannot span
// both comes once, and --write-topo's file (NCCL's) is given to the
// NVIDIA rank only.
func TestAMDEnvCmdMixed(t *testing.T) {
	envCleanEnv(t)
	const node = `export NCCL_SOCKET_IFNAME='=enp97s0f0np0'
export NCCL_IB_HCA='=mlx5_0:1'
export NCCL_IB_GID_INDEX='3'
`
	const rank = `export GPUAFFINITY_NICS='mlx5_0'
export GPUAFFINITY_CPUS='0-63'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_0:1'
`
	for r, want := range map[string]string{
		"0": "export CUDA_DEVICE_ORDER='PCI_BUS_ID'\n" + node + "export GPUAFFINITY_GPU='0'\n" + rank,
		"1": node + "export GPUAFFINITY_GPU='1'\nexport GPUAFFINITY_HIP_DEVICES='0'\n" + rank,
	} {
		out, stderr, err := envRun(t, "--demo", "mixed-h100-mi210", "--local-rank", r)
		if err != nil {
			t.Fatal(err)
		}
		if out != want {
			t.Errorf("rank %s:\n%s\nwant\n%s", r, out, want)
		}
		if !strings.Contains(stderr, "gpuaffinity: warning: this node has NVIDIA GPUs (GPU 0) and AMD GPUs (GPU 1): NCCL drives the NVIDIA ones and RCCL the AMD ones") {
			t.Errorf("rank %s: stderr %q", r, stderr)
		}
	}
	_, stderr, err := envRun(t, "--demo", "mixed-h100-mi210", "--all-ranks")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(stderr, "this node has NVIDIA GPUs"); n != 1 {
		t.Errorf("--all-ranks: the mixed warning %d times:\n%s", n, stderr)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, topoFileName)
	out, _, err := envRun(t, "--demo", "mixed-h100-mi210", "--local-rank", "0", "--write-topo", dir)
	if err != nil || !strings.Contains(out, "export NCCL_TOPO_FILE='"+path+"'\n") {
		t.Errorf("rank 0 --write-topo: %v\n%s", err, out)
	}
	out, stderr, err = envRun(t, "--demo", "mixed-h100-mi210", "--local-rank", "1", "--write-topo", dir)
	if err != nil || strings.Contains(out, "NCCL_TOPO_FILE") || !strings.Contains(stderr, "NCCL_TOPO_FILE not set to "+path) {
		t.Errorf("rank 1 --write-topo: %v\n%s\n%s", err, out, stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := ncclxml.Check(data); err != nil || bytes.Contains(data, []byte("0000:23:00.0\" class")) {
		t.Errorf("mixed file: %v\n%s", err, data)
	}
}
