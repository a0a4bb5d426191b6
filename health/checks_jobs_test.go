package health

import (
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// The recorded processes of audit/testdata/dgx-h100-jobs (docs/audit.md)
// on the DGX H100 fixture, whose layout is the DGX H100 user guide's as
// the dgx-h100 spec cites it: GPUs 0-3 local to CPUs 0-55,112-167 (node
// 0), GPUs 4-7 to 56-111,168-223 (node 1), 224 CPUs online.
//   - 4101 (python3, alice, Slurm job 4242.0) on GPU 0, allowed
//     0-13,112-125: aligned;
//   - 4102 (python3, alice, Slurm job 4242.0) on GPU 1, allowed 0-223:
//     unbound;
//   - 4103 (pt_main_thread, bob, burstable pod 7f0c1e2a-…) on GPU 2,
//     allowed 56-69,168-181 (socket 1): misaligned.
const jobsOverlay = "../audit/testdata/dgx-h100-jobs"

func jobsResult(t *testing.T, root string, opts Options) Result {
	t.Helper()
	opts.Root, opts.Only = root, []string{"jobs.aligned"}
	return result(t, run(t, discoverRoot(t, root), opts), "jobs.aligned")
}

func wantIn(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s %q lacks %q", what, s, sub)
		}
	}
}

func TestJobsAligned(t *testing.T) {
	t.Parallel()
	three := fakesystest.JobsRoot(t, "dgx-h100", jobsOverlay, []int{4101, 4102, 4103},
		map[int][]int{0: {4101}, 1: {4102}, 2: {4103}})

	// Without Jobs the check is skipped, whatever runs.
	if r := jobsResult(t, three, Options{}); r.Verdict != Skip || !strings.Contains(r.Reason, "--jobs") {
		t.Errorf("without Jobs: %s %q, want skip naming --jobs", r.Verdict, r.Reason)
	}

	// The misaligned rank fails the node, under every profile; the
	// unbound one is in the details, the aligned one nowhere.
	for _, prof := range []Profile{Pretrain, Inference} {
		r := jobsResult(t, three, Options{Jobs: true, Profile: prof})
		if r.Verdict != Fail || r.Downgraded {
			t.Errorf("%s: %s (downgraded %v) %q, want fail", prof, r.Verdict, r.Downgraded, r.Reason)
		}
		wantIn(t, "reason", r.Reason, "1 of 3 GPU processes misaligned (pid 4103)",
			"pid 4103 pt_main_thread (bob, pod 7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6, GPU 2)",
			"none of its CPUs (56-69,168-181) is local to the GPU (0-55,112-167)")
		if r.Hint == "" || len(r.Details) != 2 {
			t.Fatalf("%s: hint %q, details %q: want a hint and 2 details", prof, r.Hint, r.Details)
		}
		wantIn(t, "detail", r.Details[0], "pid 4103", "misaligned")
		wantIn(t, "detail", r.Details[1], "pid 4102 python3 (alice, Slurm job 4242.0, GPU 1): unbound",
			"every online CPU (0-223)")
		if strings.Contains(strings.Join(r.Details, "\n")+r.Reason, "4101") {
			t.Errorf("the aligned pid 4101 is named: %q %q", r.Reason, r.Details)
		}
	}

	// Narrowed to GPUs 0 and 1 (--gpus, SLURM_JOB_GPUS): 4103 on GPU 2 is
	// not judged; the unbound rank warns.
	r := jobsResult(t, three, Options{Jobs: true, GPUs: []int{0, 1}})
	if r.Verdict != Warn || strings.Contains(r.Reason, "4103") {
		t.Errorf("GPUs 0,1: %s %q, want warn without 4103", r.Verdict, r.Reason)
	}
	wantIn(t, "reason", r.Reason, "2 GPU processes, 1 unbound (pid 4102)", "Slurm job 4242.0, GPU 1")
	if !strings.Contains(r.Hint, "default") {
		t.Errorf("hint %q: want why unbound only warns", r.Hint)
	}
}

func TestJobsAlignedPassAndGaps(t *testing.T) {
	t.Parallel()
	// Only the aligned rank: pass. 4105 is listed by NVML on GPU 5 but has
	// no /proc entry (ended): warn, never fail.
	aligned := fakesystest.JobsRoot(t, "dgx-h100", jobsOverlay, []int{4101}, map[int][]int{0: {4101}})
	if r := jobsResult(t, aligned, Options{Jobs: true}); r.Verdict != Pass || r.Reason != "1 GPU process, all on their GPUs' local CPUs" {
		t.Errorf("aligned: %s %q", r.Verdict, r.Reason)
	}
	ended := fakesystest.JobsRoot(t, "dgx-h100", jobsOverlay, []int{4101}, map[int][]int{0: {4101}, 5: {4105}})
	r := jobsResult(t, ended, Options{Jobs: true})
	if r.Verdict != Warn {
		t.Errorf("ended: %s %q, want warn", r.Verdict, r.Reason)
	}
	wantIn(t, "reason", r.Reason, "1 of 2 GPU processes could not be judged (pid 4105)", "pid 4105 (GPU 5)", "process ended")
	none := fakesystest.JobsRoot(t, "dgx-h100", jobsOverlay, nil, nil)
	if r := jobsResult(t, none, Options{Jobs: true}); r.Verdict != Pass || r.Reason != "no GPU processes running" {
		t.Errorf("none: %s %q", r.Verdict, r.Reason)
	}
	// The machine as built records no process lists: not "no process".
	if r := jobsResult(t, healthyRoot(t, "dgx-h100"), Options{Jobs: true}); r.Verdict != Warn || !strings.Contains(r.Reason, "ERROR_NOT_SUPPORTED") {
		t.Errorf("no lists: %s %q, want warn naming NVML's answer", r.Verdict, r.Reason)
	}
}

// The recorded processes of audit/testdata/amd-mi300x-jobs on the MI300X
// fixture (the amd-mi300x spec, after AMD's MI300X topology-mapping and
// RCCL's topo_8p_940 model: NUMA node 0 CPUs 0-95,192-287 with GPUs 0-3,
// node 1 CPUs 96-191,288-383 with GPUs 4-7), listed by KFD, not NVML:
//   - 5201 (python3, alice, job 777.0) on GPU 0, allowed 0-23,192-215:
//     aligned;
//   - 5202 (python3, alice, job 777.0) on GPU 1, allowed 0-383: unbound;
//   - 5203 (python3, bob, burstable pod 5a4b3c2d-…) on GPU 2, allowed
//     96-119,288-311 (node 1): misaligned;
//   - 5204 (rocminfo, bob) opened GPU 3 without VRAM, allowed
//     0-95,192-287: aligned, and a note, not a gap;
//   - 5205 (python3, alice, job 778.0) on GPU 4, node 1's CPUs but memory
//     from node 0 only: partly.
func TestJobsAlignedAMD(t *testing.T) {
	t.Parallel()
	root := fakesystest.JobsRoot(t, "amd-mi300x", "../audit/testdata/amd-mi300x-jobs",
		[]int{5201, 5202, 5203, 5204, 5205}, nil)
	r := jobsResult(t, root, Options{Jobs: true})
	if r.Verdict != Fail {
		t.Fatalf("%s %q, want fail", r.Verdict, r.Reason)
	}
	wantIn(t, "reason", r.Reason, "1 of 5 GPU processes misaligned (pid 5203)",
		"pid 5203 python3 (bob, pod 5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d, GPU 2)",
		"none of its CPUs (96-119,288-311) is local to the GPU (0-95,192-287)")
	if strings.Contains(r.Reason, "not judged or not listed") {
		t.Errorf("reason %q: every KFD entry was read, no gap to say", r.Reason)
	}
	if len(r.Details) != 3 {
		t.Fatalf("details %q: want misaligned 5203, partly 5205, unbound 5202", r.Details)
	}
	wantIn(t, "detail", r.Details[0], "pid 5203", "misaligned")
	wantIn(t, "detail", r.Details[1], "pid 5205 python3 (alice, Slurm job 778.0, GPU 4): partly")
	wantIn(t, "detail", r.Details[2], "pid 5202 python3 (alice, Slurm job 777.0, GPU 1): unbound", "every online CPU (0-383)")
	for _, d := range append(r.Details, r.Reason) {
		if strings.Contains(d, "5201") || strings.Contains(d, "5204") {
			t.Errorf("an aligned process is named: %q", d)
		}
	}

	// Narrowed to GPU 3 (rocminfo opened it, holds no VRAM): pass.
	if r := jobsResult(t, root, Options{Jobs: true, GPUs: []int{3}}); r.Verdict != Pass || r.Reason != "1 GPU process, all on their GPUs' local CPUs" {
		t.Errorf("GPU 3: %s %q, want pass", r.Verdict, r.Reason)
	}
}
