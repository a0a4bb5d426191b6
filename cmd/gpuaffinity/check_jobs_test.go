package main

import (
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// check --jobs --only jobs.aligned on the DGX H100 fixture with the
// recorded ranks of audit/testdata/dgx-h100-jobs (docs/audit.md): 4101 on
// GPU 0 bound to CPUs 0-13,112-125 of GPU 0's socket (aligned), 4103 on
// GPU 2 bound to 56-69,168-181 of the other socket (misaligned). Exit 1
// with the misaligned rank, 0 with the aligned one alone; without --jobs
// the check skips and the node is healthy.
func TestCheckJobs(t *testing.T) {
	t.Setenv("SLURM_JOB_GPUS", "")
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	const overlay = "../../audit/testdata/dgx-h100-jobs"
	bad := fakesystest.JobsRoot(t, "dgx-h100", overlay, []int{4101, 4103}, map[int][]int{0: {4101}, 2: {4103}})
	out, code := runCheck(t, "--root", bad, "--jobs", "--only", "jobs.aligned")
	if code != checkExitUnhealthy || !strings.Contains(out, "jobs.aligned") || !strings.Contains(out, "pid 4103") {
		t.Errorf("misaligned: exit %d, want %d naming pid 4103:\n%s", code, checkExitUnhealthy, out)
	}
	out, code = runCheck(t, "--root", bad, "--only", "jobs.aligned")
	if code != 0 || !strings.Contains(out, "--jobs") {
		t.Errorf("without --jobs: exit %d, want 0 and a skip naming --jobs:\n%s", code, out)
	}
	good := fakesystest.JobsRoot(t, "dgx-h100", overlay, []int{4101}, map[int][]int{0: {4101}})
	out, code = runCheck(t, "--root", good, "--jobs", "--only", "jobs.aligned")
	if code != 0 || !strings.Contains(out, "1 GPU process, all on their GPUs' local CPUs") {
		t.Errorf("aligned: exit %d, want 0:\n%s", code, out)
	}
}
