package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// benchBinary builds gpuaffinity (without -race: what users run), with
// the build tags given, into a temporary directory of tb.
func benchBinary(tb testing.TB, tags ...string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "gpuaffinity")
	out, err := exec.Command("go", "build", "-trimpath", "-tags", strings.Join(tags, ","), "-o", bin, ".").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// vmRSS reads VmRSS of a process, in MB.
func vmRSS(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				tb.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	tb.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// scrapeRSS scrapes url 1,000 times (or b.N, when more) in the
// benchmark loop and reports the process's resident memory after them.
func scrapeRSS(b *testing.B, pid int, url string) {
	client := &http.Client{Timeout: 30 * time.Second}
	scrape := func() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n == 0 {
			b.Fatalf("GET %s: %s, %d bytes", url, resp.Status, n)
		}
	}
	scrape()
	done := 0
	for b.Loop() {
		scrape()
		done++
	}
	for ; done < 1000; done++ {
		scrape()
	}
	b.ReportMetric(vmRSS(b, pid), "rss-MB")
}

// BenchmarkAgentRSS runs the agent binary (gpuaffinity-agent, the
// agent_only build, as make build makes it) on the DGX H100 fixture and
// reports the time per /metrics scrape and the agent's VmRSS after at
// least 1,000 scrapes; then the same for node_exporter with only its
// infiniband collector, on the same fixture (skipped when not
// installed). Target: agent RSS under 30 MB.
func BenchmarkAgentRSS(b *testing.B) {
	root := fakesystest.Root(b, "dgx-h100")
	bin := benchBinary(b, "agent_only")
	b.Run("agent-dgx-h100", func(b *testing.B) {
		cmd := exec.Command(bin, "agent", "--root", root, "--state-dir", b.TempDir(), "--rescan", "0",
			"--web.listen-address", "127.0.0.1:0", "--log-level", "info")
		addr := startLogged(b, cmd, `msg="Listening on" address=`)
		waitHTTP(b, "http://"+addr+"/topology")
		scrapeRSS(b, cmd.Process.Pid, "http://"+addr+"/metrics")
	})
	b.Run("node_exporter-infiniband-dgx-h100", func(b *testing.B) {
		ne, err := exec.LookPath("prometheus-node-exporter")
		if err != nil {
			b.Skip("prometheus-node-exporter not installed")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cmd := exec.Command(ne, "--path.sysfs="+filepath.Join(root, "sys"), "--path.procfs="+filepath.Join(root, "proc"),
			"--collector.disable-defaults", "--collector.infiniband", "--web.listen-address="+addr)
		startLogged(b, cmd, "")
		waitHTTP(b, "http://"+addr+"/metrics")
		scrapeRSS(b, cmd.Process.Pid, "http://"+addr+"/metrics")
	})
}

// startLogged starts cmd with its stderr scanned; with a marker it
// returns the rest of the first line after it (up to a space). The
// process is killed at cleanup.
func startLogged(b *testing.B, cmd *exec.Cmd, marker string) string {
	b.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if marker == "" {
				continue
			}
			if _, rest, ok := strings.Cut(sc.Text(), marker); ok {
				v, _, _ := strings.Cut(rest, " ")
				select {
				case found <- v:
				default:
				}
			}
		}
	}()
	if marker == "" {
		return ""
	}
	select {
	case v := <-found:
		return v
	case <-time.After(30 * time.Second):
		b.Fatalf("%s: no %q on stderr within 30 s", cmd.Path, marker)
	}
	return ""
}

// waitHTTP waits until url answers 200.
func waitHTTP(b *testing.B, url string) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("%s did not answer 200 within 30 s", url)
}

// BenchmarkEnvProcess is the wall time of one `gpuaffinity env` process
// (fork, exec, run, exit), as a launcher pays it per rank: with the
// node from the agent's topology.json on the live root (btime checked
// against /proc/stat), with it from a named state directory, and with a
// discovery of the DGX H100 fixture instead. Target from the cache:
// under 3 ms.
func BenchmarkEnvProcess(b *testing.B) {
	root := fakesystest.Root(b, "dgx-h100")
	bin := benchBinary(b)
	dir := writeAgentState(b, root)
	env := append(execCleanEnv(), "GPUAFFINITY_STATE_DIR=")
	for _, bc := range []struct {
		name string
		args []string
		env  []string
	}{
		{"cache-live-root", []string{"env", "--local-rank", "3"}, []string{"GPUAFFINITY_STATE_DIR=" + dir}},
		{"cache-state-dir", []string{"env", "--local-rank", "3", "--root", root, "--state-dir", dir}, nil},
		{"discover-dgx-h100", []string{"env", "--local-rank", "3", "--root", root}, nil},
		// The floor: a process that only prints the version.
		{"version", []string{"version"}, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				cmd := exec.Command(bin, bc.args...)
				cmd.Env = append(env, bc.env...)
				out, err := cmd.Output()
				if err != nil || (bc.name != "version" && !strings.Contains(string(out), "GPUAFFINITY_GPU='3'")) {
					b.Fatalf("%v: %s", err, out)
				}
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/process")
			// CPU time is what the process itself costs, less sensitive
			// than wall time to other load on the machine.
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms/process")
		})
	}
}

// BenchmarkEnvInProcess is `env` run in-process (no process start, no
// package initialisation): from the agent's topology.json, and
// discovering the DGX H100 fixture.
func BenchmarkEnvInProcess(b *testing.B) {
	root := fakesystest.Root(b, "dgx-h100")
	dir := writeAgentState(b, root)
	for _, bc := range []struct {
		name string
		args []string
	}{
		{"cache", []string{"env", "--local-rank", "3", "--root", root, "--state-dir", dir}},
		{"discover-dgx-h100", []string{"env", "--local-rank", "3", "--root", root, "--state-dir", ""}},
	} {
		benchCommand(b, bc.name, bc.args)
	}
}
