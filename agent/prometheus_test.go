package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

// A real Prometheus scrapes the agent on the dgx-h100-faults fixture
// (GPU 2's NVLink 5 down, among other faults) and its query language
// counts the link: count(gpuaffinity_nvlink_up == 0) is 1.
func TestPrometheusScrapesAgent(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("prometheus missing under CI (Debian package prometheus; make test installs it)")
		}
		t.Skip("prometheus not installed (Debian package prometheus)")
	}
	r := startAgent(t, Options{Root: fakesystest.Root(t, "dgx-h100-faults")})

	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	yml := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: gpuaffinity\n    static_configs:\n      - targets: [%q]\n",
		r.a.Addrs()[0].String())
	if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var logs bytes.Buffer
	cmd := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})

	query := func(q string) (string, bool) {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return "", false
		}
		defer resp.Body.Close()
		var res struct {
			Status string
			Data   struct {
				Result []struct {
					Value [2]any `json:"value"`
				}
			}
		}
		if json.NewDecoder(resp.Body).Decode(&res) != nil || res.Status != "success" || len(res.Data.Result) != 1 {
			return "", false
		}
		v, _ := res.Data.Result[0].Value[1].(string)
		return v, true
	}
	deadline := time.Now().Add(25 * time.Second)
	for {
		if v, ok := query(`up{job="gpuaffinity"}`); ok && v == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus never saw up{job=\"gpuaffinity\"} == 1; its log:\n%s", logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for q, want := range map[string]string{
		"count(gpuaffinity_nvlink_up == 0)":       "1",
		`gpuaffinity_nvlink_up{gpu="2",link="5"}`: "0",
		"gpuaffinity_discovery_success":           "1",
		"gpuaffinity_health_healthy":              "0",
	} {
		if got, ok := query(q); got != want {
			t.Errorf("%s = %q (result found: %t), want %s", q, got, ok, want)
		}
	}
}

// freeAddr returns a 127.0.0.1 address with a port free at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
