//go:build linux

package slurm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/slurmtest"
)

// nodeName is the test cluster's one node. It is not this machine's host
// name on purpose: the health check must name the node from slurmd's
// SLURMD_NODENAME, as on sites where NodeName and host name differ.
const nodeName = "gpunode01"

// clusterBudget bounds the cluster part of the test (daemons up to the
// last assertion); the binary build comes before it.
const clusterBudget = 150 * time.Second

// healthCheckInterval is the test cluster's HealthCheckInterval (s).
const healthCheckInterval = 3

// The drain reason for the faulty fixture: dgx-h100's compute NIC mlx5_0
// (PCI 0000:18:00.0, GPU 0's pair in the fixture spec) with port 1 set
// DOWN by faultyRoot.
const faultReason = "gpuaffinity: nic.port_state: NIC mlx5_0 (0000:18:00.0) port 1 is DOWN"

const adminReason = "bad DIMM, ticket 42"

// TestSlurmHealthCheckAndProlog runs Debian's slurmctld and slurmd (with
// munged) as a one-node cluster on localhost, with the shipped
// HealthCheckProgram and Prolog scripts pointed at fixture roots, and
// checks what Slurm does:
//
//  1. a faulty root (an InfiniBand port down): the health check that slurmd
//     runs drains the node with a reason starting "gpuaffinity:";
//  2. a healthy root: the next run resumes it to IDLE;
//  3. a node an admin drained stays drained with the admin's reason, while
//     the checks fail and after they pass again;
//  4. a prolog that fails the gate: Slurm drains the node ("Prolog error")
//     and requeues the batch job held; a passing prolog lets a job run.
func TestSlurmHealthCheckAndProlog(t *testing.T) {
	tools := requireCluster(t)
	bin := buildGpuaffinity(t)
	c := startCluster(t, tools, bin)

	// The node registers; the health check (healthy root) leaves it idle.
	c.waitNode("node idle after registration", 60*time.Second, func(state, reason string) bool {
		return state == "IDLE"
	})
	c.waitRuns("a first health check run", 1)
	if log := c.read(c.hcLog); !strings.Contains(log, "healthcheck exit 0") {
		t.Fatalf("the health check did not pass on the healthy root:\n%s", log)
	}

	// 1. Faulty root: slurmd's run of the health check drains the node.
	c.useRoot("healthcheck.env", c.faulty)
	state, reason := c.waitNode("gpuaffinity drain", 30*time.Second, func(state, reason string) bool {
		return strings.Contains(state, "DRAIN")
	})
	if state != "IDLE+DRAIN" || !strings.HasPrefix(reason, faultReason) {
		c.fatalf("after the faulty check: State=%s Reason=%q, want IDLE+DRAIN and a reason starting %q", state, reason, faultReason)
	}
	if out := c.client("sinfo", "-h", "-N", "-n", nodeName, "-o", "%N|%t|%E"); !strings.HasPrefix(out, nodeName+"|drain|"+faultReason) {
		c.fatalf("sinfo: %q, want %q...", out, nodeName+"|drain|"+faultReason)
	}
	if log := c.read(c.hcLog); !strings.Contains(log, "healthcheck exit 1") || !strings.Contains(log, "ERROR:  nhc:  Health check failed:  check_gpuaffinity:  nic.port_state: NIC mlx5_0") {
		c.fatalf("health check log has no failing run:\n%s", log)
	}
	// A later failing run drains again with the same reason; slurmctld
	// keeps it, time stamp included.
	c.waitRuns("another failing run", 2)
	if _, again := c.node(); again != reason {
		c.fatalf("reason changed on a repeated failure: %q, then %q", reason, again)
	}

	// 2. Healthy root: the next run resumes the node it drained.
	c.useRoot("healthcheck.env", c.healthy)
	c.waitNode("gpuaffinity resume to idle", 30*time.Second, func(state, reason string) bool {
		return state == "IDLE" && reason == ""
	})

	// 3. An admin drain is neither drained over nor resumed.
	c.client("scontrol", "update", "nodename="+nodeName, "state=drain", "reason="+adminReason)
	c.useRoot("healthcheck.env", c.faulty)
	c.waitRuns("two failing runs on the admin-drained node", 2)
	if state, reason := c.node(); state != "IDLE+DRAIN" || !strings.HasPrefix(reason, adminReason+" [") {
		c.fatalf("failing check on an admin-drained node: State=%s Reason=%q, want IDLE+DRAIN with %q", state, reason, adminReason)
	}
	c.useRoot("healthcheck.env", c.healthy)
	c.waitRuns("two passing runs on the admin-drained node", 2)
	if state, reason := c.node(); state != "IDLE+DRAIN" || !strings.HasPrefix(reason, adminReason+" [") {
		c.fatalf("passing check on an admin-drained node: State=%s Reason=%q, want IDLE+DRAIN with %q", state, reason, adminReason)
	}
	c.client("scontrol", "update", "nodename="+nodeName, "state=resume")
	c.waitNode("admin resume to idle", 30*time.Second, func(state, reason string) bool {
		return state == "IDLE"
	})

	// 4. Prolog. A healthy root lets the job run ...
	ok := c.submit()
	c.waitJob("the job behind a passing prolog", ok, 30*time.Second, func(state, reason string) bool {
		return state == "COMPLETED"
	})
	if log := c.read(c.prologLog); !strings.Contains(log, "prolog job "+ok+" exit 0") {
		c.fatalf("the prolog did not run (or failed) for job %s:\n%s", ok, log)
	}
	// ... a faulty one fails the prolog: Slurm drains the node and
	// requeues the batch job held.
	c.useRoot("prolog.env", c.faulty)
	held := c.submit()
	c.waitJob("the job behind a failing prolog held", held, 30*time.Second, func(state, reason string) bool {
		return state == "PENDING" && reason == "launch_failed_requeued_held"
	})
	if log := c.read(c.prologLog); !strings.Contains(log, "prolog job "+held+" exit 1") {
		c.fatalf("prolog log for job %s:\n%s", held, log)
	}
	if state, reason := c.node(); state != "IDLE+DRAIN" || !strings.HasPrefix(reason, "Prolog error [") {
		c.fatalf("after the failing prolog: State=%s Reason=%q, want IDLE+DRAIN with Prolog error", state, reason)
	}
	if log := c.read(c.logOf("slurmd")); !strings.Contains(log, "prolog failed: rc:1 output:ERROR:  nhc:  Health check failed:  check_gpuaffinity:  nic.port_state: NIC mlx5_0") {
		c.fatalf("slurmd did not log the prolog's failure line")
	}
	// Slurm's own reason is not gpuaffinity's: a passing health check
	// leaves the node drained for an admin to look at.
	c.waitRuns("a passing run on the prolog-drained node", 2)
	if state, reason := c.node(); state != "IDLE+DRAIN" || !strings.HasPrefix(reason, "Prolog error [") {
		c.fatalf("health check touched Slurm's drain: State=%s Reason=%q", state, reason)
	}
}

// TestGresConfExample keeps gres.conf.example what `gpuaffinity gres`
// writes for the dgx-h100 demo; docs/gres.md explains its lines, and
// gres/slurmd_test.go has the real slurmd read them.
func TestGresConfExample(t *testing.T) {
	bin := buildGpuaffinity(t)
	out, err := exec.Command(bin, "gres", "--demo", "dgx-h100").Output()
	if err != nil {
		t.Fatalf("gpuaffinity gres --demo dgx-h100: %v", err)
	}
	want, err := os.ReadFile("gres.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(want) {
		t.Errorf("gres.conf.example is stale; regenerate: gpuaffinity gres --demo dgx-h100 > deploy/slurm/gres.conf.example\ngot:\n%s", out)
	}
	// GPU 0 and 4 of a DGX H100 by hand: socket 0's and socket 1's 56
	// cores, 18 NVLinks to each other GPU through the NVSwitches.
	for _, l := range []string{
		"Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55 Links=-1,18,18,18,18,18,18,18\n",
		"Name=gpu Type=h100 File=/dev/nvidia4 Cores=56-111 Links=18,18,18,18,-1,18,18,18\n",
	} {
		if !strings.Contains(string(want), l) {
			t.Errorf("gres.conf.example lacks %q", l)
		}
	}
}

// TestScriptsParse has sh parse the shipped scripts and the defaults
// file, and checks that the scripts are executable (slurmd execs them).
func TestScriptsParse(t *testing.T) {
	for _, f := range []string{"gpuaffinity-healthcheck.sh", "gpuaffinity-prolog.sh", "gpuaffinity.default"} {
		if out, err := exec.Command("sh", "-n", f).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", f, err, out)
		}
		if !strings.HasSuffix(f, ".sh") {
			continue
		}
		if fi, err := os.Stat(f); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable (chmod 755): %v", f, err)
		}
	}
}

// requireCluster returns the paths of the Slurm and MUNGE programs, or
// skips the test saying why (fails it where env CI is set: CI installs
// them and runs as root).
func requireCluster(t *testing.T) map[string]string {
	t.Helper()
	return slurmtest.Require(t, "slurmd runs the prolog and the health check as root",
		"slurmctld", "slurmd", "scontrol", "sinfo", "sbatch", "scancel", "munged", "mungekey")
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// buildGpuaffinity builds cmd/gpuaffinity once per test binary (go test
// puts GOROOT/bin first in PATH) and returns the binary.
func buildGpuaffinity(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "gpuaffinity-bin-"); buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(buildDir, "gpuaffinity"), "github.com/gpuaffinity/gpuaffinity/cmd/gpuaffinity")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = os.Environ()
		if os.Getenv("CGO_CFLAGS") == "" {
			cmd.Env = append(cmd.Env, "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/gpuaffinity: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "gpuaffinity")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

type cluster struct {
	t                *testing.T
	tools            map[string]string
	dir, conf        string
	env              []string // for the client commands and daemons
	daemons          []*daemon
	healthy, faulty  string // fixture roots
	hcLog, prologLog string
	deadline         time.Time
	jobs             []string
	bin, scriptDir   string
}

// startCluster builds the fixture roots, writes slurm.conf, the wrapper
// scripts and their settings files into a temporary directory, and starts
// munged, slurmctld and slurmd, all stopped (with every process they
// leave behind) and removed when the test ends.
func startCluster(t *testing.T, tools map[string]string, bin string) *cluster {
	t.Helper()
	// Every process the daemons leave behind (slurmd double-forks
	// slurmstepd into its own session) is re-parented to this process, so
	// that the cleanup can find and end it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}
	// munged wants every directory above its socket searchable by all:
	// t.TempDir's are 0700, so the test makes its own.
	dir, err := os.MkdirTemp("", "gpuaffinity-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	scriptDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, tools: tools, dir: dir, conf: filepath.Join(dir, "slurm.conf"), bin: bin, scriptDir: scriptDir,
		hcLog: filepath.Join(dir, "healthcheck.log"), prologLog: filepath.Join(dir, "prolog.log")}
	t.Cleanup(c.stop)

	c.healthy = filepath.Join(dir, "healthy")
	c.faulty = filepath.Join(dir, "faulty")
	for _, r := range []string{c.healthy, c.faulty} {
		if err := fakesys.BuildMachine("dgx-h100", r); err != nil {
			t.Fatalf("fixture dgx-h100: %v", err)
		}
	}
	port := filepath.Join(c.faulty, "sys/class/infiniband/mlx5_0/ports/1")
	c.write(filepath.Join(port, "state"), "1: DOWN\n", 0o644)
	c.write(filepath.Join(port, "phys_state"), "2: Polling\n", 0o644)

	socket, key := slurmtest.Layout(t, dir, tools["mungekey"])
	c.env = slurmtest.Env(c.conf)

	// Wrappers: slurmd runs them with no environment; each points the
	// shipped script at its settings file and records its exit status.
	for _, s := range []string{"gpuaffinity-healthcheck.sh", "gpuaffinity-prolog.sh"} {
		if fi, err := os.Stat(filepath.Join(scriptDir, s)); err != nil || fi.Mode()&0o111 == 0 {
			t.Fatalf("%s must exist and be executable (slurmd execs it): %v", s, err)
		}
	}
	c.write(filepath.Join(dir, "healthcheck"), fmt.Sprintf(`#!/bin/sh
GPUAFFINITY_DEFAULTS=%s
export GPUAFFINITY_DEFAULTS
%s >> %s 2>&1
echo "healthcheck exit $?" >> %[3]s
`, filepath.Join(dir, "healthcheck.env"), filepath.Join(scriptDir, "gpuaffinity-healthcheck.sh"), c.hcLog), 0o755)
	c.write(filepath.Join(dir, "prolog"), fmt.Sprintf(`#!/bin/sh
GPUAFFINITY_DEFAULTS=%s
export GPUAFFINITY_DEFAULTS
%s
rc=$?
echo "prolog job $SLURM_JOB_ID exit $rc" >> %s
exit $rc
`, filepath.Join(dir, "prolog.env"), filepath.Join(scriptDir, "gpuaffinity-prolog.sh"), c.prologLog), 0o755)
	c.useRoot("healthcheck.env", c.healthy)
	c.useRoot("prolog.env", c.healthy)

	ctldPort, slurmdPort := freePort(t), freePort(t)
	for slurmdPort == ctldPort {
		slurmdPort = freePort(t)
	}
	c.write(c.conf, fmt.Sprintf(`ClusterName=gpuaffinitytest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
AuthType=auth/munge
AuthInfo=socket=%[4]s
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%[1]s/state
SlurmdSpoolDir=%[1]s/spool
SlurmctldPidFile=%[1]s/slurmctld.pid
SlurmdPidFile=%[1]s/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
HealthCheckProgram=%[1]s/healthcheck
HealthCheckInterval=%[5]d
HealthCheckNodeState=%[6]s
Prolog=%[1]s/prolog
PrologFlags=%[7]s
NodeName=%[8]s NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=%[9]d RealMemory=100 State=UNKNOWN
PartitionName=test Nodes=%[8]s Default=YES MaxTime=INFINITE State=UP
`, dir, ctldPort, slurmdPort, socket, healthCheckInterval, exampleSetting(t, "HealthCheckNodeState"),
		exampleSetting(t, "PrologFlags"), nodeName, cpus()), 0o644)

	c.deadline = time.Now().Add(clusterBudget)
	c.start("munged", tools["munged"], "-F", "--key-file="+key, "--socket="+socket,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--log-file="+filepath.Join(dir, "munge", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "munged.seed"))
	c.waitFor("munged socket", 20*time.Second, func() (bool, string) {
		_, err := os.Stat(socket)
		return err == nil, fmt.Sprint(err)
	})
	c.start("slurmctld", tools["slurmctld"], "-D", "-f", c.conf)
	c.start("slurmd", tools["slurmd"], "-D", "-f", c.conf, "-N", nodeName)
	return c
}

// exampleSetting reads key's value from slurm.conf.example, so that the
// test cluster runs the lines the example ships.
func exampleSetting(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile("slurm.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
			return v
		}
	}
	t.Fatalf("slurm.conf.example has no %s=", key)
	return ""
}

func cpus() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() == 0 {
		return 1
	}
	return set.Count()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (c *cluster) write(p, data string, mode os.FileMode) {
	c.t.Helper()
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), mode); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		c.t.Fatal(err)
	}
}

// useRoot points a wrapper's settings file (healthcheck.env, prolog.env)
// at a fixture root; the next run of the script reads it.
func (c *cluster) useRoot(envFile, root string) {
	c.t.Helper()
	c.write(filepath.Join(c.dir, envFile), fmt.Sprintf(`GPUAFFINITY_BIN=%s
GPUAFFINITY_ROOT=%s
GPUAFFINITY_CHECK_ARGS="--interval 0"
SLURM_CONF=%s
`, c.bin, root, c.conf), 0o644)
}

func (c *cluster) logOf(name string) string { return filepath.Join(c.dir, name+".log") }

func (c *cluster) start(name, path string, args ...string) {
	c.t.Helper()
	log := c.logOf(name)
	f, err := os.Create(log)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	d := &daemon{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { cmd.Wait(); close(d.done) }()
	c.daemons = append(c.daemons, d)
}

// stop cancels the jobs, stops the daemons (SIGTERM to each process
// group, SIGKILL after 10 s), then ends whatever they left behind.
func (c *cluster) stop() {
	if len(c.daemons) > 1 {
		for _, j := range c.jobs {
			c.run(10*time.Second, "scancel", j)
		}
	}
	for i := len(c.daemons) - 1; i >= 0; i-- {
		d := c.daemons[i]
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			c.t.Logf("%s ignored SIGTERM; killing it", d.name)
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) // the rest of its group
	}
	if left := reapOrphans(10 * time.Second); len(left) > 0 {
		c.t.Errorf("processes left behind: %v", left)
	}
}

// reapOrphans kills and reaps the processes re-parented to this one (and
// their descendants) until none is left or the time is up; it returns the
// ones it could not end.
func reapOrphans(within time.Duration) []int {
	end := time.Now().Add(within)
	for {
		kids := descendants(os.Getpid())
		if len(kids) == 0 || time.Now().After(end) {
			return kids
		}
		for _, pid := range kids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range kids {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil) // not ours to wait for: only children are
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// descendants lists every process below pid, from /proc.
func descendants(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q, n := parent[p], 0; q != 0 && n < 64; q, n = parent[q], n+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// run runs a client command with SLURM_CONF set.
func (c *cluster) run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	path := c.tools[name]
	if path == "" {
		path = name
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// client runs a client command and fails the test if it fails.
func (c *cluster) client(name string, args ...string) string {
	c.t.Helper()
	out, err := c.run(20*time.Second, name, args...)
	if err != nil {
		c.fatalf("%v", err)
	}
	return out
}

func (c *cluster) submit() string {
	c.t.Helper()
	out := c.client("sbatch", "--parsable", "-D", c.dir, "-o", filepath.Join(c.dir, "job-%j.out"), "--wrap", "true")
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.Atoi(id); err != nil {
		c.fatalf("sbatch printed %q", out)
	}
	c.jobs = append(c.jobs, id)
	return id
}

var (
	stateRE  = regexp.MustCompile(`(?m)^\s*State=(\S+)`)
	reasonRE = regexp.MustCompile(`(?m)^\s*Reason=(.*)$`)
	jobRE    = regexp.MustCompile(`JobState=(\S+) Reason=(\S+)`)
)

// node returns the node's State= and Reason= (empty where none) from
// scontrol show node.
func (c *cluster) node() (state, reason string) {
	c.t.Helper()
	state, reason, err := c.nodeInfo()
	if err != nil {
		c.fatalf("%v", err)
	}
	return state, reason
}

func (c *cluster) nodeInfo() (state, reason string, err error) {
	out, err := c.run(10*time.Second, "scontrol", "show", "node", nodeName)
	if err != nil {
		return "", "", err
	}
	m := stateRE.FindStringSubmatch(out)
	if m == nil {
		return "", "", fmt.Errorf("no State= in scontrol show node:\n%s", out)
	}
	if r := reasonRE.FindStringSubmatch(out); r != nil {
		reason = strings.TrimSpace(r[1])
	}
	return m[1], reason, nil
}

// waitNode polls scontrol show node until cond holds.
func (c *cluster) waitNode(what string, timeout time.Duration, cond func(state, reason string) bool) (state, reason string) {
	c.t.Helper()
	c.waitFor(what, timeout, func() (bool, string) {
		var err error
		if state, reason, err = c.nodeInfo(); err != nil {
			return false, err.Error()
		}
		return cond(state, reason), fmt.Sprintf("State=%s Reason=%q", state, reason)
	})
	return state, reason
}

// waitJob polls scontrol show job until cond holds.
func (c *cluster) waitJob(what, id string, timeout time.Duration, cond func(state, reason string) bool) {
	c.t.Helper()
	c.waitFor(what, timeout, func() (bool, string) {
		out, err := c.run(10*time.Second, "scontrol", "show", "job", id)
		if err != nil {
			return false, err.Error()
		}
		m := jobRE.FindStringSubmatch(out)
		if m == nil {
			return false, out
		}
		return cond(m[1], m[2]), m[0]
	})
}

// runs counts the health check runs slurmd has finished.
func (c *cluster) runs() int { return strings.Count(c.read(c.hcLog), "healthcheck exit ") }

// waitRuns waits until n more health check runs have finished (n ≥ 2
// makes sure one started after a change of settings).
func (c *cluster) waitRuns(what string, n int) {
	c.t.Helper()
	want := c.runs() + n
	c.waitFor(what, time.Duration(n+2)*healthCheckInterval*time.Second+10*time.Second, func() (bool, string) {
		got := c.runs()
		return got >= want, fmt.Sprintf("%d runs, want %d", got, want)
	})
}

// waitFor polls cond every 200 ms until it holds, timeout passes or the
// cluster's time budget is spent; then it fails the test with the last
// observation, the node and the daemons' logs.
func (c *cluster) waitFor(what string, timeout time.Duration, cond func() (bool, string)) {
	c.t.Helper()
	end := time.Now().Add(timeout)
	if c.deadline.Before(end) {
		end = c.deadline
	}
	last := ""
	for {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		for _, d := range c.daemons {
			select {
			case <-d.done:
				c.fatalf("waiting for %s: %s exited: %v", what, d.name, d.cmd.ProcessState)
			default:
			}
		}
		if time.Now().After(end) {
			c.fatalf("timed out waiting for %s; last: %s", what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *cluster) read(p string) string {
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		c.t.Errorf("%v", err)
	}
	return string(b)
}

// fatalf fails the test with the cluster's state: scontrol show node, the
// jobs, and the tails of the daemons' and scripts' logs.
func (c *cluster) fatalf(format string, args ...any) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, format, args...)
	out, err := c.run(10*time.Second, "scontrol", "show", "node", nodeName)
	fmt.Fprintf(&b, "\n--- scontrol show node %s (%v):\n%s", nodeName, err, out)
	for _, j := range c.jobs {
		out, _ := c.run(10*time.Second, "scontrol", "-o", "show", "job", j)
		fmt.Fprintf(&b, "--- job %s: %s", j, out)
	}
	logs := []string{c.hcLog, c.prologLog}
	for _, d := range c.daemons {
		logs = append(logs, d.log)
	}
	for _, l := range logs {
		fmt.Fprintf(&b, "--- %s (tail):\n%s", filepath.Base(l), tail(c.read(l), 25))
	}
	c.t.Fatal(b.String())
}

func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestNHCCheck sources gpuaffinity.nhc in bash as NHC does, with NHC's
// die (which prints "ERROR:  $NAME:  Health check failed:  $*"), and runs
// check_gpuaffinity on a healthy and an unhealthy demo machine and with a
// bad flag: the failures come out as NHC's own line, the same line
// `check -o nhc` prints.
func TestNHCCheck(t *testing.T) {
	bin := buildGpuaffinity(t)
	run := func(args string) (string, error) {
		script := `NAME=nhc
function die() { echo "ERROR:  $NAME:  Health check failed:  $2"; return 1; }
. ./gpuaffinity.nhc
check_gpuaffinity ` + args
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), "GPUAFFINITY_BIN="+bin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("--demo dgx-h100 --interval 0"); err != nil || out != "" {
		t.Errorf("healthy: %v %q", err, out)
	}
	out, err := run("--demo dgx-h100-faults --interval 0")
	direct, _ := exec.Command(bin, "check", "-o", "nhc", "--demo", "dgx-h100-faults", "--interval", "0").Output()
	if err == nil || out != string(direct) || !strings.HasPrefix(out, "ERROR:  nhc:  Health check failed:  check_gpuaffinity:  ") {
		t.Errorf("unhealthy: %v %q; want NHC's line, as check -o nhc prints it: %q", err, out, direct)
	}
	if out, err := run("--demo dgx-h100 --profile nosuch"); err == nil || !strings.HasPrefix(out, "ERROR:  nhc:  Health check failed:  check_gpuaffinity:  gpuaffinity: ") {
		t.Errorf("bad flag: %v %q", err, out)
	}
}
