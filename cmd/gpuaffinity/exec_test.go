package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/binding"
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/bind"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/launch"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// execHelperVar makes the test binary, run as exec's CMD, report what it
// inherited instead of running tests.
const execHelperVar = "GPUAFFINITY_TEST_HELPER"

// execHelperEnv runs the helper; GORACE drops the race runtime's
// one-second sleep at exit under -race.
var execHelperEnv = []string{execHelperVar + "=mempolicy", "GORACE=atexit_sleep_ms=0"}

func TestMain(m *testing.M) {
	if os.Getenv(execHelperVar) == "mempolicy" {
		os.Exit(execMempolicyHelper())
	}
	code := m.Run()
	if execBin.dir != "" {
		os.RemoveAll(execBin.dir)
	}
	os.Exit(code)
}

// execMempolicyHelper prints the memory policy get_mempolicy reports, the
// pid and the status fields exec must (not) change.
func execMempolicyHelper() int {
	mode, nodes, err := bind.MemPolicy()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fmt.Printf("mode=%d nodes=%s pid=%d\n", mode, nodes, os.Getpid())
	for line := range strings.SplitSeq(string(status), "\n") {
		if strings.HasPrefix(line, "Cpus_allowed_list:") || strings.HasPrefix(line, "Mems_allowed_list:") {
			fmt.Println(line)
		}
	}
	return 0
}

// execBin is the gpuaffinity binary, built once for the tests that need
// a real execve.
var execBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func execBinary(t *testing.T) string {
	t.Helper()
	execBin.once.Do(func() {
		if execBin.dir, execBin.err = os.MkdirTemp("", "gpuaffinity-exec-test-"); execBin.err != nil {
			return
		}
		execBin.path = filepath.Join(execBin.dir, "gpuaffinity")
		out, err := exec.Command("go", "build", "-o", execBin.path, ".").CombinedOutput()
		if err != nil {
			execBin.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if execBin.err != nil {
		t.Fatal(execBin.err)
	}
	return execBin.path
}

// execResult is one run of the binary.
type execResult struct {
	stdout, stderr string
	code           int
}

// execRun runs `gpuaffinity args...` with the local-rank variables and
// GPUAFFINITY_ROOT cleared, plus env ("NAME=value").
func execRun(t *testing.T, env []string, args ...string) execResult {
	t.Helper()
	cmd := exec.Command(execBinary(t), args...)
	cmd.Env = append(execCleanEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("gpuaffinity %s: %v", strings.Join(args, " "), err)
	}
	return execResult{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}

func execCleanEnv() []string {
	drop := append(slices.Clone(launch.LocalRankVars), "CUDA_VISIBLE_DEVICES", "GPUAFFINITY_ROOT", "GPUAFFINITY_STATE_DIR", execHelperVar)
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, name) {
			env = append(env, kv)
		}
	}
	return env
}

// statusLine returns the value of a /proc/<pid>/status field in text.
func statusLine(t *testing.T, text, field string) string {
	t.Helper()
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in:\n%s", field, text)
	return ""
}

// execAllowed is this process's allowed CPUs and this machine's nodes.
func execAllowed(t *testing.T) (cpus, nodes cpuset.Set) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if cpus, err = cpuset.Parse(statusLine(t, string(b), "Cpus_allowed_list")); err != nil {
		t.Fatal(err)
	}
	if nodes, err = bind.OnlineNodes(); err != nil {
		t.Fatal(err)
	}
	return cpus, nodes
}

func first(s cpuset.Set) int { return s.CPUs()[0] }
func last(s cpuset.Set) int  { return s.CPUs()[s.Len()-1] }

func TestExecBindsCPUs(t *testing.T) {
	allowed, _ := execAllowed(t)
	if !allowed.Contains(1) {
		t.Skipf("CPU 1 is not allowed here (%s)", allowed)
	}
	r := execRun(t, nil, "exec", "--cpus", "1", "--", "cat", "/proc/self/status")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "Cpus_allowed_list:\t1\n") {
		t.Errorf("cat /proc/self/status under --cpus 1:\n%s", r.stdout)
	}
}

func TestExecMemPolicy(t *testing.T) {
	allowed, nodes := execAllowed(t)
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	memsAllowed := statusLine(t, string(self), "Mems_allowed_list")
	testBin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cpu, node := strconv.Itoa(first(allowed)), strconv.Itoa(first(nodes))
	for _, tc := range []struct {
		flag     string
		mode     int
		numaMaps string // the policy as /proc/PID/numa_maps prints it
	}{
		{"--membind", bind.ModeBind, "bind:" + node},
		{"--preferred", bind.ModePreferred, "prefer:" + node},
		{"--no-mem", bind.ModeDefault, "default"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			args := []string{"exec", "--cpus", cpu, tc.flag}
			wantNodes := ""
			if tc.flag != "--no-mem" {
				args = append(args, "--mems", node)
				wantNodes = node
			}
			r := execRun(t, execHelperEnv, append(args, "--", testBin)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if want := fmt.Sprintf("mode=%d nodes=%s ", tc.mode, wantNodes); !strings.HasPrefix(r.stdout, want) {
				t.Errorf("get_mempolicy in CMD: %q, want %q…", r.stdout, want)
			}
			if got := statusLine(t, r.stdout, "Cpus_allowed_list"); got != cpu {
				t.Errorf("CMD's Cpus_allowed_list %s, want %s", got, cpu)
			}
			// A memory policy is not a cpuset: Mems_allowed stays.
			if got := statusLine(t, r.stdout, "Mems_allowed_list"); got != memsAllowed {
				t.Errorf("CMD's Mems_allowed_list %s, want %s as before", got, memsAllowed)
			}
			if r.stderr != "" {
				t.Errorf("stderr: %s", r.stderr)
			}

			// The same seen from outside: the task policy in numa_maps.
			r = execRun(t, nil, append(args, "--", "cat", "/proc/self/numa_maps")...)
			if _, err := os.Stat("/proc/self/numa_maps"); err != nil {
				t.Skipf("no numa_maps: %v", err)
			}
			line, _, _ := strings.Cut(r.stdout, "\n")
			if f := strings.Fields(line); r.code != 0 || len(f) < 2 || f[1] != tc.numaMaps {
				t.Errorf("numa_maps of CMD (exit %d): %q, want policy %s", r.code, line, tc.numaMaps)
			}
		})
	}
}

func TestExecMembindIsTheDefault(t *testing.T) {
	allowed, _ := execAllowed(t)
	cpu := strconv.Itoa(first(allowed))
	// No rank, no GPU: the nodes of --cpus.
	r := execRun(t, nil, "exec", "--cpus", cpu, "--", "cat", "/proc/self/numa_maps")
	line, _, _ := strings.Cut(r.stdout, "\n")
	if r.code != 0 || !strings.Contains(line, " bind:") {
		t.Errorf("exec --cpus %s (exit %d, %s): numa_maps %q, want bind:", cpu, r.code, r.stderr, line)
	}
}

func TestExecExitCode(t *testing.T) {
	r := execRun(t, nil, "exec", "--cpus", "0", "--", "sh", "-c", "exit 7")
	if r.code != 7 {
		t.Errorf("exit %d, want 7 (stderr %q)", r.code, r.stderr)
	}
	r = execRun(t, nil, "exec", "--cpus", "0", "--", "no-such-command-gpuaffinity")
	if r.code != 127 || !strings.Contains(r.stderr, "no-such-command-gpuaffinity") {
		t.Errorf("missing command: exit %d, %q; want 127", r.code, r.stderr)
	}
	r = execRun(t, nil, "exec", "--cpus", "0", "--", "/etc/hostname")
	if r.code != 126 {
		t.Errorf("non-executable file: exit %d, %q; want 126", r.code, r.stderr)
	}
}

func TestExecReplacesTheProcess(t *testing.T) {
	cmd := exec.Command(execBinary(t), "exec", "--cpus", "0", "--", "sh", "-c", "echo $$")
	cmd.Env = execCleanEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("CMD runs as pid %s, gpuaffinity was pid %d: not exec'd in place", got, cmd.Process.Pid)
	}
}

func TestExecSignalsReachCMD(t *testing.T) {
	// sh traps TERM and exits 42: a signal to gpuaffinity's pid is
	// handled by CMD itself (a parent forwarding nothing would die of it).
	cmd := exec.Command(execBinary(t), "exec", "--cpus", "0", "--", "sh", "-c",
		`trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done`)
	cmd.Env = execCleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("CMD did not exit after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 42 {
		t.Errorf("exit %d (%v), want 42 from CMD's trap", code, cmd.ProcessState)
	}
}

func TestExecErrors(t *testing.T) {
	allowed, nodes := execAllowed(t)
	outside := strconv.Itoa(last(allowed) + 1)
	missingNode := strconv.Itoa(last(nodes) + 1)
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cpu outside the allowed set", []string{"--cpus", "0," + outside}, "CPUs " + outside + " (of --cpus 0," + outside + ") are not in this process's allowed set " + allowed.String()},
		{"missing NUMA node", []string{"--cpus", "0", "--mems", missingNode}, "NUMA node(s) " + missingNode + " (of --mems " + missingNode + ") do not exist"},
		{"bad cpu list", []string{"--cpus", "3-1"}, "--cpus: invalid cpu set"},
		{"unknown mode", []string{"--cpus", "0", "--mode", "spread"}, `mode "spread": want node, socket or exclusive`},
		{"bad ranks per GPU", []string{"--cpus", "0", "--ranks-per-gpu", "0"}, "--ranks-per-gpu 0"},
		{"two policies", []string{"--cpus", "0", "--membind", "--no-mem"}, "[membind no-mem] were all set"},
		{"no rank, no --cpus", nil, "no local rank"},
		{"demo machine without --dry-run", []string{"--demo", "dgx-h100", "--local-rank", "0"}, "describes another machine"},
		{"demo machine, --cpus but its nodes", []string{"--demo", "dgx-h100", "--local-rank", "0", "--cpus", "0"}, "describes another machine"},
		{"bad LOCAL_RANK", []string{"--cpus", "0"}, "LOCAL_RANK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.name == "bad LOCAL_RANK" {
				env = []string{"LOCAL_RANK=x"}
			}
			r := execRun(t, env, append(append([]string{"exec"}, tc.args...), "--", "touch", marker)...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("CMD ran despite the error")
			}
		})
	}
	// A huge --ranks-per-gpu is refused before any rank is made (it used
	// to run out of memory).
	r := execRun(t, nil, "exec", "--dry-run", "--demo", "dgx-h100", "--local-rank", "0", "--ranks-per-gpu", "10000000", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "binding map: more ranks than cores: 10000000 ranks per GPU for 224 usable CPUs") {
		t.Errorf("huge --ranks-per-gpu: exit %d, %q", r.code, r.stderr)
	}
	r = execRun(t, nil, "exec", "--cpus", "0")
	if r.code != 1 || !strings.Contains(r.stderr, "no command") {
		t.Errorf("no CMD: exit %d, %q", r.code, r.stderr)
	}
}

// execDemoMap is the binding map of a demo machine, computed in-process.
func execDemoMap(t *testing.T, machine string, opts binding.Options) (topology.Node, binding.Map) {
	t.Helper()
	dir := t.TempDir()
	if err := fakesys.BuildMachine(machine, dir); err != nil {
		t.Fatal(err)
	}
	n, err := discover.Discover(discover.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	m, err := binding.Compute(n, opts)
	if err != nil {
		t.Fatal(err)
	}
	return n, m
}

// planField returns the value of "name:" in a --dry-run plan.
func planField(t *testing.T, plan, name string) string {
	t.Helper()
	for line := range strings.SplitSeq(plan, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("plan has no %s:\n%s", name, plan)
	return ""
}

func TestExecDryRunDemo(t *testing.T) {
	_, m := execDemoMap(t, "dgx-h100", binding.Options{Mode: binding.ModeExclusive, RanksPerGPU: 1})
	r := execRun(t, nil, "exec", "--dry-run", "--demo", "dgx-h100", "--local-rank", "3", "--", "python", "train.py")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	cpus := planField(t, r.stdout, "cpus")
	if want := m.Ranks[3].CPUs.String() + " (exclusive map)"; cpus != want {
		t.Errorf("cpus: %q, want the map's %q", cpus, want)
	}
	// By hand (DGX H100: node 0 = cores 0-55 with siblings 112-167, GPUs
	// 0-3): exclusive gives each of its four GPUs 14 contiguous whole cores
	// of node 0, GPU 3 the last 14.
	if want := "42-55,154-167 (exclusive map)"; cpus != want {
		t.Errorf("cpus: %q, want %q", cpus, want)
	}
	for field, want := range map[string]string{
		"rank": "3 (--local-rank)", "gpu": "3", "mode": "exclusive", "mems": "0 (exclusive map)",
		"policy": "bind", "command": "python train.py",
	} {
		if got := planField(t, r.stdout, field); got != want {
			t.Errorf("%s: %q, want %q", field, got, want)
		}
	}
	for _, want := range []string{"  GPUAFFINITY_GPU=3\n", "  GPUAFFINITY_NICS=mlx5_5\n", "  CUDA_DEVICE_ORDER=PCI_BUS_ID\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, r.stdout)
		}
	}

	// --mode node: every CPU of the GPU's node; --preferred.
	r = execRun(t, nil, "exec", "--dry-run", "--demo", "dgx-h100", "--local-rank", "5", "--mode", "node", "--preferred", "--", "true")
	if got := planField(t, r.stdout, "cpus"); got != "56-111,168-223 (node map)" {
		t.Errorf("rank 5 --mode node: cpus %q (exit %d, %s)", got, r.code, r.stderr)
	}
	if got := planField(t, r.stdout, "policy"); got != "preferred" {
		t.Errorf("--preferred: policy %q", got)
	}
}

func TestExecDryRunRankSources(t *testing.T) {
	_, m2 := execDemoMap(t, "dgx-h100", binding.Options{Mode: binding.ModeExclusive, RanksPerGPU: 2})
	_, m1 := execDemoMap(t, "dgx-h100", binding.Options{Mode: binding.ModeExclusive, RanksPerGPU: 1})
	slot := func(m binding.Map, gpu, k int) string {
		for _, r := range m.Ranks {
			if r.GPU == gpu {
				if k == 0 {
					return r.CPUs.String()
				}
				k--
			}
		}
		t.Fatalf("map has no slot for GPU %d", gpu)
		return ""
	}
	for _, tc := range []struct {
		name      string
		env, args []string
		gpu, cpus string
		rank      string
	}{
		{"LOCAL_RANK", []string{"LOCAL_RANK=6"}, nil, "6", slot(m1, 6, 0), "6 (LOCAL_RANK)"},
		{"SLURM_LOCALID", []string{"SLURM_LOCALID=2"}, nil, "2", slot(m1, 2, 0), "2 (SLURM_LOCALID)"},
		// CUDA_VISIBLE_DEVICES reorders: rank 0 drives GPU 3 and gets its CPUs.
		{"CUDA_VISIBLE_DEVICES", []string{"LOCAL_RANK=0", "CUDA_VISIBLE_DEVICES=3,2"}, nil, "3", slot(m1, 3, 0), "0 (LOCAL_RANK)"},
		// Two ranks per GPU: rank 7 is GPU 3's second slot.
		{"ranks per GPU", nil, []string{"--local-rank", "7", "--ranks-per-gpu", "2"}, "3", slot(m2, 3, 1), "7 (--local-rank)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"exec", "--dry-run", "--demo", "dgx-h100"}, tc.args...)
			r := execRun(t, tc.env, append(args, "--", "true")...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if got := planField(t, r.stdout, "gpu"); got != tc.gpu {
				t.Errorf("gpu %q, want %s", got, tc.gpu)
			}
			if got := planField(t, r.stdout, "rank"); got != tc.rank {
				t.Errorf("rank %q, want %s", got, tc.rank)
			}
			if got, _, _ := strings.Cut(planField(t, r.stdout, "cpus"), " "); got != tc.cpus {
				t.Errorf("cpus %q, want %s", got, tc.cpus)
			}
		})
	}
}

func TestExecEnvironment(t *testing.T) {
	// The demo's environment for rank 3 on this machine's CPU 0 (--cpus and
	// --no-mem make it runnable here); a name already set is replaced.
	r := execRun(t, []string{"GPUAFFINITY_GPU=stale", "KEEP_ME=1"},
		"exec", "--demo", "dgx-h100", "--local-rank", "3", "--cpus", "0", "--no-mem", "--", "env")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	count := func(prefix string) int {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				n++
			}
		}
		return n
	}
	for prefix, want := range map[string]int{
		"GPUAFFINITY_GPU=3": 1, "GPUAFFINITY_GPU=": 1, "KEEP_ME=1": 1,
		"CUDA_DEVICE_ORDER=PCI_BUS_ID": 1, "NCCL_IB_HCA==mlx5_0:1,": 1, "PATH=": 1,
	} {
		if got := count(prefix); got != want {
			t.Errorf("%d lines start with %q, want %d:\n%s", got, prefix, want, r.stdout)
		}
	}

	// No GPU to map on this machine: bind only, no environment.
	r = execRun(t, []string{"LOCAL_RANK=0"}, "exec", "--cpus", "0", "--", "env")
	if r.code != 0 || strings.Contains(r.stdout, "GPUAFFINITY_") || strings.Contains(r.stdout, "CUDA_DEVICE_ORDER") {
		t.Errorf("no GPU: exit %d, env:\n%s", r.code, r.stdout)
	}
}

// TestExecAsNobody runs exec as an unprivileged user: sched_setaffinity
// on itself needs no privilege, and set_mempolicy needs none either
// outside a seccomp profile that asks for CAP_SYS_NICE; where it is
// refused, exec warns once and still runs CMD.
func TestExecAsNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot su to nobody")
	}
	su, err := exec.LookPath("su")
	if err != nil {
		t.Skip("no su here")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	allowed, nodes := execAllowed(t)
	if !allowed.Contains(1) {
		t.Skipf("CPU 1 is not allowed here (%s)", allowed)
	}
	// Both binaries where nobody may read and run them.
	dir, err := os.MkdirTemp("", "gpuaffinity-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	testBin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, helper := filepath.Join(dir, "gpuaffinity"), filepath.Join(dir, "helper")
	for src, dst := range map[string]string{execBinary(t): bin, testBin: helper} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	asNobody := func(script string) execResult {
		t.Helper()
		cmd := exec.Command(su, "nobody", "-s", "/bin/sh", "-c", script)
		cmd.Dir = "/"
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("su nobody: %v", err)
		}
		return execResult{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
	}
	if r := asNobody("id -u"); r.code != 0 || strings.TrimSpace(r.stdout) == "0" {
		t.Skipf("su nobody does not give an unprivileged shell here: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	r := asNobody(bin + " exec --cpus 1 -- cat /proc/self/status")
	if r.code != 0 || !strings.Contains(r.stdout, "Cpus_allowed_list:\t1\n") {
		t.Errorf("as nobody, --cpus 1: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	if uid := statusLine(t, r.stdout, "Uid"); strings.Fields(uid)[0] == "0" {
		t.Errorf("CMD ran as uid %s, want nobody's", uid)
	}

	node := strconv.Itoa(first(nodes))
	r = asNobody(strings.Join(execHelperEnv, " ") + " " + bin + " exec --cpus 1 --mems " + node + " --membind -- " + helper)
	if r.code != 0 {
		t.Fatalf("as nobody, --membind: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := statusLine(t, r.stdout, "Cpus_allowed_list"); got != "1" {
		t.Errorf("as nobody, --membind: CMD's Cpus_allowed_list %s, want 1", got)
	}
	switch warnings := strings.Count(r.stderr, "memory policy not set"); {
	case strings.HasPrefix(r.stdout, fmt.Sprintf("mode=%d nodes=%s ", bind.ModeBind, node)):
		if r.stderr != "" {
			t.Errorf("MPOL_BIND applied but stderr says %q", r.stderr)
		}
	case warnings == 1 && strings.HasPrefix(r.stdout, fmt.Sprintf("mode=%d ", bind.ModeDefault)):
		t.Logf("set_mempolicy refused without CAP_SYS_NICE here; warned once and ran CMD: %s", r.stderr)
	default:
		t.Errorf("as nobody, --membind: stdout %q, stderr %q; want MPOL_BIND, or one warning and the default policy", r.stdout, r.stderr)
	}
}
