package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"

	"github.com/gpuaffinity/gpuaffinity/agent"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// agentProc is `gpuaffinity agent` running as a process.
type agentProc struct {
	cmd    *exec.Cmd
	url    string
	notify chan string
	stderr chan string
}

var listenRE = regexp.MustCompile(`msg="Listening on" address=(\S+)`)

// startAgentProc runs the built binary's agent on 127.0.0.1 (a free
// port) with a unixgram NOTIFY_SOCKET, and waits for READY=1.
func startAgentProc(t *testing.T, env []string, args ...string) *agentProc {
	t.Helper()
	return startAgentProcVia(t, nil, env, args...)
}

// startAgentProcVia is startAgentProc with the binary run through wrap, a
// command line the binary's path and arguments are appended to (a shell
// that puts itself in a cgroup and execs "$@").
func startAgentProcVia(t *testing.T, wrap, env []string, args ...string) *agentProc {
	t.Helper()
	sockPath := filepath.Join(t.TempDir(), "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	p := &agentProc{notify: make(chan string, 100), stderr: make(chan string, 1000)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := sock.Read(buf)
			if err != nil {
				close(p.notify)
				return
			}
			p.notify <- string(buf[:n])
		}
	}()
	args = append([]string{"agent", "--web.listen-address", "127.0.0.1:0", "--log-level", "info"}, args...)
	argv := append(append(append([]string(nil), wrap...), execBinary(t)), args...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(append(execCleanEnv(), "NOTIFY_SOCKET="+sockPath), env...)
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
			select {
			case p.stderr <- sc.Text():
			default:
			}
		}
		close(p.stderr)
	}()
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("agent did not listen within 60 s; stderr:\n%s", p.drain())
	}
	p.expect(t, "READY=1")
	return p
}

// drain returns what the agent wrote on stderr so far.
func (p *agentProc) drain() string {
	var b strings.Builder
	for {
		select {
		case l, ok := <-p.stderr:
			if !ok {
				return b.String()
			}
			b.WriteString(l + "\n")
		default:
			return b.String()
		}
	}
}

func (p *agentProc) expect(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-p.notify:
			if !ok {
				t.Fatalf("notify socket closed waiting for %q", want)
			}
			if strings.Contains(m, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no %q on NOTIFY_SOCKET; stderr:\n%s", want, p.drain())
		}
	}
}

func (p *agentProc) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(p.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The agent as systemd runs it: READY=1 after the first round, SIGHUP
// rescans (RELOADING=1, READY=1), SIGTERM stops it cleanly (STOPPING=1,
// exit 0) and removes the demo machine.
func TestAgentCmdSignals(t *testing.T) {
	tmp := t.TempDir()
	state := filepath.Join(tmp, "state")
	p := startAgentProc(t, []string{"TMPDIR=" + tmp}, "--demo", "dgx-h100", "--state-dir", state, "--rescan", "0")
	demos, _ := filepath.Glob(filepath.Join(tmp, "gpuaffinity-demo-*"))
	if len(demos) != 1 {
		t.Fatalf("demo roots while running: %v", demos)
	}
	if code, body := p.get(t, "/readyz"); code != 200 {
		t.Errorf("/readyz = %d %s", code, body)
	}
	// The agent logs at info by default: its start's discovery is there.
	var logged strings.Builder
	for deadline := time.After(30 * time.Second); !strings.Contains(logged.String(), "level=INFO msg=discovered why=start gpus=8"); {
		select {
		case l, ok := <-p.stderr:
			if !ok {
				t.Fatalf("stderr closed without an info line for the first discovery:\n%s", logged.String())
			}
			logged.WriteString(l + "\n")
		case <-deadline:
			t.Fatalf("no info line for the first discovery on stderr:\n%s", logged.String())
		}
	}
	// The build's version and revision reach gpuaffinity_build_info.
	_, body := p.get(t, "/metrics")
	if !strings.Contains(body, `revision="`+revision+`",tags="unknown",version="`+version+`"} 1`) {
		t.Errorf("gpuaffinity_build_info without version %q, revision %q", version, revision)
	}
	// The daemon's runtime settings (daemonGC, daemonProcs), where the
	// environment leaves them to it.
	if _, ok := os.LookupEnv("GOMAXPROCS"); !ok && !strings.Contains(body, "\ngo_sched_gomaxprocs_threads 1\n") {
		t.Errorf("the agent does not run at GOMAXPROCS 1 (node_exporter's default):\n%s", grepLines(body, "go_sched_gomaxprocs_threads"))
	}
	if _, ok := os.LookupEnv("GOGC"); !ok && !strings.Contains(body, "\ngo_gc_gogc_percent 50\n") {
		t.Errorf("the agent does not collect at GOGC 50:\n%s", grepLines(body, "go_gc_gogc_percent"))
	}
	for _, f := range []string{"topology.json", "nccl-topo.xml", "env"} {
		if _, err := os.Stat(filepath.Join(state, f)); err != nil {
			t.Error(err)
		}
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.expect(t, "RELOADING=1")
	p.expect(t, "READY=1")
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.expect(t, "STOPPING=1")
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v; stderr:\n%s", err, p.drain())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("agent still running 30 s after SIGTERM")
	}
	if demos, _ := filepath.Glob(filepath.Join(tmp, "gpuaffinity-demo-*")); len(demos) != 0 {
		t.Errorf("demo root left after exit: %v", demos)
	}
	if !strings.Contains(p.drain(), "SIGHUP: rescanning") {
		t.Error("no SIGHUP log line")
	}
}

// --web.systemd-socket serves on the socket systemd passes (fd 3,
// LISTEN_FDS=1, LISTEN_PID the agent's own pid).
func TestAgentCmdSocketActivation(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := l.(*net.TCPListener).File()
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, execBinary(t),
		"agent", "--demo", "dgx-h100", "--state-dir", "", "--web.systemd-socket")
	cmd.Env = execCleanEnv()
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	url := "http://" + l.Addr().String() + "/health"
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.HasPrefix(string(b), "ok: healthy") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready agent on the passed socket: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestAgentCmdBadFlags(t *testing.T) {
	// The cases that get past the flags set the daemon's GOMAXPROCS and
	// GOGC in this process: the other tests keep theirs.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, args := range [][]string{
		{"agent", "--demo", "dgx-h100", "--profile", "training"},
		{"agent", "--demo", "dgx-h100", "--rescan", "-1s"},
		{"agent", "--demo", "dgx-h100", "--expect", "/nonexistent.yaml"},
		{"agent", "--demo", "nosuch"},
		{"agent", "--demo", "dgx-h100", "--web.listen-address", "127.0.0.1:0", "--web.config.file", "/nonexistent.yml"},
		{"agent", "--demo", "dgx-h100", "--web.listen-address", "127.0.0.1:0", "--web.max-requests", "-1"},
		{"agent", "--demo", "dgx-h100", "--web.listen-address", "127.0.0.1:0", "--web.max-connections", "-1"},
		{"agent", "--demo", "dgx-h100", "--runtime.gomaxprocs", "0"},
		{"agent", "--demo", "dgx-h100", "--collector.jobs.info"}, // without --collector.jobs
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("gpuaffinity %s: want an error", strings.Join(args, " "))
		}
	}
}

// writeAgentState runs the agent package on root once and returns its
// state directory.
func writeAgentState(t testing.TB, root string) string {
	t.Helper()
	dir := t.TempDir()
	a, err := agent.New(agent.Options{Root: root, StateDir: dir, ListenAddresses: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	<-a.Ready()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return dir
}

// bareRoot is a root with nothing but the process status of root: a
// command that reads the node from the cache gets the same answer from
// it, one that discovers does not.
func bareRoot(t *testing.T, root string) string {
	t.Helper()
	bare := t.TempDir()
	b, err := os.ReadFile(filepath.Join(root, "proc/self/status"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(bare, "proc/self"), 0o755)
	if err := os.WriteFile(filepath.Join(bare, "proc/self/status"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return bare
}

// env and cpumap read the agent's topology.json where it is the truth
// and give exactly what discovery gives, on every fixture machine.
func TestEnvAndCpumapFromAgentState(t *testing.T) {
	envCleanEnv(t)
	for _, m := range fakesys.Machines() {
		t.Run(m, func(t *testing.T) {
			root := fakesystest.Root(t, m)
			dir := writeAgentState(t, root)
			bare := bareRoot(t, root)
			for _, args := range [][]string{
				{"env", "--local-rank", "1"},
				{"env", "--all-ranks", "-o", "json"},
				{"cpumap", "-o", "json"},
				{"cpumap", "--mode", "node", "-o", "numactl", "--local-rank", "0"},
			} {
				want, wantErr, err1 := runErr(t, append(args, "--root", root)...)
				got, gotErr, err2 := runErr(t, append(args, "--root", bare, "--state-dir", dir)...)
				if got != want || gotErr != wantErr || (err1 == nil) != (err2 == nil) {
					t.Errorf("%s from the agent's state differs from discovery:\n%s%s%v\nwant\n%s%s%v",
						strings.Join(args, " "), got, gotErr, err2, want, wantErr, err1)
				}
			}
		})
	}
}

// Where the cache is not the truth it is passed over.
func TestCacheNotUsed(t *testing.T) {
	envCleanEnv(t)
	root := fakesystest.Root(t, "dgx-h100")
	dir := writeAgentState(t, root)
	bare := bareRoot(t, root)
	fromCache := mustRun(t, "env", "--local-rank", "3", "--root", bare, "--state-dir", dir)
	if !strings.Contains(fromCache, "GPUAFFINITY_NICS='mlx5_5'") {
		t.Fatalf("env from the cache:\n%s", fromCache)
	}
	// GPUAFFINITY_STATE_DIR names the directory too.
	t.Setenv("GPUAFFINITY_STATE_DIR", dir)
	if got := mustRun(t, "env", "--local-rank", "3", "--root", bare); got != fromCache {
		t.Errorf("GPUAFFINITY_STATE_DIR not used:\n%s", got)
	}
	os.Unsetenv("GPUAFFINITY_STATE_DIR")

	// Each of these discovers the bare root (and so finds no GPU).
	for _, args := range [][]string{
		{"--root", bare},                    // default state dir, not the live root
		{"--root", bare, "--state-dir", ""}, // none
		{"--root", bare, "--state-dir", dir, "--exclude-nics", "mlx5_5"},
		{"--root", bare, "--state-dir", dir, "--compute-nics", "mlx5_5"},
		{"--root", bare, "--state-dir", dir, "--topo-file", filepath.Join(dir, "nccl-topo.xml")},
	} {
		out, err := run(t, append([]string{"env", "--local-rank", "3"}, args...)...)
		if err == nil && out == fromCache {
			t.Errorf("env %s used the cache", strings.Join(args, " "))
		}
	}
	// --demo discovers the demo machine, cache or not.
	if out := mustRun(t, "env", "--local-rank", "3", "--demo", "dgx-h100", "--state-dir", dir); out != fromCache {
		t.Errorf("--demo dgx-h100 differs from the fixture:\n%s", out)
	}

	// A cache from before the boot, or torn, is passed over with a debug
	// line saying why.
	os.MkdirAll(filepath.Join(bare, "proc"), 0o755)
	future := time.Now().Add(time.Hour).Unix()
	os.WriteFile(filepath.Join(bare, "proc/stat"), []byte("btime "+strconv.FormatInt(future, 10)+"\n"), 0o644)
	r := execRun(t, nil, "env", "--local-rank", "3", "--root", bare, "--state-dir", dir, "--log-level", "debug")
	if r.code == 0 || !strings.Contains(r.stderr, "before the boot") {
		t.Errorf("stale cache: exit %d\n%s", r.code, r.stderr)
	}
	os.Remove(filepath.Join(bare, "proc/stat"))
	os.WriteFile(filepath.Join(dir, "topology.json"), []byte(`{"schema": "gpuaffinity.topology/v1", "gpus": [`), 0o644)
	// cpumap reads launch.node: torn there too.
	if b, err := os.ReadFile(filepath.Join(dir, cache.LaunchFile)); err == nil {
		os.WriteFile(filepath.Join(dir, cache.LaunchFile), b[:len(b)/2], 0o644)
	}
	r = execRun(t, nil, "cpumap", "--root", bare, "--state-dir", dir, "--log-level", "debug")
	if r.code == 0 || !strings.Contains(r.stderr, "agent's topology not used") || !strings.Contains(r.stderr, "decode") {
		t.Errorf("torn cache: exit %d\n%s", r.code, r.stderr)
	}
}
