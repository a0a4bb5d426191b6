package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/binding"
)

// runErr executes the CLI in-process and returns stdout and stderr.
func runErr(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

func TestCpumapTable(t *testing.T) {
	out := mustRun(t, "cpumap", "--demo", "dgx-h100")
	lines := strings.Split(out, "\n")
	// DGX H100 exclusive: 14 cores per GPU, siblings +112.
	for i, want := range []string{
		"RANK GPU NODE MODE CPUS MEMS",
		"0 0 0 exclusive 0-13,112-125 0",
		"1 1 0 exclusive 14-27,126-139 0",
		"7 7 1 exclusive 98-111,210-223 1",
	} {
		row := []int{0, 1, 2, 8}[i]
		if got := strings.Join(strings.Fields(lines[row]), " "); got != want {
			t.Errorf("line %d = %q, want %q\n%s", row, got, want, out)
		}
	}
	if !strings.Contains(out, "Leftover CPUs: -") {
		t.Errorf("no leftover line:\n%s", out)
	}
}

func TestCpumapNumactlAndTaskset(t *testing.T) {
	out := mustRun(t, "cpumap", "--demo", "snc2-2s", "--mode", "socket", "-o", "numactl")
	want := strings.Repeat("--physcpubind=0-47,96-143 --membind=0-1\n", 4) + strings.Repeat("--physcpubind=48-95,144-191 --membind=2-3\n", 4)
	if out != want {
		t.Errorf("numactl:\n%s\nwant\n%s", out, want)
	}
	// One rank: GPU 1's second of two ranks on the SMT-off box (32 cores
	// of node 0 / 4 ranks = 8 each: rank 3 = cores 24-31).
	out = mustRun(t, "cpumap", "--demo", "smt-off-2s", "--ranks-per-gpu", "2", "-o", "taskset", "--local-rank", "3")
	if out != "24-31\n" {
		t.Errorf("taskset rank 3 = %q", out)
	}
	// numa_node -1 in node mode: no --membind, the warning on stderr only.
	out, stderr, err := runErr(t, "cpumap", "--demo", "numa-unknown-2s", "--mode", "node", "-o", "numactl", "--local-rank", "3")
	if err != nil || out != "--physcpubind=0-63\n" {
		t.Errorf("numactl rank 3 = %q, %v", out, err)
	}
	if !strings.Contains(stderr, "warning: GPU 3 (0000:b2:00.0): numa_node is -1; nvml_cpu_affinity 0-63 spans NUMA nodes 0-1") {
		t.Errorf("stderr %q", stderr)
	}
}

func TestCpumapJSON(t *testing.T) {
	out := mustRun(t, "cpumap", "--demo", "cgroup-half", "-o", "json", "--mode", "node")
	var m binding.Map
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if m.Schema != binding.Schema || m.Mode != binding.ModeNode || len(m.Ranks) != 8 {
		t.Fatalf("%+v", m)
	}
	// Only 0-55 are allowed: GPU 4 (node 1) falls back to them, and says so.
	r := m.Ranks[4]
	if r.GPU != 4 || r.CPUs.String() != "0-55" || r.Mems.String() != "0" || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "falling back to the allowed set") {
		t.Errorf("rank 4: %+v", r)
	}
}

func TestCpumapErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		is   error
	}{
		{[]string{"--mode", "core-complex"}, "--mode", binding.ErrOptions},
		{[]string{"-o", "yaml"}, "-o \"yaml\"", nil},
		{[]string{"--ranks-per-gpu", "0"}, "--ranks-per-gpu 0", nil},
		{[]string{"--local-rank", "8"}, "local rank 8 but this node has 8 GPU(s)", binding.ErrNoRank},
		{[]string{"--local-rank", "-1"}, "local rank -1", binding.ErrNoRank},
		{[]string{"--ranks-per-gpu", "17", "--demo", "smt-off-2s"}, "more ranks than cores on node 0", binding.ErrTooManyRanks},
		// Refused before any rank is made (this used to run out of memory).
		{[]string{"--ranks-per-gpu", "10000000"}, "more ranks than cores: 10000000 ranks per GPU for 224 usable CPUs", binding.ErrTooManyRanks},
		{[]string{"--ranks-per-gpu", "10000000", "--mode", "node"}, "10000000 ranks per GPU: more than the 224 usable CPUs", binding.ErrOptions},
	} {
		args := append([]string{"cpumap"}, tc.args...)
		if !strings.Contains(strings.Join(tc.args, " "), "--demo") {
			args = append(args, "--demo", "dgx-h100")
		}
		out, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
		if out != "" {
			t.Errorf("%v: stdout %q on error", tc.args, out)
		}
	}
}
