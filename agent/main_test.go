package agent

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// writerEnv makes the test binary a state-file writer (TestStateFilesSurviveKill).
const writerEnv = "GPUAFFINITY_TEST_STATE_WRITER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(writerEnv); dir != "" {
		stateWriter(dir, os.Getenv(writerEnv+"_NODE"))
		return
	}
	os.Exit(m.Run())
}

// stateWriter does what the agent does with its state directory: removes
// stale temporary files at start, then writes the state files, over and
// over, each round with distinct megabytes of content, until killed. The
// node comes from nodeFile (topology JSON), to start fast.
func stateWriter(dir, nodeFile string) {
	if err := cleanStateDir(dir, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	b, err := os.ReadFile(nodeFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var n topology.Node
	if err := json.Unmarshal(b, &n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	pad := strings.Repeat("0123456789abcdef", 1<<18) // 4 MiB
	for i := 0; ; i++ {
		n.Hostname = fmt.Sprintf("writer-%d", i)
		n.Warnings = []string{fmt.Sprintf("%d:%s", i, pad[:(i%8+1)<<19])}
		if _, _, err := writeState(dir, n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		if i == 0 {
			fmt.Println("writing")
		}
	}
}

// notifySocket listens on a unixgram socket set as NOTIFY_SOCKET and
// collects what is sent to it.
type notifySocket struct {
	conn *net.UnixConn
	msgs chan string
	done chan struct{}
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", path)
	s := &notifySocket{conn: conn, msgs: make(chan string, 1000), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			s.msgs <- string(buf[:n])
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *notifySocket) close() {
	s.conn.Close()
	<-s.done
}

// expect waits for a message containing want and returns it.
func (s *notifySocket) expect(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-s.msgs:
			if strings.Contains(m, want) {
				return m
			}
		case <-timeout:
			t.Fatalf("no %q from the agent on NOTIFY_SOCKET", want)
		}
	}
}

// running is an agent started by startAgent.
type running struct {
	a      *Agent
	url    string
	cancel context.CancelFunc
	done   chan error
	client *http.Client
}

// startAgent starts an agent on 127.0.0.1 (a free port) and waits for
// its first round. t.Cleanup stops it.
func startAgent(t *testing.T, opts Options) *running {
	t.Helper()
	if opts.ListenAddresses == nil {
		opts.ListenAddresses = []string{"127.0.0.1:0"}
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{a: a, url: "http://" + a.Addrs()[0].String(), cancel: cancel, done: make(chan error, 1),
		client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{}}}}
	go func() { r.done <- a.Run(ctx) }()
	select {
	case <-a.Ready():
	case err := <-r.done:
		t.Fatalf("agent stopped before its first round: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("no first round within 60 s")
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the agent and waits for Run; it returns Run's error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
			return err
		}
		return nil
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not stop within 30 s")
	}
	return nil
}

// get fetches path and returns the status and body.
func (r *running) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := r.client.Get(r.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// rescanAndWait asks for a round and waits until it has been published.
func (r *running) rescanAndWait(t *testing.T) {
	t.Helper()
	before := r.a.State().Discovery.Last
	r.a.Rescan()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r.a.State().Discovery.Last.After(before) {
			// The round publishes discovery last; wait for the lock holder.
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("rescan not done within 30 s")
}

// testLogger logs to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// settleGoroutines waits until at most n goroutines run and returns the
// count it ended at.
func settleGoroutines(n int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := runtime.NumGoroutine()
		if got <= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// editReplay rewrites ROOT/nvml.json through edit.
func editReplay(t *testing.T, root string, edit func(*nvml.ReplayFile)) {
	t.Helper()
	path := filepath.Join(root, nvml.ReplayFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f nvml.ReplayFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	edit(&f)
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// lines reads the non-empty lines of a file.
func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}
