package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs/rootfstest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Options.ThreadReads bounds the threads' status files one Run reads:
// with a budget of 3, process 10 (three threads) is read whole, process
// 20 (its main thread on the GPU's CPUs, thread 22 on the other socket's)
// is judged on its own status, says why, and passes for aligned, as a
// process over the per-process cap is judged on the threads read; with
// no budget thread 22 makes it partly.
func TestThreadReads(t *testing.T) {
	dir := t.TempDir()
	status := func(cpus string) string {
		return fmt.Sprintf("Name:\tx\nUid:\t0\t0\t0\t0\nCpus_allowed_list:\t%s\nMems_allowed_list:\t0\n", cpus)
	}
	write := func(rel, data string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		pid     int
		threads map[int]string
	}{
		{10, map[int]string{10: "0-1", 11: "0-1", 12: "0-1"}},
		{20, map[int]string{20: "0-1", 21: "0-1", 22: "2-3"}},
	} {
		write(fmt.Sprintf("proc/%d/status", p.pid), status("0-1"))
		write(fmt.Sprintf("proc/%d/cgroup", p.pid), "0::/\n")
		for tid, cpus := range p.threads {
			write(fmt.Sprintf("proc/%d/task/%d/status", p.pid, tid), status(cpus))
		}
	}
	write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n")
	n := topology.Node{CPU: topology.CPUInfo{Online: cpuset.Of(0, 1, 2, 3, 4)},
		GPUs: []topology.GPU{{Index: 0, Locality: topology.Locality{CPUs: cpuset.Of(0, 1)}}}}
	uses := []Use{{PID: 10, GPUs: []int{0}}, {PID: 20, GPUs: []int{0}}}
	root := rootfstest.Open(t, dir)

	rep := Run(n, root, uses, nil, Options{NoEnv: true, NoUsers: true, ThreadReads: 3})
	if len(rep.Processes) != 2 {
		t.Fatalf("%d processes, want 2", len(rep.Processes))
	}
	p10, p20 := rep.Processes[0], rep.Processes[1]
	if p10.Verdict != Aligned || len(p10.Unread) != 0 {
		t.Errorf("10: %s, unread %q: want aligned, all read", p10.Verdict, p10.Unread)
	}
	if p20.Verdict != Aligned || !slices.ContainsFunc(p20.Unread, func(s string) bool { return strings.Contains(s, "thread budget") }) {
		t.Errorf("20: %s, unread %q: want aligned on its own status, and the budget said", p20.Verdict, p20.Unread)
	}
	if p20.User != "0" {
		t.Errorf("20: user %q, want the uid's number with NoUsers (etc/passwd names it root)", p20.User)
	}

	rep = Run(n, root, uses, nil, Options{NoEnv: true})
	if p20 := rep.Processes[1]; p20.Verdict != Partly || len(p20.Unread) != 0 || p20.User != "root" {
		t.Errorf("20 without a budget: %s, unread %q, user %q: want partly (thread 22), all read, root", p20.Verdict, p20.Unread, p20.User)
	}
}
