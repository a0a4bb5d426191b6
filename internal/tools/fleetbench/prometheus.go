package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is a Prometheus serving a dataset's TSDB, scraping nothing.
type server struct {
	url    string
	dir    string // its storage: links to the cache entry's blocks
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}
	client *http.Client
}

// startPrometheus runs prometheus on a writable copy (hard links) of d's
// blocks, made beside the cache entry, and waits until it is ready.
func startPrometheus(ctx context.Context, bin string, d *dataset) (*server, error) {
	dir, err := os.MkdirTemp(filepath.Dir(d.Dir), ".run-")
	if err != nil {
		return nil, fmt.Errorf("prometheus storage: %w", err)
	}
	s := &server{dir: dir, exited: make(chan struct{}), client: &http.Client{}}
	fail := func(err error) (*server, error) {
		s.stop()
		return nil, err
	}
	if err := linkTree(filepath.Join(d.Dir, "data"), filepath.Join(dir, "data")); err != nil {
		return fail(fmt.Errorf("prometheus storage %s: %w", dir, err))
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("scrape_configs: []\n"), 0o644); err != nil {
		return fail(fmt.Errorf("prometheus config: %w", err))
	}
	addr, err := freeAddr()
	if err != nil {
		return fail(err)
	}
	if s.log, err = os.Create(filepath.Join(dir, "prometheus.log")); err != nil {
		return fail(fmt.Errorf("prometheus log: %w", err))
	}
	s.url = "http://" + addr
	s.cmd = exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=100y", "--web.listen-address="+addr, "--log.level=warn")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return fail(fmt.Errorf("start %s: %w", bin, err))
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if resp, err := s.client.Get(s.url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return fail(fmt.Errorf("prometheus exited before it was ready: %s\n%s", s.cmd.ProcessState, s.logTail()))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("prometheus not ready within 5 minutes\n%s", s.logTail()))
		}
	}
}

// stop ends Prometheus (SIGTERM, SIGKILL after 30 s) and removes its
// storage.
func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	}
	if s.log != nil {
		s.log.Close()
	}
	os.RemoveAll(s.dir)
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "prometheus.log"))
	return tail(b, 2000)
}

// query runs an instant query as the fleet reader sends it (POST
// /api/v1/query, form values query and time), copies the answer's body
// to w and returns its size and the time from sending to its last byte.
func (s *server) query(ctx context.Context, q, at string, w io.Writer) (int64, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/api/v1/query",
		strings.NewReader(url.Values{"query": {q}, "time": {at}}.Encode()))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("prometheus %s: query %s: %w", s.url, q, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return 0, 0, fmt.Errorf("prometheus %s: query %s: %s: %s", s.url, q, resp.Status, head)
	}
	n, err := io.Copy(w, resp.Body)
	took := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("prometheus %s: query %s: %w", s.url, q, err)
	}
	return n, took, nil
}

// scalar runs q at t and returns the value of its one sample (0 for an
// empty result).
func (s *server) scalar(ctx context.Context, q string, t time.Time) (float64, error) {
	var body bytes.Buffer
	if _, _, err := s.query(ctx, q, t.Format(time.RFC3339), &body); err != nil {
		return 0, err
	}
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body.Bytes(), &r); err != nil {
		return 0, fmt.Errorf("prometheus %s: query %s: %w", s.url, q, err)
	}
	switch len(r.Data.Result) {
	case 0:
		return 0, nil
	case 1:
		v, _ := r.Data.Result[0].Value[1].(string)
		return strconv.ParseFloat(v, 64)
	}
	return 0, fmt.Errorf("prometheus %s: query %s: %d samples, want one", s.url, q, len(r.Data.Result))
}

// version is the server's version (/api/v1/status/buildinfo).
func (s *server) version() string {
	resp, err := s.client.Get(s.url + "/api/v1/status/buildinfo")
	if err != nil {
		return "unknown"
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Version string `json:"version"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&r) != nil || r.Data.Version == "" {
		return "unknown"
	}
	return r.Data.Version
}

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
