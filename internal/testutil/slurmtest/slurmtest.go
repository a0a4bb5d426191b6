// Package slurmtest runs a real Slurm controller for tests, so that a test
// can ask where Slurm itself would place a multi-node job: Debian's
// slurmctld (package slurmctld, with munged from package munge) on
// loopback, with the nodes and topology.conf the test describes, and no
// slurmd at all.
//
// The nodes are declared State=CLOUD with power saving on
// (ResumeProgram=/bin/true, SuspendProgram=/bin/true): slurm.conf(5) of
// Slurm 22.05 says a CLOUD node's "initial state will be treated as
// powered down", and slurmctld allocates powered-down nodes ("idle~") to
// a job, runs ResumeProgram on them and leaves the job CONFIGURING, with
// its node list set, until the nodes register or ResumeTimeout passes.
// Nothing registers here, so the test reads the allocation from the
// CONFIGURING job; slurmctld's selection (select/cons_tres, and
// topology/tree's best fit over the switches of topology.conf) is the one
// a production cluster runs. ResumeTimeout is an hour, far beyond any
// test, so no node is marked DOWN for not registering.
//
// Allocate cancels its job and powers its nodes down again before it
// returns, so one Cluster answers any number of Allocate calls in turn,
// each on a cluster with every node free (a Cluster is not for concurrent
// use; separate Clusters may run in parallel tests). A malformed
// topology.conf stops slurmctld at start ("fatal: ...", exit status 1),
// which fails the test in Start with slurmctld's log.
//
// Only _test.go files import this package. It needs root (slurmctld runs
// as SlurmUser=root) and the Debian packages slurmctld, slurm-client and
// munge; without them the test is skipped, or fails under CI
// (testenv.InCI).
package slurmtest

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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

// Config describes the cluster.
type Config struct {
	// Nodes are the node names, in slurm.conf order (e.g. gb200-a1,
	// gb200-b1, ...). topology/none picks the first free nodes in this
	// order. Each node has CPUs=1 and RealMemory=100; one default
	// partition, test, holds them all.
	Nodes []string
	// TopologyPlugin is slurm.conf's TopologyPlugin: "topology/tree" or
	// "topology/none" (the default, when empty).
	TopologyPlugin string
	// Topology is the contents of topology.conf, written beside
	// slurm.conf when non-empty.
	Topology string
}

// Timeouts of the cluster's steps.
const (
	startTimeout    = 30 * time.Second // slurmctld answers scontrol ping
	allocateTimeout = 60 * time.Second // a job gets its nodes
	releaseTimeout  = 30 * time.Second // its nodes are powered down again
	clientTimeout   = 20 * time.Second // one client command
	stopTimeout     = 10 * time.Second // SIGTERM before SIGKILL
)

// tools are the programs the cluster runs: the daemons and the clients.
var tools = []string{"munged", "mungekey", "slurmctld", "scontrol", "sinfo", "squeue", "sbatch", "scancel"}

// nodeNameRE is what a node name may be: one plain host name, so that a
// name is never a hostlist expression (n[1-2]) or a list (n1,n2).
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// In scontrol -o show job: the job's state and its allocated nodes (not
// ReqNodeList=, ExcNodeList= or SchedNodeList=).
var (
	jobStateRE = regexp.MustCompile(`(?:^| )JobState=(\S+)`)
	jobNodesRE = regexp.MustCompile(` NodeList=(\S+)`)
)

// Cluster is a slurmctld (and its munged) started by Start.
type Cluster struct {
	dir, conf string
	paths     map[string]string // program name → path
	env       []string          // of the daemons and the clients
	daemons   []*daemon         // in start order
	ctld      *daemon
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
}

// Start runs munged and slurmctld with the nodes and topology of cfg, and
// waits until slurmctld answers. It skips the test when Slurm or MUNGE is
// not installed or the test does not run as root, but fails it when
// testenv.InCI() is true. t.Cleanup stops the daemons (SIGTERM, SIGKILL
// after 10 s) and removes their directory.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	c, err := start(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TryStart is Start returning slurmctld's failure to come up, its log
// included, rather than failing the test with it: a test that a file
// stops slurmctld wants that error. Errors before slurmctld runs still
// fail the test.
func TryStart(t testing.TB, cfg Config) (*Cluster, error) {
	t.Helper()
	return start(t, cfg)
}

// start is TryStart.
func start(t testing.TB, cfg Config) (*Cluster, error) {
	t.Helper()
	paths := Require(t, "the test slurmctld runs as SlurmUser=root", tools...)
	if len(cfg.Nodes) == 0 {
		t.Fatal("slurmtest: Config.Nodes is empty")
	}
	for _, n := range cfg.Nodes {
		if !nodeNameRE.MatchString(n) {
			t.Fatalf("slurmtest: node name %q is not a plain host name", n)
		}
	}
	plugin := cfg.TopologyPlugin
	if plugin == "" {
		plugin = "topology/none"
	}

	// munged wants every directory above its socket searchable by all:
	// t.TempDir's are 0700, so the cluster makes its own.
	dir, err := os.MkdirTemp("", "slurmtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{dir: dir, conf: filepath.Join(dir, "slurm.conf"), paths: paths}
	t.Cleanup(func() { c.stop(t) })

	socket, key := Layout(t, dir, paths["mungekey"])
	c.env = Env(c.conf)

	if cfg.Topology != "" {
		write(t, filepath.Join(dir, "topology.conf"), cfg.Topology)
	}
	ctldPort, slurmdPort := freePort(t), freePort(t)
	for slurmdPort == ctldPort {
		slurmdPort = freePort(t)
	}
	write(t, c.conf, slurmConf(dir, socket, plugin, ctldPort, slurmdPort, cfg.Nodes))

	c.start(t, "munged", "-F", "--key-file="+key, "--socket="+socket,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"),
		"--log-file="+filepath.Join(dir, "munge", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "munged.seed"))
	if err := c.wait(startTimeout, func() bool {
		_, err := os.Stat(socket)
		return err == nil
	}); err != nil {
		t.Fatalf("munged socket %s: %v\nmunged log:\n%s", socket, err, readFile(filepath.Join(dir, "munge", "munged.log")))
	}
	c.ctld = c.start(t, "slurmctld", "-D", "-f", c.conf)
	if err := c.wait(startTimeout, func() bool {
		out, err := c.run("scontrol", "ping")
		return err == nil && strings.Contains(out, " is UP")
	}); err != nil {
		return nil, fmt.Errorf("slurmctld did not come up: %w; its log:\n%s", err, c.Log())
	}
	return c, nil
}

// slurmConf is the cluster's slurm.conf: a controller on 127.0.0.1 at
// ctldPort, and the nodes as powered-down cloud nodes (see the package
// comment) in one partition.
//
// Power saving: SuspendTime (an hour) only turns power saving on, no idle
// node reaches it; SuspendTimeout=1 lets a node powered down by
// POWER_DOWN_FORCE be allocatable again ("idle~") a second or two later,
// as power_save_interval=1 (default 10 s) makes the power-save thread look
// every second. PrivateData=cloud shows powered-down cloud nodes in sinfo
// and scontrol, which hide them otherwise, even from root.
//
// Scheduling: batch_sched_delay=0 (default 3 s) and sched_min_interval=0
// have slurmctld try a batch job at once, so that an Allocate after the
// first takes about a second rather than three. The first takes about
// three either way: slurmctld runs no scheduler pass in its first seconds.
func slurmConf(dir, socket, topology string, ctldPort, slurmdPort int, nodes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `ClusterName=slurmtest
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
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
TopologyPlugin=%[5]s
PrivateData=cloud
ResumeProgram=/bin/true
SuspendProgram=/bin/true
ResumeTimeout=3600
SuspendTime=3600
SuspendTimeout=1
SlurmctldParameters=power_save_interval=1,power_save_min_interval=0
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
`, dir, ctldPort, slurmdPort, socket, topology)
	for _, n := range nodes {
		fmt.Fprintf(&b, "NodeName=%s NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=1 RealMemory=100 State=CLOUD\n", n)
	}
	fmt.Fprintf(&b, "PartitionName=test Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", strings.Join(nodes, ","))
	return b.String()
}

// Allocate submits a batch job asking for n whole nodes (sbatch -N n
// --exclusive) and returns the names of the nodes Slurm allocated to it,
// expanded (scontrol show hostnames), in Slurm's order. It waits up to
// 60 s for the allocation and fails the test with the job's state and the
// tail of slurmctld's log when none comes.
//
// Before it returns, it cancels the job and powers its nodes down again
// (scontrol update state=POWER_DOWN_FORCE), waiting until they are
// "idle~" once more: every Allocate of a cluster sees all nodes free and
// powered down, as the first one does, so that calls do not depend on
// each other (a node still powering down would be skipped).
func (c *Cluster) Allocate(t testing.TB, n int) []string {
	t.Helper()
	out := c.Run(t, "sbatch", "--parsable", "-N", strconv.Itoa(n), "--exclusive",
		"-J", "slurmtest", "-D", c.dir, "-o", "/dev/null", "--wrap", "true")
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("sbatch printed %q, want a job id", out)
	}

	// A pending job has NodeList=(null); an allocated one keeps its
	// list, CONFIGURING, while its nodes "power up".
	var list, last string
	err := c.wait(allocateTimeout, func() bool {
		out, err := c.run("scontrol", "-o", "show", "job", id)
		last = strings.TrimSpace(out)
		if err != nil {
			return false
		}
		state, nodes := jobStateRE.FindStringSubmatch(last), jobNodesRE.FindStringSubmatch(last)
		if state == nil || nodes == nil || state[1] == "PENDING" || nodes[1] == "(null)" {
			return false
		}
		list = nodes[1]
		return true
	})
	if err != nil {
		t.Fatalf("job %s (-N %d) got no nodes: %v; scontrol show job: %s\nslurmctld log (tail):\n%s",
			id, n, err, last, tail(c.Log(), 30))
	}
	hosts := strings.Fields(c.Run(t, "scontrol", "show", "hostnames", list))
	if len(hosts) != n {
		t.Fatalf("job %s (-N %d) got %d nodes: %s", id, n, len(hosts), list)
	}

	c.Run(t, "scancel", id)
	c.Run(t, "scontrol", "update", "nodename="+list, "state=power_down_force")
	err = c.wait(releaseTimeout, func() bool {
		out, err := c.run("sinfo", "-h", "-N", "-n", list, "-o", "%T")
		last = strings.TrimSpace(out)
		if err != nil {
			return false
		}
		states := strings.Fields(last)
		for _, s := range states {
			if s != "idle~" {
				return false
			}
		}
		return len(states) == n
	})
	if err != nil {
		t.Fatalf("nodes %s of job %s not powered down again: %v; sinfo states: %q\nslurmctld log (tail):\n%s",
			list, id, err, last, tail(c.Log(), 30))
	}
	return hosts
}

// Run runs a Slurm client (scontrol, sinfo, squeue, sbatch, scancel)
// against the cluster and returns its combined output; it fails the test
// when the client fails.
func (c *Cluster) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := c.run(name, args...)
	if err != nil {
		t.Fatalf("%v\nslurmctld log (tail):\n%s", err, tail(c.Log(), 30))
	}
	return out
}

// Log returns slurmctld's log so far (its stdout and stderr: it runs in
// the foreground, without SlurmctldLogFile).
func (c *Cluster) Log() string {
	if c.ctld == nil {
		return ""
	}
	return readFile(c.ctld.log)
}

// run runs a client with the cluster's environment, for at most
// clientTimeout.
func (c *Cluster) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	path := c.paths[name]
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

// start starts a daemon in its own process group, its output in
// NAME.log.
func (c *Cluster) start(t testing.TB, name string, args ...string) *daemon {
	t.Helper()
	log := filepath.Join(c.dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(c.paths[name], args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	d := &daemon{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { cmd.Wait(); close(d.done) }()
	c.daemons = append(c.daemons, d)
	return d
}

// stop stops the daemons, last started first: SIGTERM to each process
// group, SIGKILL after stopTimeout, then SIGKILL to what is left of the
// group (the ResumeProgram and SuspendProgram runs of slurmctld).
func (c *Cluster) stop(t testing.TB) {
	for i := len(c.daemons) - 1; i >= 0; i-- {
		d := c.daemons[i]
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(stopTimeout):
			t.Logf("slurmtest: %s ignored SIGTERM for %s; killing it", d.name, stopTimeout)
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	}
	c.daemons = nil
}

// errExited is wait's error when a daemon has exited.
var errExited = errors.New("exited")

// wait polls cond every 100 ms until it holds; it gives up when timeout
// passes or a daemon exits.
func (c *Cluster) wait(timeout time.Duration, cond func() bool) error {
	end := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		for _, d := range c.daemons {
			select {
			case <-d.done:
				return fmt.Errorf("%s %w: %v", d.name, errExited, d.cmd.ProcessState)
			default:
			}
		}
		if time.Now().After(end) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Layout makes a cluster's directories under dir (munge, state, spool)
// and a fresh munge key with mungekey, and returns munged's socket and
// key paths. dir and every directory above it must be searchable by all
// (munged refuses otherwise; t.TempDir's are 0700).
func Layout(t testing.TB, dir, mungekey string) (socket, key string) {
	t.Helper()
	for _, d := range []string{"munge", "state", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "munge", "key"), 0o700); err != nil {
		t.Fatal(err)
	}
	socket = filepath.Join(dir, "munge", "munge.socket")
	key = filepath.Join(dir, "munge", "key", "munge.key")
	if out, err := exec.Command(mungekey, "-c", "-k", key).CombinedOutput(); err != nil {
		t.Fatalf("mungekey: %v\n%s", err, out)
	}
	return socket, key
}

// Env is the environment of a test cluster's daemons and clients: this
// process's, with SLURM_CONF=conf and without any SLURM_* (or sbatch,
// squeue, ... input) variable of a CI runner that itself runs inside a
// Slurm job, which would hand its job to the test's cluster.
func Env(conf string) []string {
	env := []string{"SLURM_CONF=" + conf}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !hasAnyPrefix(name, "SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SCONTROL_", "SCANCEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// Require returns the paths of the programs names (found by LookPath),
// or skips the test saying why: a program missing, or not root, which
// asRoot says the test needs root for. Under CI (testenv.InCI), which
// installs them and runs as root, it fails the test instead.
func Require(t testing.TB, asRoot string, names ...string) map[string]string {
	t.Helper()
	paths := map[string]string{}
	var missing []string
	for _, name := range names {
		if p, err := LookPath(name); err == nil {
			paths[name] = p
		} else {
			missing = append(missing, name)
		}
	}
	why := ""
	switch {
	case len(missing) > 0:
		why = strings.Join(missing, ", ") + " not installed (Debian/Ubuntu: apt-get install slurmctld slurmd slurm-client munge)"
	case os.Geteuid() != 0:
		why = "not root: " + asRoot
	}
	if why != "" {
		if testenv.InCI() {
			t.Fatalf("CI is set but the Slurm test cannot run: %s", why)
		}
		t.Skip(why)
	}
	return paths
}

// LookPath finds a program in PATH or in the sbin directories, which a
// non-login PATH may lack (slurmctld, slurmd and munged are in /usr/sbin).
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH, /usr/sbin, /sbin or /usr/local/sbin", name)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func write(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readFile returns the file's contents, or what went wrong reading it.
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// tail returns the last n lines of s.
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
