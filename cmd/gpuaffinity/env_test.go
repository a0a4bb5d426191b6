package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/launch"
)

// envCleanEnv clears the launcher variables the test process may have
// inherited (a CI job under Slurm, a GPU runner's CUDA_VISIBLE_DEVICES)
// and sets kv; t.Setenv restores them afterwards.
func envCleanEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, name := range append(slices.Clone(launch.LocalRankVars), "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPUAFFINITY_ROOT", "GPUAFFINITY_STATE_DIR") {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	for i := 0; i < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

func envRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(append([]string{"env"}, args...))
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

func TestEnvCmdRank(t *testing.T) {
	envCleanEnv(t)
	out, stderr, err := envRun(t, "--demo", "dgx-h100", "--local-rank", "3")
	if err != nil {
		t.Fatal(err)
	}
	// By hand: GPU 3 (61:00.0) shares its switch with mlx5_5 (5e:00.0,
	// ibp94s0) on CPU 0 (DGX H100 user guide port table).
	want := `export CUDA_DEVICE_ORDER='PCI_BUS_ID'
export NCCL_SOCKET_IFNAME='=enp4s0f0'
export NCCL_IB_HCA='=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1'
export GPUAFFINITY_GPU='3'
export GPUAFFINITY_NICS='mlx5_5'
export GPUAFFINITY_CPUS='0-55,112-167'
export GPUAFFINITY_NUMA='0'
export UCX_NET_DEVICES='mlx5_5:1'
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if stderr != "" {
		t.Errorf("stderr %q", stderr)
	}
}

func TestEnvCmdRankFromEnv(t *testing.T) {
	envCleanEnv(t, "SLURM_LOCALID", "7", "OMPI_COMM_WORLD_LOCAL_RANK", "7", "CUDA_VISIBLE_DEVICES", "7,6,5,4,3,1,0,2")
	out, _, err := envRun(t, "--demo", "dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "export GPUAFFINITY_GPU='2'\n") || !strings.Contains(out, "export UCX_NET_DEVICES='mlx5_4:1'\n") {
		t.Errorf("rank 7 via CUDA_VISIBLE_DEVICES entry 7 = GPU 2:\n%s", out)
	}
}

func TestEnvCmdNoRank(t *testing.T) {
	envCleanEnv(t)
	out, stderr, err := envRun(t, "--demo", "h200-vm")
	if err != nil {
		t.Fatal(err)
	}
	if out != "export CUDA_DEVICE_ORDER='PCI_BUS_ID'\nexport NCCL_SOCKET_IFNAME='=eth0'\nexport NCCL_IB_DISABLE='1'\n" {
		t.Errorf("out %q", out)
	}
	for _, w := range []string{"gpuaffinity: warning: no local rank", "gpuaffinity: warning: no RDMA compute NIC"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q: %q", w, stderr)
		}
	}
}

// TestEnvCmdErrors: on any error nothing reaches stdout.
func TestEnvCmdErrors(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--local-rank", "8"}, "local rank 8"},
		{[]string{"LOCAL_RANK", "1", "SLURM_LOCALID", "2"}, nil, "disagree"},
		{[]string{"LOCAL_RANK", "one"}, nil, `LOCAL_RANK="one"`},
		{[]string{"CUDA_VISIBLE_DEVICES", "0,9"}, []string{"--local-rank", "1"}, "GPU index 9"},
		{[]string{"CUDA_VISIBLE_DEVICES", "MIG-0d2f7c7e-aaaa-bbbb-cccc-000000000000"}, []string{"--local-rank", "0"}, "MIG"},
		{nil, []string{"-o", "csh"}, `-o "csh"`},
		{nil, []string{"--all-ranks", "-o", "sh"}, "--all-ranks"},
		{nil, []string{"--all-ranks", "--local-rank", "1"}, "exclude"},
		{[]string{"CUDA_VISIBLE_DEVICES", "0,1,9"}, []string{"--all-ranks"}, "GPU index 9"},
		{nil, []string{"--write-topo", "/nonexistent/dir", "--local-rank", "0"}, "--write-topo"},
	} {
		envCleanEnv(t, tc.env...)
		out, _, err := envRun(t, append([]string{"--demo", "dgx-h100"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: err %v, want %q", tc.env, tc.args, err, tc.want)
		}
		if out != "" {
			t.Errorf("%v %v: stdout %q on error", tc.env, tc.args, out)
		}
	}
}

func TestEnvCmdAllRanks(t *testing.T) {
	envCleanEnv(t)
	out, _, err := envRun(t, "--demo", "aws-p4d", "--all-ranks")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  FI_PROVIDER=efa\n", "RANK", "\n0     0    0000:10:1c.0  0     0-23,48-71", "rdmap16s27", "\n7     7    0000:a0:1d.0  1     24-47,72-95", "rdmap160s27"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	out, _, err = envRun(t, "--demo", "aws-p4d", "--all-ranks", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var envs []struct {
		LocalRank int               `json:"local_rank"`
		GPU       int               `json:"gpu"`
		Env       map[string]string `json:"env"`
	}
	if err := json.Unmarshal([]byte(out), &envs); err != nil || len(envs) != 8 {
		t.Fatalf("%v, %d ranks:\n%s", err, len(envs), out)
	}
	if envs[5].LocalRank != 5 || envs[5].GPU != 5 || envs[5].Env["GPUAFFINITY_NICS"] != "rdmap144s27" {
		t.Errorf("rank 5: %+v", envs[5])
	}
}

func TestEnvCmdFormats(t *testing.T) {
	envCleanEnv(t)
	out, _, err := envRun(t, "--demo", "oci-bm-gpu-h100", "--local-rank", "2", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		LocalRank *int              `json:"local_rank"`
		GPU       *int              `json:"gpu"`
		Env       map[string]string `json:"env"`
		Warnings  []string          `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if *e.LocalRank != 2 || *e.GPU != 2 || e.Env["UCX_NET_DEVICES"] != "mlx5_5:1,mlx5_6:1" || e.Env["NCCL_IB_GID_INDEX"] != "3" || e.Warnings == nil {
		t.Errorf("got %+v", e)
	}
	out, _, err = envRun(t, "--demo", "oci-bm-gpu-h100", "--local-rank", "2", "-o", "dotenv")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "CUDA_DEVICE_ORDER=PCI_BUS_ID\nNCCL_SOCKET_IFNAME==eth0\n") || !strings.Contains(out, "\nGPUAFFINITY_CPUS=0-55,112-167\n") {
		t.Errorf("dotenv:\n%s", out)
	}
}

func TestEnvCmdWriteTopo(t *testing.T) {
	envCleanEnv(t)
	dir := t.TempDir()
	out, _, err := envRun(t, "--demo", "azure-nd-h100-v5", "--local-rank", "0", "--write-topo", dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nccl-topo.xml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("<system")) {
		t.Errorf("%s is not an NCCL topology:\n%.300s", path, data)
	}
	if !strings.Contains(out, "export NCCL_TOPO_FILE='"+path+"'\n") {
		t.Errorf("NCCL_TOPO_FILE does not point to %s:\n%s", path, out)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}

	// EFA: the plugin writes its own; nothing written, a warning.
	dir = t.TempDir()
	out, stderr, err := envRun(t, "--demo", "aws-p5", "--local-rank", "0", "--write-topo", dir)
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 || strings.Contains(out, "NCCL_TOPO_FILE") {
		t.Errorf("EFA: wrote %v, out:\n%s", entries, out)
	}
	if !strings.Contains(stderr, "gpuaffinity: warning: --write-topo: not written") {
		t.Errorf("stderr %q", stderr)
	}
}

// TestEnvCmdDiscoveryWarnings: env shows the node's discovery warnings on
// stderr, as other commands do (an unparsable Cpus_allowed_list widens
// the allowed set to every online CPU: not silently), each once, and
// stdout stays exactly the eval-able lines.
func TestEnvCmdDiscoveryWarnings(t *testing.T) {
	envCleanEnv(t)
	root := fakesystest.Root(t, "dgx-h100")
	status := filepath.Join(root, "proc/self/status")
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(l, "Cpus_allowed_list:") {
			l = "Cpus_allowed_list:\tjunk"
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(status, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--local-rank", "3"}, {"--all-ranks"}} {
		out, stderr, err := envRun(t, append([]string{"--root", root}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stderr, "gpuaffinity: warning: ") || !strings.Contains(stderr, "proc/self/status") || !strings.Contains(stderr, "junk") {
			t.Errorf("%v: stderr does not name the unparsable Cpus_allowed_list: %q", args, stderr)
		}
		for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
			if strings.Count(stderr, l+"\n") != 1 {
				t.Errorf("%v: warning %q more than once", args, l)
			}
		}
		if strings.Contains(out, "warning") || strings.Contains(out, "junk") {
			t.Errorf("%v: warning on stdout:\n%s", args, out)
		}
	}
	out, _, err := envRun(t, "--root", root, "--local-rank", "3")
	if err != nil || !strings.HasPrefix(out, "export CUDA_DEVICE_ORDER='PCI_BUS_ID'\n") || strings.Count(out, "\n") != strings.Count(out, "export ") {
		t.Errorf("stdout not only export lines: %v\n%s", err, out)
	}
}
