package audit_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/audit"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs/rootfstest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// jobsRoot builds fixture machine and lays testdata/<overlay> over it:
// the running processes' /proc entries, etc/passwd, KFD's proc entries,
// and (nvml-processes.json) the NVML process lists patched into the
// machine's nvml.json.
func jobsRoot(t *testing.T, machine, overlay string) string {
	t.Helper()
	return fakesystest.JobsOverlay(t, machine, filepath.Join("testdata", overlay))
}

// auditRoot discovers dir and audits it as the command does.
func auditRoot(t *testing.T, dir string) (topology.Node, audit.Report) {
	n, rep, _ := auditList(t, dir)
	return n, rep
}

// auditList is auditRoot with the listing's GPUs not listed whole
// (audit.List).
func auditList(t *testing.T, dir string) (topology.Node, audit.Report, []int) {
	t.Helper()
	n, err := discover.Discover(discover.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := rootfstest.Open(t, dir)
	lib, _, err := nvml.OpenRoot(r)
	if err != nil {
		t.Fatal(err)
	}
	uses, unread := audit.Uses(n, r, lib)
	l := audit.List(n, r, lib)
	if !slices.EqualFunc(l.Uses, uses, func(a, b audit.Use) bool { return a.PID == b.PID && slices.Equal(a.GPUs, b.GPUs) }) || !slices.Equal(l.Unread, unread) {
		t.Errorf("List and Uses differ: %v %q, %v %q", l.Uses, l.Unread, uses, unread)
	}
	return n, audit.Run(n, r, uses, unread, audit.Options{}), l.Unlisted
}

// want is one process's expected audit, written by hand.
type want struct {
	gpus     []int
	user     string
	job, pod string // "4242.0"; pod UID
	qos      string
	verdict  audit.Verdict
	env      map[string]string // variable -> status; others unset
	threads  map[int]audit.Verdict
	unread   string // a substring of one Unread entry
}

func check(t *testing.T, rep audit.Report, wants map[int]want) {
	t.Helper()
	if rep.Schema != audit.Schema {
		t.Errorf("schema %q", rep.Schema)
	}
	got := map[int]audit.Process{}
	for _, p := range rep.Processes {
		got[p.PID] = p
	}
	if len(got) != len(wants) {
		var pids []int
		for pid := range got {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		t.Errorf("processes %v, want %d of them", pids, len(wants))
	}
	for pid, w := range wants {
		p, ok := got[pid]
		if !ok {
			t.Errorf("process %d missing", pid)
			continue
		}
		if !slices.Equal(p.GPUs, w.gpus) {
			t.Errorf("%d: GPUs %v, want %v", pid, p.GPUs, w.gpus)
		}
		if p.Verdict != w.verdict {
			t.Errorf("%d: verdict %s (%s), want %s", pid, p.Verdict, p.Reason, w.verdict)
		}
		if p.User != w.user {
			t.Errorf("%d: user %q, want %q", pid, p.User, w.user)
		}
		var job, pod, qos string
		if p.Job != nil {
			job = p.Job.ID + "." + p.Job.Step
		}
		if p.Pod != nil {
			pod, qos = p.Pod.UID, p.Pod.QoS
		}
		if job != w.job || pod != w.pod || qos != w.qos {
			t.Errorf("%d: job %q pod %q (%s), want job %q pod %q (%s)", pid, job, pod, qos, w.job, w.pod, w.qos)
		}
		if w.unread != "" && !slices.ContainsFunc(p.Unread, func(s string) bool { return strings.Contains(s, w.unread) }) {
			t.Errorf("%d: unread %q, want one with %q", pid, p.Unread, w.unread)
		}
		if w.env != nil {
			for _, c := range p.Env {
				st, ok := w.env[c.Name]
				if !ok {
					st = nccl.EnvUnset
				}
				if c.Status != st {
					t.Errorf("%d: %s=%q: %s (%s), want %s", pid, c.Name, c.Value, c.Status, c.Problem, st)
				}
			}
		}
		gotThreads := map[int]audit.Verdict{}
		for _, th := range p.Threads {
			gotThreads[th.TID] = th.Verdict
		}
		if len(gotThreads) != len(w.threads) {
			t.Errorf("%d: threads %v, want %v", pid, gotThreads, w.threads)
		}
		for tid, v := range w.threads {
			if gotThreads[tid] != v {
				t.Errorf("%d: thread %d %s, want %s", pid, tid, gotThreads[tid], v)
			}
		}
	}
}

// TestFixtureDGXH100 audits recorded processes on the DGX H100 fixture.
// The layout, from the DGX H100 user guide as the dgx-h100 spec cites
// it: GPUs 0-3 and compute NICs mlx5_0, mlx5_3, mlx5_4, mlx5_5 on CPU
// socket 0 (NUMA node 0, CPUs 0-55,112-167); GPUs 4-7 and mlx5_6, mlx5_9,
// mlx5_10, mlx5_11 on socket 1 (node 1, CPUs 56-111,168-223); mlx5_1,
// mlx5_2, mlx5_7, mlx5_8 storage; enp4s0f0 holds the default route.
func TestFixtureDGXH100(t *testing.T) {
	t.Parallel()
	_, rep, unlisted := auditList(t, jobsRoot(t, "dgx-h100", "dgx-h100-jobs"))
	// GPU 3's lists were not recorded (nvml-processes.json does not name
	// it): it alone is not listed whole.
	if !slices.Equal(unlisted, []int{3}) {
		t.Errorf("unlisted GPUs %v, want [3]", unlisted)
	}
	check(t, rep, map[int]want{
		// A Slurm rank (cgroup v2) bound to 28 CPUs of socket 0, GPU 0's;
		// its NICs are env's.
		4101: {gpus: []int{0}, user: "alice", job: "4242.0", verdict: audit.Aligned,
			env: map[string]string{"CUDA_VISIBLE_DEVICES": nccl.EnvOK, "NCCL_IB_HCA": nccl.EnvOK,
				"NCCL_SOCKET_IFNAME": nccl.EnvOK, "UCX_NET_DEVICES": nccl.EnvOK}},
		// The same job's next rank (cgroup v1), not bound: every CPU.
		// NCCL_IB_HCA=mlx5 is a prefix: every mlx5 device, storage too.
		// Its ordinal 1 in a Slurm job is left unchecked.
		4102: {gpus: []int{1}, user: "alice", job: "4242.0", verdict: audit.Unbound,
			env: map[string]string{"CUDA_VISIBLE_DEVICES": nccl.EnvUnchecked, "NCCL_IB_HCA": nccl.EnvWrong}},
		// A burstable pod's rank on GPU 2 (socket 0) bound to socket 1's
		// CPUs, UCX on storage NIC mlx5_7.
		4103: {gpus: []int{2}, user: "bob", pod: "7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6", qos: "burstable",
			verdict: audit.Misaligned,
			env:     map[string]string{"CUDA_VISIBLE_DEVICES": nccl.EnvUnchecked, "UCX_NET_DEVICES": nccl.EnvWrong}},
		// A guaranteed pod (systemd driver) on GPU 4 (socket 1) with socket
		// 1 and CPUs 0-3: partly; uid 1003 has no passwd entry;
		// NCCL_SOCKET_IFNAME=ib does not select enp4s0f0.
		4104: {gpus: []int{4}, user: "1003", pod: "2d9e8f70-1a2b-4c3d-9e8f-0a1b2c3d4e5f", qos: "guaranteed",
			verdict: audit.Partly, env: map[string]string{"NCCL_SOCKET_IFNAME": nccl.EnvWrong}},
		// NVML lists it, /proc does not: it ended.
		4105: {gpus: []int{5}, verdict: audit.Unknown, unread: "status: process ended"},
		// Outside any job: main thread on GPU 0's CPUs, one thread on
		// socket 1's; CUDA_VISIBLE_DEVICES=3 while it drives GPU 0.
		4106: {gpus: []int{0}, user: "root", verdict: audit.Partly,
			threads: map[int]audit.Verdict{4107: audit.Misaligned},
			env:     map[string]string{"CUDA_VISIBLE_DEVICES": nccl.EnvWrong}},
	})
	// GPU 3's lists were not recorded: said, not taken for "none".
	if !slices.ContainsFunc(rep.Unread, func(s string) bool {
		return strings.Contains(s, "GPU 3") && strings.Contains(s, "GetComputeRunningProcesses: ERROR_NOT_SUPPORTED")
	}) {
		t.Errorf("unread %q: want GPU 3's compute list", rep.Unread)
	}
}

// TestFixtureMI300X audits recorded KFD processes on the MI300X fixture.
// The layout (the amd-mi300x spec, after AMD's MI300X topology-mapping
// and RCCL's topo_8p_940 model): 2x EPYC 9654, NUMA node 0 CPUs
// 0-95,192-287 with GPUs 0-3, node 1 CPUs 96-191,288-383 with GPUs 4-7,
// each GPU's ConnectX-7 (mlx5_0..mlx5_7) compute; ens99f0np0 the front
// end. The vram_<gpu_id> names are the fixture's KFD gpu_id values
// (topology/nodes/2..9/gpu_id for GPUs 0..7).
func TestFixtureMI300X(t *testing.T) {
	t.Parallel()
	_, rep, unlisted := auditList(t, jobsRoot(t, "amd-mi300x", "amd-mi300x-jobs"))
	// KFD's entries all read (5204's "no VRAM" is a note, not a gap).
	if len(unlisted) != 0 {
		t.Errorf("unlisted GPUs %v, want none", unlisted)
	}
	check(t, rep, map[int]want{
		// ROCr opened all eight GPUs; VRAM only on GPU 0, whose CPUs it has.
		5201: {gpus: []int{0}, user: "alice", job: "777.0", verdict: audit.Aligned,
			env: map[string]string{"NCCL_IB_HCA": nccl.EnvOK, "NCCL_SOCKET_IFNAME": nccl.EnvOK}},
		// Unbound, and NCCL_IB_HCA names one of the eight compute ports.
		5202: {gpus: []int{1}, user: "alice", job: "777.0", verdict: audit.Unbound,
			env: map[string]string{"NCCL_IB_HCA": nccl.EnvWrong}},
		// A burstable pod on GPU 2 (node 0) bound to node 1's CPUs.
		5203: {gpus: []int{2}, user: "bob", pod: "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d", qos: "burstable",
			verdict: audit.Misaligned, env: map[string]string{"ROCR_VISIBLE_DEVICES": nccl.EnvUnchecked}},
		// Opened GPU 3 only, no VRAM yet (rocminfo): counted, and said.
		5204: {gpus: []int{3}, user: "bob", verdict: audit.Aligned,
			env: map[string]string{"ROCR_VISIBLE_DEVICES": nccl.EnvOK}},
		// On GPU 4's CPUs (node 1), but its cpuset gives memory from node
		// 0 only: partly.
		5205: {gpus: []int{4}, user: "alice", job: "778.0", verdict: audit.Partly, env: map[string]string{}},
	})
	// 5204's VRAM-less opening is a note on it, not a gap of the listing.
	for _, p := range rep.Processes {
		if p.PID == 5204 && !slices.ContainsFunc(p.Notes, func(s string) bool { return strings.Contains(s, "holds no VRAM") }) {
			t.Errorf("process 5204 notes %q: want the no-VRAM note", p.Notes)
		}
	}
	if len(rep.Unread) != 0 {
		t.Errorf("unread %q: want none (every KFD entry was read)", rep.Unread)
	}
}
