package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runTimeout bounds one measured process run.
const runTimeout = 60 * time.Second

// sample is one measured process run.
type sample struct {
	Wall time.Duration // time.Now around exec.Cmd.Run
	CPU  time.Duration // the child's user+system time (rusage)
}

// job is one process to run and time: argv and its environment.
type job struct {
	Argv []string
	Env  []string
}

func (j job) command(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, j.Argv[0], j.Argv[1:]...)
	cmd.Env = j.Env
	// Killed with the driver, should it die without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

func (j job) String() string { return strings.Join(j.Argv, " ") }

// check runs j once with its output captured, and fails unless it exits
// 0 with some output on stdout; ok, when not nil, judges that output.
func (j job) check(ctx context.Context, ok func(stdout, stderr []byte) error) error {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := j.command(ctx)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", j, err, tail(stderr.Bytes(), 2000))
	}
	if stdout.Len() == 0 {
		return fmt.Errorf("%s: no output\n%s", j, tail(stderr.Bytes(), 2000))
	}
	if ok != nil {
		if err := ok(stdout.Bytes(), stderr.Bytes()); err != nil {
			return fmt.Errorf("%s: %w", j, err)
		}
	}
	return nil
}

// run runs j once with stdout and stderr on devNull and times it.
func (j job) run(ctx context.Context, devNull *os.File) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	cmd := j.command(ctx)
	cmd.Stdout, cmd.Stderr = devNull, devNull
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", j, err)
	}
	s := sample{Wall: wall}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		s.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return s, nil
}

// interleave runs warm pairs of (a, b) unmeasured, then n measured
// pairs, a before b each time. b may be nil (a figure without a peer,
// or with the peer missing): then only a runs.
func interleave(ctx context.Context, warm, n int, a, b func() (sample, error)) (as, bs []sample, err error) {
	for i := 0; i < warm+n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		sa, err := a()
		if err != nil {
			return nil, nil, err
		}
		var sb sample
		if b != nil {
			if sb, err = b(); err != nil {
				return nil, nil, errPeer{err}
			}
		}
		if i < warm {
			continue
		}
		as = append(as, sa)
		if b != nil {
			bs = append(bs, sb)
		}
	}
	return as, bs, nil
}

// errPeer marks a failure of the peer (not of gpuaffinity).
type errPeer struct{ err error }

func (e errPeer) Error() string { return "peer: " + e.err.Error() }
func (e errPeer) Unwrap() error { return e.err }

func walls(ss []sample) []float64 {
	ds := make([]time.Duration, len(ss))
	for i, s := range ss {
		ds[i] = s.Wall
	}
	return msOf(ds)
}

func cpus(ss []sample) []float64 {
	ds := make([]time.Duration, len(ss))
	for i, s := range ss {
		ds[i] = s.CPU
	}
	return msOf(ds)
}

// freeAddr returns 127.0.0.1:PORT for a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// server is a long-running child (the agent, node_exporter).
type server struct {
	name string
	cmd  *exec.Cmd
	addr string
	log  *tailBuffer
	done chan struct{} // closed when the process has exited
	err  error         // Wait's error, once done is closed
}

// startServer starts j, whose HTTP listener is addr. The process gets
// SIGTERM when ctx ends (SIGKILL 5 s later).
func startServer(ctx context.Context, name string, j job, addr string) (*server, error) {
	cmd := j.command(ctx)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	s := &server{name: name, cmd: cmd, addr: addr, log: &tailBuffer{max: 8 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// waitReady polls until url answers 200 and every file in files exists,
// or the process exits, or ctx or 60 s end.
func (s *server) waitReady(ctx context.Context, client *http.Client, url string, files ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		ready := true
		for _, f := range files {
			if _, err := os.Stat(f); err != nil {
				ready = false
			}
		}
		if ready && url != "" {
			ready = get(ctx, client, url) == nil
		}
		if ready {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("%s exited before it was ready (%v):\n%s", s.name, s.err, s.log)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w\n%s", s.name, ctx.Err(), s.log)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits up to 10 s, then kills. It returns an
// error when the process did not exit cleanly on SIGTERM.
func (s *server) stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if s.err != nil {
			return fmt.Errorf("%s on SIGTERM: %v\n%s", s.name, s.err, s.log)
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("%s did not exit within 10 s of SIGTERM; killed", s.name)
	}
}

// rssMiB reads VmRSS of the server process from /proc/PID/status.
func (s *server) rssMiB() (float64, error) { return s.statusMiB("VmRSS") }

// anonMiB reads RssAnon of the server process: its resident anonymous
// memory (Go heap, stacks, runtime metadata, libc's), without the file
// pages of its binary and libraries that VmRSS also counts.
func (s *server) anonMiB() (float64, error) { return s.statusMiB("RssAnon") }

// statusMiB reads the kB field key of /proc/PID/status in MiB.
func (s *server) statusMiB(key string) (float64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(s.cmd.Process.Pid), "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", key, v, err)
			}
			return float64(kb) / 1024, nil
		}
	}
	return 0, fmt.Errorf("%s: no %s in /proc/%d/status", s.name, key, s.cmd.Process.Pid)
}

// newClient is the scrape client: no compression (the body is read as
// served), one kept-alive connection per server, a 30 s limit a GET.
func newClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DisableCompression:  true,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     time.Minute,
		},
	}
}

// get GETs url and reads the whole body; it fails unless 200 and a
// non-empty body.
func get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || n == 0 {
		return fmt.Errorf("GET %s: %s, %d bytes", url, resp.Status, n)
	}
	return nil
}

// timedGet times one get as a sample (CPU unknown: zero).
func timedGet(ctx context.Context, client *http.Client, url string) (sample, error) {
	start := time.Now()
	if err := get(ctx, client, url); err != nil {
		return sample{}, err
	}
	return sample{Wall: time.Since(start)}, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// findPeer looks each name up on PATH, then in /usr/sbin and /usr/bin;
// "" when none is found.
func findPeer(names ...string) string {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	return ""
}

// peerVersion is the first line a binary prints for --version.
func peerVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

var errNoPeer = errors.New("peer not installed")
