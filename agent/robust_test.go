package agent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func bufLogger(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// blockingInit is an NVML whose Init blocks until release is closed (then
// fails as without a driver); entered is closed at the first Init.
func blockingInit() (lib *mock.Interface, entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	lib = &mock.Interface{InitFunc: func() gonvml.Return {
		once.Do(func() { close(entered) })
		<-release
		return gonvml.ERROR_LIBRARY_NOT_FOUND
	}}
	return lib, entered, release
}

// A panic in discovery (here NVML's Init, as a hostile nvml.json made the
// replay panic) is the round's error: /health says so (/readyz stays ready), the metric is 0,
// the log has it (and the stack at debug), the agent keeps serving and
// answers SIGHUP, and the next round recovers.
func TestDiscoveryPanic(t *testing.T) {
	var panics atomic.Int32
	panics.Store(1)
	lib := &mock.Interface{InitFunc: func() gonvml.Return {
		if panics.Add(-1) >= 0 {
			panic("boom")
		}
		return gonvml.ERROR_LIBRARY_NOT_FOUND
	}}
	var logs syncBuffer
	r := startAgent(t, Options{Root: fakesystest.Root(t, "dgx-h100"), NVML: lib, Logger: bufLogger(&logs)})

	if code, body := r.get(t, "/health"); code != 503 || body != "not ready: discovery failed: panic: boom\n" {
		t.Errorf("/health after a panic in discovery = %d %q", code, body)
	}
	if code, body := r.get(t, "/readyz"); code != 200 || body != "ready: serving; node discovery failed (see /health)\n" {
		t.Errorf("/readyz after a panic in discovery = %d %q", code, body)
	}
	if code, _ := r.get(t, "/healthz"); code != 200 {
		t.Errorf("/healthz after a panic in discovery = %d", code)
	}
	if _, m := r.get(t, "/metrics"); !strings.Contains(m, "\ngpuaffinity_discovery_success 0\n") {
		t.Errorf("/metrics after a panic lacks discovery_success 0:\n%s", grepLines(m, "gpuaffinity_discovery_"))
	}
	l := logs.String()
	if !strings.Contains(l, `msg="discovery failed"`) || !strings.Contains(l, `err="panic: boom"`) ||
		!strings.Contains(l, `msg="panic in discovery"`) || !strings.Contains(l, "stack=") {
		t.Errorf("log after a panic in discovery:\n%s", l)
	}

	// The next round (SIGHUP) recovers: NVML missing, discovery from sysfs.
	r.rescanAndWait(t)
	st := r.a.State()
	if !st.Discovery.OK || st.Node == nil || len(st.Node.GPUs) != 8 {
		t.Fatalf("after a good round: OK %t err %q", st.Discovery.OK, st.Discovery.Err)
	}
	if code, body := r.get(t, "/health"); strings.Contains(body, "discovery failed") {
		t.Errorf("/health after a good round = %d %q", code, body)
	}
	if code, _ := r.get(t, "/topology"); code != 200 {
		t.Errorf("/topology after a good round = %d", code)
	}

	// A panic on a rescan keeps the last good node and says so.
	panics.Store(1)
	r.rescanAndWait(t)
	if st2 := r.a.State(); st2.Discovery.OK || st2.Discovery.Err != "panic: boom" || st2.Node != st.Node {
		t.Errorf("after a panicking rescan: OK %t err %q same node %t", st2.Discovery.OK, st2.Discovery.Err, st2.Node == st.Node)
	}
	if code, _ := r.get(t, "/topology"); code != 200 {
		t.Errorf("/topology after a panicking rescan = %d", code)
	}

	start := time.Now()
	if err := r.stop(t); err != nil {
		t.Errorf("Run after panics: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %s", d)
	}
}

// A round stuck in a blocking read (here NVML's Init) is reported after
// Options.DiscoveryTimeout, no second round piles up behind it, and the
// agent still stops within its shutdown timeout; the stuck goroutine ends
// when the read returns.
func TestDiscoveryTimeoutAndStopWhileStuck(t *testing.T) {
	lib, entered, release := blockingInit()
	var logs syncBuffer
	r := startAgent(t, Options{Root: fakesystest.Root(t, "dgx-h100"), NVML: lib, Logger: bufLogger(&logs),
		DiscoveryTimeout: 200 * time.Millisecond, ShutdownTimeout: 2 * time.Second})
	<-entered

	if code, body := r.get(t, "/health"); code != 503 || body != "not ready: discovery failed: discovery timed out after 200ms\n" {
		t.Errorf("/health with discovery stuck = %d %q", code, body)
	}
	if code, _ := r.get(t, "/healthz"); code != 200 {
		t.Errorf("/healthz with discovery stuck = %d", code)
	}
	if _, m := r.get(t, "/metrics"); !strings.Contains(m, "\ngpuaffinity_discovery_success 0\n") {
		t.Errorf("/metrics with discovery stuck lacks discovery_success 0:\n%s", grepLines(m, "gpuaffinity_discovery_"))
	}
	if l := logs.String(); !strings.Contains(l, `err="discovery timed out after 200ms"`) {
		t.Errorf("log with discovery stuck:\n%s", l)
	}

	// SIGHUP is answered at once, without a second round behind the stuck one.
	r.rescanAndWait(t)
	if st := r.a.State(); st.Discovery.OK || !strings.HasPrefix(st.Discovery.Err, "discovery blocked: the round started at ") {
		t.Errorf("rescan with a round stuck: OK %t err %q", st.Discovery.OK, st.Discovery.Err)
	}
	if r.a.alive(time.Second) {
		// The watchdog stops pinging a round stuck past its limit.
		time.Sleep(time.Second)
		if r.a.alive(time.Second) {
			t.Error("watchdog test alive with a round stuck for over 1 s")
		}
	}

	start := time.Now()
	if err := r.stop(t); err != nil {
		t.Errorf("Run with a stuck round: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop with a round stuck took %s", d)
	}
	if resp, err := r.client.Get(r.url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("/healthz still answers after Run returned: %s", resp.Status)
	}

	// The abandoned round ends when its read returns.
	close(release)
	select {
	case <-r.a.busy:
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned round did not end after its read returned")
	}
}

// SIGTERM during the first round, stuck: Run returns within the shutdown
// timeout although the round has not.
func TestStopDuringStuckFirstRound(t *testing.T) {
	lib, entered, release := blockingInit()
	var unblock sync.Once
	defer unblock.Do(func() { close(release) })
	a, err := New(Options{Root: fakesystest.Root(t, "dgx-h100"), NVML: lib, ListenAddresses: []string{"127.0.0.1:0"},
		Logger: testLogger(t), ShutdownTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("discovery did not start")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5 s of the cancel with discovery stuck")
	}
	t.Logf("stopped in %s", time.Since(start))
	if st := a.State(); st.Node != nil || !st.Discovery.Last.IsZero() {
		t.Errorf("an abandoned round published: %+v", st.Discovery)
	}
	unblock.Do(func() { close(release) })
	select {
	case <-a.busy:
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned round did not end after its read returned")
	}
	if st := a.State(); st.Node != nil || !st.Discovery.Last.IsZero() {
		t.Errorf("the abandoned round published after the stop: %+v", st.Discovery)
	}
}

// An NVML Init that hangs holds up neither scrapes (current) nor the
// agent's exit (close); what it initialises after close is shut down.
func TestNVMLHoldInitHangs(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var shutdowns atomic.Int32
	lib := &mock.Interface{
		InitFunc:     func() gonvml.Return { close(entered); <-release; return gonvml.SUCCESS },
		ShutdownFunc: func() gonvml.Return { shutdowns.Add(1); return gonvml.SUCCESS },
	}
	h := newNVMLHold(t.TempDir(), lib, slog.New(slog.DiscardHandler))
	refreshed := make(chan struct{})
	go func() { defer close(refreshed); h.refresh() }()
	<-entered
	quick := make(chan struct{})
	go func() {
		defer close(quick)
		if h.current() != nil {
			t.Error("current during a hung Init is not nil")
		}
		h.close()
	}()
	select {
	case <-quick:
	case <-time.After(5 * time.Second):
		t.Fatal("current/close wait for a hung Init")
	}
	close(release)
	<-refreshed
	if n := shutdowns.Load(); n != 1 {
		t.Errorf("an Init that returned after close: %d Shutdowns, want 1", n)
	}
	if h.current() != nil {
		t.Error("current after close is not nil")
	}
}
