package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/binding"
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// readExpected reads a hand-written expected output of
// dgx-h100-numa-disagree. The env of rank 0 is nccl's expectation for the
// same machine (one file, not two copies), less its "#" comment lines.
func readExpected(t *testing.T, name string) string {
	t.Helper()
	path := "testdata/numa-disagree/" + name
	if name == "env.rank0.sh" {
		path = "../../nccl/testdata/env/dgx-h100-numa-disagree.rank0.sh"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if name != "env.rank0.sh" || !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// TestLocalityAgreesAcrossCommands: GPU 0's numa_node is -1 and its
// local_cpulist every CPU, NVML's affinity node 0; topo, env, cpumap,
// exec --dry-run and gres all give it node 0 (expected outputs written by
// hand, testdata/numa-disagree/README.md), and the node warns naming both
// values.
func TestLocalityAgreesAcrossCommands(t *testing.T) {
	const demo = "dgx-h100-numa-disagree"
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	for _, v := range []string{"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"} {
		t.Setenv(v, "")
	}

	out, stderr, err := runErr(t, "topo", "--demo", demo)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 3 && strings.HasPrefix(line, "GPU0 ") {
			if got := strings.Join(f[len(f)-3:], " ") + "\n"; got != readExpected(t, "topo.gpu0") {
				t.Errorf("topo GPU0 affinity columns %q, want %q", got, readExpected(t, "topo.gpu0"))
			}
			break // the matrix row; later GPU0 lines are the pairs
		}
	}
	const warn = "GPU 0 (0000:1b:00.0): sources disagree: using nvml_cpu_affinity 0-55,112-167 (NUMA node 0); local_cpulist 0-223 (NUMA nodes 0-1)"
	if !strings.Contains(out+stderr, warn) {
		t.Errorf("topo names no disagreement %q:\n%s\n%s", warn, out, stderr)
	}
	var n topology.Node
	if err := json.Unmarshal([]byte(mustRun(t, "topo", "--demo", demo, "-o", "json")), &n); err != nil {
		t.Fatal(err)
	}
	loc := n.GPUs[0].Locality
	if loc.Source != topology.LocalityNVML || loc.Node == nil || *loc.Node != 0 || loc.CPUs.String() != "0-55,112-167" {
		t.Errorf("topo -o json GPU 0 locality %+v", loc)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"env", "--demo", demo, "--local-rank", "0"}, "env.rank0.sh"},
		{[]string{"cpumap", "--demo", demo}, "cpumap.table"},
		{[]string{"exec", "--demo", demo, "--local-rank", "0", "--dry-run", "--", "/bin/true"}, "exec.rank0.dry-run"},
		{[]string{"gres", "--demo", demo}, "gres.conf"},
	} {
		got, err := run(t, tc.args...)
		if err != nil {
			t.Errorf("%s: %v", strings.Join(tc.args, " "), err)
			continue
		}
		if want := readExpected(t, tc.want); got != want {
			t.Errorf("%s:\n%s\nwant (testdata/numa-disagree/%s):\n%s", strings.Join(tc.args, " "), got, tc.want, want)
		}
	}
}

// TestRankMappingAgrees: for every rank under several CUDA_VISIBLE_DEVICES
// lists, env, cpumap and exec --dry-run drive the same GPU (the list's
// entry) with the same CPUs and memory node.
func TestRankMappingAgrees(t *testing.T) {
	for _, v := range []string{"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"} {
		t.Setenv(v, "")
	}
	for _, tc := range []struct {
		demo string
		cvd  string // "" unset
		gpus []int  // the GPU of each rank, by hand from the list
	}{
		{"dgx-h100", "", []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"dgx-h100", "7,6", []int{7, 6}},
		{"dgx-h100", "3,0,5", []int{3, 0, 5}},
		{"dgx-h100", "GPU-dgxh100-0000-0000-0000-000000000004,1", []int{4, 1}},
		{"dgx-h100", "5", []int{5}},
		{"dgx-h100-numa-disagree", "4,0", []int{4, 0}},
		{"snc2-2s", "3,2,1,0", []int{3, 2, 1, 0}},
		{"aws-p5", "6,7,0", []int{6, 7, 0}},
		{"numa-unknown-2s", "3,1", []int{3, 1}},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.demo, tc.cvd), func(t *testing.T) {
			if tc.cvd == "" {
				t.Setenv("CUDA_VISIBLE_DEVICES", "")
				os.Unsetenv("CUDA_VISIBLE_DEVICES")
			} else {
				t.Setenv("CUDA_VISIBLE_DEVICES", tc.cvd)
			}
			var m binding.Map
			if err := json.Unmarshal([]byte(mustRun(t, "cpumap", "--demo", tc.demo, "-o", "json")), &m); err != nil {
				t.Fatal(err)
			}
			if len(m.Ranks) != len(tc.gpus) {
				t.Fatalf("cpumap: %d ranks, want %d", len(m.Ranks), len(tc.gpus))
			}
			for r, gpu := range tc.gpus {
				rank := fmt.Sprint(r)
				env := envVars(mustRun(t, "env", "--demo", tc.demo, "--local-rank", rank, "-o", "dotenv"))
				plan := planFields(mustRun(t, "exec", "--demo", tc.demo, "--local-rank", rank, "--dry-run", "--", "/bin/true"))
				one := mustRun(t, "cpumap", "--demo", tc.demo, "--local-rank", rank, "-o", "taskset")
				mr := m.Ranks[r]
				if mr.GPU != gpu || env["GPUAFFINITY_GPU"] != fmt.Sprint(gpu) || plan["gpu"] != fmt.Sprint(gpu) {
					t.Errorf("rank %d: cpumap GPU %d, env GPU %s, exec GPU %s; want %d", r, mr.GPU, env["GPUAFFINITY_GPU"], plan["gpu"], gpu)
				}
				if got := strings.TrimSpace(one); got != mr.CPUs.String() {
					t.Errorf("rank %d: cpumap --local-rank CPUs %s, full map %s", r, got, mr.CPUs)
				}
				if got, _, _ := strings.Cut(plan["cpus"], " "); got != mr.CPUs.String() {
					t.Errorf("rank %d: exec CPUs %s, cpumap %s", r, got, mr.CPUs)
				}
				if got, _, _ := strings.Cut(plan["mems"], " "); !mr.Mems.IsEmpty() && got != mr.Mems.String() {
					t.Errorf("rank %d: exec mems %s, cpumap %s", r, got, mr.Mems)
				}
				// env reports the GPU's CPUs; the rank's share is among them.
				envCPUs, err := cpuset.Parse(env["GPUAFFINITY_CPUS"])
				if err != nil || !mr.CPUs.Difference(envCPUs).IsEmpty() {
					t.Errorf("rank %d: env GPUAFFINITY_CPUS %q does not hold cpumap's %s", r, env["GPUAFFINITY_CPUS"], mr.CPUs)
				}
				if numa, ok := env["GPUAFFINITY_NUMA"]; ok && numa != mr.Mems.String() {
					t.Errorf("rank %d: env NUMA %s, cpumap mems %s", r, numa, mr.Mems)
				}
			}
		})
	}
}

// envVars reads dotenv output.
func envVars(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			out[k] = strings.Trim(v, `"'`)
		}
	}
	return out
}

// planFields reads exec --dry-run's "key: value" lines.
func planFields(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}
