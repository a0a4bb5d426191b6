package launch

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/binding"
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/bind"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func TestMergeEnv(t *testing.T) {
	got := MergeEnv([]string{"A=1", "B=2", "A=3", "C"}, []nccl.Var{{Name: "A", Value: "new"}, {Name: "D", Value: "x=y"}})
	want := []string{"B=2", "C", "A=new", "D=x=y"}
	if !slices.Equal(got, want) {
		t.Errorf("MergeEnv = %q, want %q", got, want)
	}
	if v := envValue(got, "D"); v != "x=y" {
		t.Errorf("envValue(D) = %q", v)
	}
}

func dgx(t *testing.T) topology.Node {
	t.Helper()
	dir := t.TempDir()
	if err := fakesys.BuildMachine("dgx-h100", dir); err != nil {
		t.Fatal(err)
	}
	n, err := discover.Discover(discover.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func intp(i int) *int { return &i }

// TestBuildFromMap: the plan's binding is the cpumap entry of the rank's
// GPU under CUDA_VISIBLE_DEVICES, and its environment names that GPU.
func TestBuildFromMap(t *testing.T) {
	n := dgx(t)
	nodes := cpuset.Of(0, 1)
	req := Request{Argv: []string{"python"}, Rank: intp(1), Mode: binding.ModeExclusive, Policy: bind.PolicyBind,
		Environ: []string{"CUDA_VISIBLE_DEVICES=7,2", "PATH=/bin"}, Allowed: n.CPU.Allowed, Nodes: nodes}
	p, err := Build(&n, req)
	if err != nil {
		t.Fatal(err)
	}
	// GPU 2: node 0, the third exclusive share of node 0 (DGX H100 layout:
	// 56 cores per socket split four ways, docs/cpumap.md).
	if p.GPU == nil || *p.GPU != 2 || p.CPUs.String() != "28-41,140-153" || p.Mems.String() != "0" {
		t.Fatalf("plan GPU %v CPUs %s mems %s", p.GPU, p.CPUs, p.Mems)
	}
	var gotGPU, gotCPUs string
	for _, v := range p.Vars {
		switch v.Name {
		case "GPUAFFINITY_GPU":
			gotGPU = v.Value
		case "GPUAFFINITY_CPUS":
			gotCPUs = v.Value
		}
	}
	if gotGPU != "2" || gotCPUs != "28-41,140-153" {
		t.Errorf("GPUAFFINITY_GPU=%q GPUAFFINITY_CPUS=%q", gotGPU, gotCPUs)
	}
	if envValue(p.Env, "PATH") != "/bin" || envValue(p.Env, "GPUAFFINITY_GPU") != "2" {
		t.Errorf("merged env %q", p.Env)
	}

	// A CPU outside the allowed set is refused.
	req.CPUs = cpuset.Of(500)
	if _, err := Build(&n, req); !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), "500") {
		t.Errorf("CPU 500: %v", err)
	}
	// No rank and no --cpus: an error naming the rank variables.
	req.CPUs, req.Rank = cpuset.Set{}, nil
	if _, err := Build(&n, req); err == nil || !strings.Contains(err.Error(), "LOCAL_RANK") {
		t.Errorf("no rank: %v", err)
	}
	// No node (discovery failed): --cpus binds, nodes from --mems.
	p, err = Build(nil, Request{Argv: []string{"x"}, CPUs: cpuset.Of(3), Mems: cpuset.Of(1), Policy: bind.PolicyBind,
		Allowed: cpuset.Range(0, 7), Nodes: nodes})
	if err != nil || p.CPUs.String() != "3" || p.Mems.String() != "1" || len(p.Vars) != 0 {
		t.Errorf("no node: %+v, %v", p, err)
	}
}

// --no-mnnvl reaches the rank's environment as env's does.
func TestBuildNoMNNVL(t *testing.T) {
	n := dgx(t)
	req := Request{Argv: []string{"python"}, Rank: intp(0), Mode: binding.ModeExclusive, Policy: bind.PolicyBind,
		Allowed: n.CPU.Allowed, Nodes: cpuset.Of(0, 1)}
	p, err := Build(&n, req)
	if err != nil {
		t.Fatal(err)
	}
	if v := envValue(p.Env, "NCCL_MNNVL_ENABLE"); v != "" {
		t.Errorf("NCCL_MNNVL_ENABLE=%q without --no-mnnvl", v)
	}
	req.NoMNNVL = true
	if p, err = Build(&n, req); err != nil {
		t.Fatal(err)
	}
	if v := envValue(p.Env, "NCCL_MNNVL_ENABLE"); v != "0" {
		t.Errorf("NCCL_MNNVL_ENABLE=%q with --no-mnnvl, want 0", v)
	}
}
