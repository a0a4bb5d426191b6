// Package promtest runs a real Prometheus server for tests: it scrapes
// the given targets every second into a TSDB on tmpfs and answers queries
// through its HTTP API (https://prometheus.io/docs/prometheus/latest/querying/api/).
// The binary is the Debian package prometheus's /usr/bin/prometheus (make
// deps installs it). Only _test.go files import this package.
package promtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

// Interval is the scrape interval (and timeout) of every target.
const Interval = time.Second

// Binary returns the path of the prometheus binary. Without one the test
// fails under CI (testenv.InCI) and is skipped elsewhere, naming the
// Debian package.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("prometheus missing under CI (Debian package prometheus; make deps installs it)")
		}
		t.Skip("prometheus not installed (Debian package prometheus)")
	}
	return p
}

// Server is a Prometheus process started by Start.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL     string
	job     string
	targets []string
	logs    *SyncBuffer
	client  *http.Client
}

// Start runs Prometheus with one scrape job, job, over the static targets
// (host:port, scraped over http at /metrics every Interval), and waits
// until it answers /-/ready. t.Cleanup stops it (SIGTERM, then SIGKILL
// after 10 s) and removes its storage.
func Start(t testing.TB, job string, targets ...string) *Server {
	t.Helper()
	ts := make([]Target, len(targets))
	for i, a := range targets {
		ts[i] = Target{Addr: a}
	}
	return StartTargets(t, job, ts...)
}

// Target is a scrape target and the labels Prometheus attaches to it
// (a static_configs entry's labels, as a file_sd file or a relabelling
// gives them): target labels, on every series of the target and on its
// up series.
type Target struct {
	Addr   string
	Labels map[string]string
}

// StartTargets is Start with labelled targets: one static_configs entry
// per target.
func StartTargets(t testing.TB, job string, targets ...Target) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n  - job_name: %q\n    static_configs:\n",
		Interval, Interval, job)
	addrs := make([]string, len(targets))
	for i, tg := range targets {
		addrs[i] = tg.Addr
		fmt.Fprintf(&b, "      - targets: [%s]\n", strconv.Quote(tg.Addr))
		if len(tg.Labels) > 0 {
			b.WriteString("        labels:\n")
			keys := make([]string, 0, len(tg.Labels))
			for k := range tg.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&b, "          %s: %s\n", k, strconv.Quote(tg.Labels[k]))
			}
		}
	}
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	targetAddrs := addrs
	data := storageDir(t)
	addr := FreeAddr(t)
	s := &Server{URL: "http://" + addr, job: job, targets: targetAddrs, logs: &SyncBuffer{},
		client: &http.Client{Timeout: 10 * time.Second}}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+data,
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := s.client.Get(s.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited before it was ready; its log:\n%s", s.Logs())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30 s; its log:\n%s", s.Logs())
		}
	}
}

// storageDir is a fresh directory under /dev/shm (tmpfs), else under
// t.TempDir.
func storageDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "promtest-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return filepath.Join(t.TempDir(), "data")
}

// Logs returns what Prometheus wrote on stdout and stderr so far.
func (s *Server) Logs() string { return s.logs.String() }

// WaitScrapes waits until every target of the job is up and has been
// scraped successfully at least n times, or fails the test after
// timeout. Prometheus applies the configured targets up to 5 s after it
// starts (its scrape manager reloads targets on a 5 s ticker), so start
// it before the targets are ready rather than after: failed scrapes of a
// target not yet listening do not count.
func (s *Server) WaitScrapes(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	sel := fmt.Sprintf("up{job=%q}", s.job)
	deadline := time.Now().Add(timeout)
	for {
		up, errUp := s.Query(fmt.Sprintf("count(%s == 1)", sel))
		scrapes, errN := s.Query(fmt.Sprintf("min(sum_over_time(%s[1h]))", sel))
		if errUp == nil && errN == nil && len(up) == 1 && len(scrapes) == 1 &&
			up[0].Value == float64(len(s.targets)) && scrapes[0].Value >= float64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %s, not all %d targets of job %s were up and scraped %d times (up: %v %v; scrapes: %v %v); Prometheus's log:\n%s",
				timeout, len(s.targets), s.job, n, up, errUp, scrapes, errN, s.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Sample is one element of an instant vector.
type Sample struct {
	Metric map[string]string
	Value  float64
}

// apiResponse is the envelope of every answer of the HTTP API.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
}

// Query evaluates expr as an instant query at the server's present time
// (/api/v1/query). It fails unless the status is success without
// warnings and the result is an instant vector (so a scalar expression,
// which always "has data", is refused).
func (s *Server) Query(expr string) ([]Sample, error) {
	return s.QueryAt(expr, time.Time{})
}

// QueryAt is Query evaluated at the time at (now when zero): queries
// evaluated at one time see the same samples however long they take to
// run.
func (s *Server) QueryAt(expr string, at time.Time) ([]Sample, error) {
	q := url.Values{"query": {expr}}
	if !at.IsZero() {
		q.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	data, err := s.get("/api/v1/query", q)
	if err != nil {
		return nil, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := decodeStrict(data, &d); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	if d.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %q, want vector", expr, d.ResultType)
	}
	var vec []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := decodeStrict(d.Result, &vec); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	out := make([]Sample, 0, len(vec))
	for _, r := range vec {
		vs, ok := r.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("query %s: sample value %v is not a string", expr, r.Value[1])
		}
		v, err := strconv.ParseFloat(vs, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: sample value: %w", expr, err)
		}
		out = append(out, Sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// LabelValues returns the values of label over the series matching the
// selectors (/api/v1/label/<label>/values with match[]; none: all series).
func (s *Server) LabelValues(label string, match ...string) ([]string, error) {
	data, err := s.get("/api/v1/label/"+url.PathEscape(label)+"/values", url.Values{"match[]": match})
	if err != nil {
		return nil, err
	}
	var vals []string
	if err := decodeStrict(data, &vals); err != nil {
		return nil, fmt.Errorf("label values of %s: %w", label, err)
	}
	return vals, nil
}

// get calls an API endpoint and returns the data of a successful answer.
func (s *Server) get(path string, q url.Values) (json.RawMessage, error) {
	resp, err := s.client.Get(s.URL + path + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var r apiResponse
	if err := decodeStrict(b, &r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s %v: status %q: %s: %s", path, q, r.Status, r.ErrorType, r.Error)
	}
	if len(r.Warnings) > 0 {
		return nil, fmt.Errorf("%s %v: warnings %q", path, q, r.Warnings)
	}
	return r.Data, nil
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// FreeAddr returns a 127.0.0.1 address whose port was free a moment ago,
// and never one it returned before in this process, so that the
// addresses of one test differ even where the kernel hands a port out
// again at once.
func FreeAddr(t testing.TB) string {
	t.Helper()
	given.Lock()
	defer given.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if !given.addrs[addr] {
			given.addrs[addr] = true
			return addr
		}
	}
	t.Fatal("promtest: no new free port in 100 tries")
	return ""
}

// given is the addresses FreeAddr returned.
var given = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// SyncBuffer is a bytes.Buffer that a process's output copier and the
// test may use at once (a process's Stdout or Stderr).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
