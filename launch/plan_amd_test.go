package launch

import (
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/binding"
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/bind"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
)

// TestBuildAMD: exec on an AMD MI300X node gives the rank env's RCCL
// environment (no CUDA_DEVICE_ORDER, no visibility variable, the HIP
// ordinal) and binds as cpumap does. By hand: 2 x EPYC 9654 (96 cores
// per socket, SMT siblings N+192), GPUs 0-3 on node 0; the exclusive map
// splits node 0's cores four ways, so GPU 3 gets cores 72-95 and their
// siblings 264-287 (docs/cpumap.md).
func TestBuildAMD(t *testing.T) {
	dir := t.TempDir()
	if err := fakesys.BuildMachine("amd-mi300x", dir); err != nil {
		t.Fatal(err)
	}
	n, err := discover.Discover(discover.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Argv: []string{"python"}, Rank: intp(3), Mode: binding.ModeExclusive, Policy: bind.PolicyBind,
		Environ: []string{"PATH=/bin", "ROCR_VISIBLE_DEVICES=3"}, Allowed: n.CPU.Allowed, Nodes: cpuset.Of(0, 1)}
	p, err := Build(&n, req)
	if err != nil {
		t.Fatal(err)
	}
	if p.GPU == nil || *p.GPU != 3 || p.CPUs.String() != "72-95,264-287" || p.Mems.String() != "0" {
		t.Fatalf("plan GPU %v CPUs %s mems %s", p.GPU, p.CPUs, p.Mems)
	}
	got := map[string]string{}
	for _, v := range p.Vars {
		got[v.Name] = v.Value
	}
	for _, name := range []string{"CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"} {
		if v, ok := got[name]; ok {
			t.Errorf("%s=%q set", name, v)
		}
	}
	if got["GPUAFFINITY_HIP_DEVICES"] != "3" || got["GPUAFFINITY_CPUS"] != "72-95,264-287" || got["NCCL_IB_GID_INDEX"] != "3" || got["UCX_NET_DEVICES"] != "mlx5_3:1" {
		t.Errorf("vars %v", got)
	}
	// The caller's ROCR_VISIBLE_DEVICES is kept (its one GPU, 3, is the
	// one every rank drives), and the plan says that
	// GPUAFFINITY_HIP_DEVICES counts every GPU.
	if envValue(p.Env, "ROCR_VISIBLE_DEVICES") != "3" {
		t.Errorf("ROCR_VISIBLE_DEVICES not passed on: %q", p.Env)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), `ROCR_VISIBLE_DEVICES="3" is set and CUDA_VISIBLE_DEVICES is not`) {
		t.Errorf("warnings %q", p.Warnings)
	}
}
