package audit_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpuaffinity/gpuaffinity/audit"
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs/rootfstest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// liveNode is the dgx-h100 fixture mapped onto this machine, as
// docs/audit.md ("Live test") describes: the node's online CPUs become
// the CPUs this test may run on (live[0], live[1], ...), and each GPU's
// local CPUs become one live CPU standing for its NUMA node: node 0's
// GPUs (0-3) get live[0], node 1's (4-7) live[1]. Its NICs, roles and
// pairs stay the fixture's, so the environment rules are env's for a DGX
// H100. Two CPUs express aligned, misaligned and unbound; partly needs a
// third.
func liveNode(t *testing.T, live []int) topology.Node {
	t.Helper()
	n, err := discover.Discover(discover.Options{Root: fakesystest.Root(t, "dgx-h100")})
	if err != nil {
		t.Fatal(err)
	}
	n.CPU.Online = cpuset.Of(live...)
	for i := range n.GPUs {
		loc := &n.GPUs[i].Locality
		if loc.Node == nil || *loc.Node > 1 {
			t.Fatalf("GPU %d: NUMA node %v, want 0 or 1", n.GPUs[i].Index, loc.Node)
		}
		loc.CPUs = cpuset.Of(live[*loc.Node])
	}
	return n
}

// startPinned starts `sleep` with environment env pinned to cpus, and
// stops it when the test ends.
func startPinned(t *testing.T, cpus []int, env ...string) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	// Start returns once sleep has been exec'd; the mask is in place
	// before the audit reads /proc.
	if err := unix.SchedSetaffinity(cmd.Process.Pid, &set); err != nil {
		t.Fatalf("sched_setaffinity(%d, %v): %v", cmd.Process.Pid, cpus, err)
	}
	return cmd.Process.Pid
}

// TestLive starts real processes with chosen CPU affinities and
// environments and audits them from this machine's /proc against the
// DGX H100 fixture's GPU locality (liveNode).
func TestLive(t *testing.T) {
	var self unix.CPUSet
	if err := unix.SchedGetaffinity(0, &self); err != nil {
		t.Skipf("sched_getaffinity: %v", err)
	}
	var live []int
	for c := range 1024 {
		if self.IsSet(c) {
			live = append(live, c)
		}
	}
	if len(live) < 2 {
		t.Skipf("this test may run on %d CPU; the live audit needs 2", len(live))
	}
	n := liveNode(t, live)
	all := live
	computeHCA := "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"

	type tc struct {
		pid     int
		gpu     int
		verdict audit.Verdict
		env     map[string]string
	}
	cases := map[string]tc{
		// On GPU 0's stand-in CPU, with env's NICs for GPU 0.
		"aligned": {startPinned(t, []int{live[0]}, computeHCA, "NCCL_SOCKET_IFNAME==enp4s0f0", "UCX_NET_DEVICES=mlx5_0:1"), 0, audit.Aligned,
			map[string]string{"NCCL_IB_HCA": nccl.EnvOK, "NCCL_SOCKET_IFNAME": nccl.EnvOK, "UCX_NET_DEVICES": nccl.EnvOK}},
		// Driving GPU 0 from socket 1's stand-in; NCCL_IB_HCA a prefix of
		// every mlx5 device, storage ones too.
		"other socket": {startPinned(t, []int{live[1]}, "NCCL_IB_HCA=mlx5"), 0, audit.Misaligned,
			map[string]string{"NCCL_IB_HCA": nccl.EnvWrong}},
		// Every CPU; CUDA_VISIBLE_DEVICES names GPU 3, it drives GPU 4;
		// UCX on storage NIC mlx5_8.
		"unbound": {startPinned(t, all, "CUDA_VISIBLE_DEVICES=3", "UCX_NET_DEVICES=mlx5_8:1"), 4, audit.Unbound,
			map[string]string{"CUDA_VISIBLE_DEVICES": nccl.EnvWrong, "UCX_NET_DEVICES": nccl.EnvWrong}},
	}
	if len(live) >= 3 {
		cases["partly"] = tc{startPinned(t, live[:2]), 0, audit.Partly, map[string]string{}}
	} else {
		t.Log("partly not expressed: it needs 3 CPUs, this test has 2")
	}
	// A process that has ended by the time it is audited.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}

	var uses []audit.Use
	for _, c := range cases {
		uses = append(uses, audit.Use{PID: c.pid, GPUs: []int{c.gpu}, Sources: []string{"test"}})
	}
	uses = append(uses, audit.Use{PID: gone.ProcessState.Pid(), GPUs: []int{1}, Sources: []string{"test"}})
	rep := audit.Run(n, rootfstest.Open(t, "/"), uses, nil, audit.Options{})

	byPID := map[int]audit.Process{}
	for _, p := range rep.Processes {
		byPID[p.PID] = p
	}
	for name, c := range cases {
		p := byPID[c.pid]
		if p.Verdict != c.verdict {
			t.Errorf("%s (pid %d, CPUs %s): %s (%s), want %s", name, c.pid, p.CPUs, p.Verdict, p.Reason, c.verdict)
		}
		if p.Command != "sleep" {
			t.Errorf("%s: command %q, want sleep", name, p.Command)
		}
		if p.UID == nil || *p.UID != os.Getuid() {
			t.Errorf("%s: uid %v, want %d", name, p.UID, os.Getuid())
		}
		if p.Env == nil {
			t.Errorf("%s: environment not read: %q", name, p.Unread)
		}
		for _, e := range p.Env {
			st, ok := c.env[e.Name]
			if !ok {
				st = nccl.EnvUnset
			}
			if e.Name == "CUDA_VISIBLE_DEVICES" && st == nccl.EnvWrong && (p.Job != nil || p.Pod != nil) {
				// This test runs in a Slurm job or a pod: ordinals are
				// left unchecked there.
				st = nccl.EnvUnchecked
			}
			if e.Status != st {
				t.Errorf("%s: %s=%q: %s (%s), want %s", name, e.Name, e.Value, e.Status, e.Problem, st)
			}
		}
	}
	p := byPID[gone.ProcessState.Pid()]
	if p.Verdict != audit.Unknown || len(p.Unread) == 0 || !strings.Contains(p.Unread[0], "process ended") {
		t.Errorf("ended process: %s, unread %q; want unknown, status: process ended", p.Verdict, p.Unread)
	}
}
