package agent

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The DGX H100 fixture: 8 H100s with 18 NVLinks each, 8 compute
// InfiniBand NICs (one per GPU, behind the GPU's PCIe switch) plus
// storage and front-end NICs; its health gate passes.
func TestAgentServesAndWritesState(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	dir := filepath.Join(t.TempDir(), "state")
	nfd := filepath.Join(t.TempDir(), "gpuaffinity.features")
	sock := newNotifySocket(t)
	before := runtime.NumGoroutine()

	r := startAgent(t, Options{Root: root, StateDir: dir, NFDFile: nfd, Version: "test-1"})
	if m := sock.expect(t, "READY=1"); !strings.Contains(m, "STATUS=8 GPUs, 14 NICs; healthy") {
		t.Errorf("READY message %q", m)
	}

	// The files, each a complete document of this node.
	js, err := os.ReadFile(filepath.Join(dir, cache.TopologyFile))
	if err != nil {
		t.Fatal(err)
	}
	var n topology.Node
	if err := json.Unmarshal(js, &n); err != nil {
		t.Fatal(err)
	}
	if n.Schema != topology.Schema || len(n.GPUs) != 8 || n.Hostname != "dgx-h100-01" {
		t.Errorf("topology.json: schema %q, %d GPUs, host %q", n.Schema, len(n.GPUs), n.Hostname)
	}
	x, err := os.ReadFile(filepath.Join(dir, cache.NCCLTopoFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ XMLName xml.Name }
	if err := xml.Unmarshal(x, &doc); err != nil || doc.XMLName.Local != "system" || bytes.Count(x, []byte(`class="0x0302`)) != 8 {
		t.Errorf("nccl-topo.xml: %v, root <%s>\n%.200s", err, doc.XMLName.Local, x)
	}
	env := lines(t, filepath.Join(dir, cache.EnvFile))
	want := []string{
		"CUDA_DEVICE_ORDER=PCI_BUS_ID",
		"NCCL_SOCKET_IFNAME==enp4s0f0",
		"NCCL_IB_HCA==mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
		"NCCL_TOPO_FILE=" + filepath.Join(dir, cache.NCCLTopoFile),
	}
	if strings.Join(env, "\n") != strings.Join(want, "\n") {
		t.Errorf("env file:\n%s\nwant\n%s", strings.Join(env, "\n"), strings.Join(want, "\n"))
	}
	nfdLines := lines(t, nfd)
	if got := strings.Join(nfdLines[2:], "\n"); got != "gpuaffinity.io/healthy=true\ngpuaffinity.io/fabric=infiniband\ngpuaffinity.io/aligned=true" {
		t.Errorf("NFD file:\n%s", got)
	}
	// NFD's expiry directive first: the labels go nfdTTL after the last
	// write, so a dead agent does not leave healthy=true behind.
	exp, ok := strings.CutPrefix(nfdLines[0], "# +expiry-time=")
	if at, err := time.Parse(time.RFC3339, exp); !ok || err != nil || at.Before(time.Now().Add(nfdTTL-time.Minute)) || at.After(time.Now().Add(nfdTTL)) {
		t.Errorf("NFD file's first line %q: want # +expiry-time= about %s from now", nfdLines[0], nfdTTL)
	}
	// The refresh (every nfdRefresh, whatever --rescan) pushes it on.
	time.Sleep(1100 * time.Millisecond)
	r.a.refreshNFD()
	if again := lines(t, nfd); again[0] <= nfdLines[0] || strings.Join(again[2:], "\n") != strings.Join(nfdLines[2:], "\n") {
		t.Errorf("after refreshNFD: %q, before %q; want a later expiry and the same labels", again, nfdLines)
	}

	// Endpoints.
	for _, c := range []struct {
		path, want string
		code       int
	}{
		{"/healthz", "ok\n", 200},
		{"/health", "ok: healthy (profile pretrain", 200},
		{"/readyz", "ready: serving; node healthy\n", 200},
		{"/", "test-1", 200},
		{"/metrics", "", 200},
		{"/nosuch", "404", 404},
	} {
		code, body := r.get(t, c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s = %d %.200q, want %d with %q", c.path, code, body, c.code, c.want)
		}
	}
	if code, body := r.get(t, "/topology"); code != 200 || body != string(js) {
		t.Errorf("GET /topology = %d, body equal to topology.json: %t", code, body == string(js))
	}

	st := r.a.State()
	if st.Node == nil || !st.Discovery.OK || st.Health == nil || !st.Health.Healthy || !st.StateWriteOK ||
		st.Discovery.LastSuccess != st.Discovery.Last || st.ExpectedNVLinks != nil {
		t.Errorf("state: %+v", st.Discovery)
	}
	// The gate never audits the running jobs (check --jobs does).
	if st.Health != nil {
		var jobs *health.Result
		for i, res := range st.Health.Results {
			if res.ID == "jobs.aligned" {
				jobs = &st.Health.Results[i]
			}
		}
		if jobs == nil || jobs.Verdict != health.Skip {
			t.Errorf("the gate's jobs.aligned: %+v, want skip", jobs)
		}
	}

	// SIGHUP's path: RELOADING=1, a round, READY=1 again.
	r.rescanAndWait(t)
	sock.expect(t, "RELOADING=1")
	sock.expect(t, "READY=1")

	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	sock.expect(t, "STOPPING=1")
	if _, err := r.client.Get(r.url + "/healthz"); err == nil {
		t.Error("still serving after Run returned")
	}
	if got := settleGoroutines(before); got > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after stop, %d before:\n%s", got, before, buf[:runtime.Stack(buf, true)])
	}
}

// Before the first round the agent is alive but not ready.
func TestReadyBeforeDiscovery(t *testing.T) {
	a, err := New(Options{Root: t.TempDir(), ListenAddresses: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for path, want := range map[string]struct {
		code int
		body string
	}{
		"/healthz":  {200, "ok\n"},
		"/readyz":   {503, "not ready: no discovery yet\n"},
		"/health":   {503, "not ready: no discovery yet\n"},
		"/topology": {503, "no topology yet\n"},
	} {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want.code || rec.Body.String() != want.body {
			t.Errorf("%s = %d %q, want %d %q", path, rec.Code, rec.Body, want.code, want.body)
		}
	}
}

// A rescan that fails keeps the last good node and says so; the next
// good one replaces it. A rescan re-reads nvml.json: a link taken down
// between rescans fails the gate.
func TestRescanFailureAndReplayChange(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	r := startAgent(t, Options{Root: root, StateDir: t.TempDir()})
	first := r.a.State()

	// No sys/ under the root: discovery fails.
	if err := os.Rename(filepath.Join(root, "sys"), filepath.Join(root, "sys.away")); err != nil {
		t.Fatal(err)
	}
	r.rescanAndWait(t)
	st := r.a.State()
	if st.Discovery.OK || st.Discovery.Err == "" || st.Node != first.Node ||
		!st.Discovery.LastSuccess.Equal(first.Discovery.LastSuccess) || !st.Discovery.Last.After(first.Discovery.Last) {
		t.Errorf("after a failed rescan: OK %t, err %q, same node %t, last success %v (was %v)",
			st.Discovery.OK, st.Discovery.Err, st.Node == first.Node, st.Discovery.LastSuccess, first.Discovery.LastSuccess)
	}
	if code, _ := r.get(t, "/topology"); code != 200 {
		t.Errorf("/topology after a failed rescan: %d", code)
	}
	if _, m := r.get(t, "/metrics"); !strings.Contains(m, "\ngpuaffinity_discovery_success 0\n") ||
		!strings.Contains(m, "\ngpuaffinity_topology_aligned 1\n") {
		t.Errorf("/metrics after a failed rescan lacks discovery_success 0 or the last node's topology:\n%s", grepLines(m, "gpuaffinity_discovery_", "gpuaffinity_topology_aligned"))
	}
	if code, body := r.get(t, "/health"); code != 200 {
		t.Errorf("/health after a failed rescan (last gate passed): %d %s", code, body)
	}

	// Back, with GPU 2's link 5 down in nvml.json.
	if err := os.Rename(filepath.Join(root, "sys.away"), filepath.Join(root, "sys")); err != nil {
		t.Fatal(err)
	}
	editReplay(t, root, func(f *nvml.ReplayFile) { f.Devices[2].NVLinks[5].State.Value = 0 })
	r.rescanAndWait(t)
	st = r.a.State()
	if !st.Discovery.OK || st.Node == first.Node || st.Node.GPUs[2].NVLinks[5].Active {
		t.Fatalf("after the good rescan: OK %t, err %q", st.Discovery.OK, st.Discovery.Err)
	}
	code, body := r.get(t, "/health")
	if code != 503 || !strings.HasPrefix(body, "unhealthy: nvlink.active: GPU 2 ") || !strings.Contains(body, "17 of 18 NVLinks active") {
		t.Errorf("/health with a link down = %d %q", code, body)
	}
	// Readiness is serving, not health: the unhealthy node's agent stays
	// ready (a rollout finishes, the Service keeps its metrics), and the
	// verdict is in the metrics.
	if code, body := r.get(t, "/readyz"); code != 200 || body != "ready: serving; node unhealthy (see /health)\n" {
		t.Errorf("/readyz with a link down = %d %q; want 200", code, body)
	}
	if _, body := r.get(t, "/metrics"); !strings.Contains(body, "\ngpuaffinity_health_healthy 0\n") {
		t.Errorf("/metrics with a link down: no gpuaffinity_health_healthy 0")
	}
}

// Without NVML (the library missing: Init fails) the agent serves from
// sysfs and calls nothing but Init: go-nvml's mock panics on any other
// call. A root without nvml.json is the same.
func TestNVMLMissing(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }}
	r := startAgent(t, Options{Root: fakesystest.Root(t, "dgx-h100"), NVML: lib})
	st := r.a.State()
	if st.Node == nil || st.Node.NVML.Source != "none" || !strings.Contains(st.Node.NVML.Error, "ERROR_LIBRARY_NOT_FOUND") || len(st.Node.GPUs) != 8 {
		t.Fatalf("node without NVML: %+v", st.Node)
	}
	r.rescanAndWait(t)
	for _, p := range []string{"/metrics", "/topology", "/healthz"} {
		if code, _ := r.get(t, p); code != 200 {
			t.Errorf("GET %s = %d without NVML", p, code)
		}
	}
	if r.a.nv.current() != nil {
		t.Error("scrapes get an NVML whose Init failed")
	}
	if n := len(lib.InitCalls()); n < 2 {
		t.Errorf("Init called %d times over two rounds; want a retry per round", n)
	}
	// GPUs on the bus that NVML cannot see are not healthy.
	assertNVMLGateFails(t, r, "ERROR_LIBRARY_NOT_FOUND")

	root := fakesystest.Root(t, "dgx-h100")
	if err := os.Remove(filepath.Join(root, nvml.ReplayFileName)); err != nil {
		t.Fatal(err)
	}
	r = startAgent(t, Options{Root: root})
	if st := r.a.State(); st.Node == nil || st.Node.NVML.Source != "none" || !st.Discovery.OK {
		t.Errorf("root without nvml.json: %+v", st.Discovery)
	}
}

// assertNVMLGateFails checks that the agent's gate reports NVML's failure
// on /health and in its health metrics.
func assertNVMLGateFails(t *testing.T, r *running, nvmlErr string) {
	t.Helper()
	code, body := r.get(t, "/health")
	if code != 503 || !strings.HasPrefix(body, "unhealthy: gpu.visible: NVML failed") || !strings.Contains(body, nvmlErr) {
		t.Errorf("/health with NVML failing (%s) = %d %q", nvmlErr, code, body)
	}
	_, metrics := r.get(t, "/metrics")
	for _, want := range []string{"\ngpuaffinity_health_healthy 0\n", "\ngpuaffinity_health_check_failed{check=\"gpu.visible\"} 1\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("NVML failing (%s): /metrics lacks %q", nvmlErr, strings.TrimSpace(want))
		}
	}
}

// Every way nvmlInit fails on a node with GPUs fails the agent's gate.
func TestNVMLInitFailureGate(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	for _, ret := range []gonvml.Return{gonvml.ERROR_LIB_RM_VERSION_MISMATCH, gonvml.ERROR_DRIVER_NOT_LOADED,
		gonvml.ERROR_NO_PERMISSION, gonvml.ERROR_UNKNOWN} {
		lib := &mock.Interface{InitFunc: func() gonvml.Return { return ret }}
		r := startAgent(t, Options{Root: root, NVML: lib})
		if st := r.a.State(); st.Node == nil || !st.Node.NVML.Failed {
			t.Fatalf("%v: node %+v", ret, st.Node)
		}
		assertNVMLGateFails(t, r, gonvml.ErrorString(ret))
	}
}

// The health gate follows --profile and --expect; ExpectedNVLinks comes
// from --expect.
func TestExpect(t *testing.T) {
	e := &health.Expect{}
	e.GPUs.Count = 16
	e.GPUs.NVLinksPerGPU = 18
	r := startAgent(t, Options{Root: fakesystest.Root(t, "dgx-h100"), Expect: e, Profile: health.Inference})
	st := r.a.State()
	if st.ExpectedNVLinks[7] != 18 || len(st.ExpectedNVLinks) != 8 {
		t.Errorf("ExpectedNVLinks = %v", st.ExpectedNVLinks)
	}
	code, body := r.get(t, "/health")
	if code != 503 || !strings.HasPrefix(body, "unhealthy: gpu.count: 8 GPUs on the PCI bus, expected 16\n") {
		t.Errorf("/health expecting 16 GPUs = %d %q", code, body)
	}
	if st.Health.Profile != health.Inference {
		t.Errorf("profile %s", st.Health.Profile)
	}
}

// 50 scrapes of every endpoint at once, with rescans under way (run with
// -race).
func TestConcurrentScrapes(t *testing.T) {
	r := startAgent(t, Options{Root: fakesystest.Root(t, "dgx-h100"), StateDir: t.TempDir()})
	var wg sync.WaitGroup
	errs := make(chan string, 250)
	for i := range 50 {
		wg.Go(func() {
			if i%10 == 0 {
				r.a.Rescan()
			}
			for _, p := range []string{"/metrics", "/topology", "/readyz", "/healthz", "/"} {
				resp, err := r.client.Get(r.url + p)
				if err != nil {
					errs <- err.Error()
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- p + ": " + resp.Status
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestBadOptions(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "web.yml")
	os.WriteFile(cfg, []byte("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n"), 0o644)
	busy, err := New(Options{Root: t.TempDir(), ListenAddresses: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for name, o := range map[string]Options{
		"no address":      {},
		"bad profile":     {Profile: "training", ListenAddresses: []string{":0"}},
		"web config":      {WebConfigFile: cfg, ListenAddresses: []string{"127.0.0.1:0"}},
		"port in use":     {ListenAddresses: []string{busy.Addrs()[0].String()}},
		"bad rescan":      {Rescan: -1, ListenAddresses: []string{"127.0.0.1:0"}},
		"state is a file": {StateDir: cfg, ListenAddresses: []string{"127.0.0.1:0"}},
	} {
		o.Root = t.TempDir()
		if a, err := New(o); err == nil {
			a.Close()
			t.Errorf("%s: no error", name)
		}
	}
}

// Under a systemd watchdog the agent pings WATCHDOG=1 at half of
// WATCHDOG_USEC.
func TestWatchdog(t *testing.T) {
	sock := newNotifySocket(t)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	startAgent(t, Options{Root: fakesystest.Root(t, "dgx-h100")})
	sock.expect(t, "READY=1")
	start := time.Now()
	sock.expect(t, "WATCHDOG=1")
	sock.expect(t, "WATCHDOG=1")
	sock.expect(t, "WATCHDOG=1")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("three pings took %s at a 100 ms interval", d)
	}
}

// The watchdog's liveness test: a round running past the limit stops
// the pings.
func TestAlive(t *testing.T) {
	a := &Agent{}
	if !a.alive(time.Second) {
		t.Error("not alive between rounds")
	}
	a.roundStart.Store(time.Now().Add(-2 * time.Second).UnixNano())
	if a.alive(time.Second) {
		t.Error("alive with a round stuck for 2 s")
	}
	a.roundStart.Store(time.Now().UnixNano())
	if !a.alive(time.Second) {
		t.Error("not alive with a round just started")
	}
}

// grepLines keeps the lines of text that start with one of prefixes.
func grepLines(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// The XID watch counts the fixture's recorded XIDs (GPU 1: 48, 94, 94)
// once: rescans re-open nvml.json but keep the one watch. The series
// carry GPU 1's join labels (docs/metrics.md), written from the fixture
// (dgx-h100-faults extends dgx-h100, internal/testutil/fakesys/testdata/machines:
// host dgx-h100-01, GPU 1 at 0000:43:00.0).
func TestXIDWatch(t *testing.T) {
	t.Setenv("NODE_NAME", "") // Hostname: the fixture's
	root := fakesystest.Root(t, "dgx-h100-faults")
	before := runtime.NumGoroutine()
	r := startAgent(t, Options{Root: root})
	const gpu1 = `Hostname="dgx-h100-01",UUID="GPU-dgxh100-0000-0000-0000-000000000001",gpu="1",model_name="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:43:00.0"`
	want := []string{
		`gpuaffinity_gpu_xid_errors_total{` + gpu1 + `,xid="48"} 1`,
		`gpuaffinity_gpu_xid_errors_total{` + gpu1 + `,xid="94"} 2`,
	}
	check := func() string {
		_, m := r.get(t, "/metrics")
		got := grepLines(m, "gpuaffinity_gpu_xid_errors_total{")
		if got == strings.Join(want, "\n") {
			return ""
		}
		return got
	}
	deadline := time.Now().Add(10 * time.Second)
	for got := check(); got != ""; got = check() {
		if time.Now().After(deadline) {
			t.Fatalf("XID counts:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.rescanAndWait(t)
	r.rescanAndWait(t)
	time.Sleep(time.Second) // a second watch would have delivered by now
	if got := check(); got != "" {
		t.Errorf("after rescans, XID counts:\n%s", got)
	}
	if !r.a.xidRunning.Load() {
		t.Error("XID watch not running")
	}
	// Shutdown ends the watch too.
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := settleGoroutines(before); got > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after stop, %d before:\n%s", got, before, buf[:runtime.Stack(buf, true)])
	}
}

// The agent's NVML references are all given back at exit: Init and
// Shutdown balance (discovery's, the agent's own, the XID watch's).
func TestNVMLShutdownAtExit(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100-faults")
	lib, err := nvml.LoadReplay(filepath.Join(root, nvml.ReplayFileName))
	if err != nil {
		t.Fatal(err)
	}
	r := startAgent(t, Options{Root: root, NVML: lib})
	if _, ret := lib.DeviceGetCount(); ret != gonvml.SUCCESS {
		t.Fatalf("NVML not initialised while the agent runs: %v", ret)
	}
	r.rescanAndWait(t)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, ret := lib.DeviceGetCount(); ret != gonvml.ERROR_UNINITIALIZED {
		t.Errorf("after exit DeviceGetCount answers %v: an Init was not shut down", ret)
	}
}

// Options.Jobs reaches the exporter: the jobs collector runs and sends
// its per-GPU series (the DGX H100's 8 GPUs, no process on them: every
// list read, 0 of each verdict).
func TestJobsOption(t *testing.T) {
	root := fakesystest.JobsRoot(t, "dgx-h100", "../audit/testdata/dgx-h100-jobs", nil, nil)
	lib, err := nvml.LoadReplay(filepath.Join(root, "nvml.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := startAgent(t, Options{Root: root, NVML: lib, Jobs: true})
	defer r.stop(t)
	<-r.a.Ready()
	_, m := r.get(t, "/metrics")
	if !strings.Contains(m, `gpuaffinity_scrape_collector_success{collector="jobs"} 1`) {
		t.Errorf("with Jobs, the jobs collector did not succeed:\n%s", grepLines(m, `collector="jobs"`))
	}
	listed, zeros := 0, 0
	for line := range strings.SplitSeq(m, "\n") {
		switch {
		case strings.HasPrefix(line, "gpuaffinity_gpu_processes_listed{") && strings.HasSuffix(line, "} 1"):
			listed++
		case strings.HasPrefix(line, "gpuaffinity_gpu_processes{") && strings.HasSuffix(line, "} 0"):
			zeros++
		}
	}
	if listed != 8 || zeros != 40 {
		t.Errorf("%d GPUs listed, %d gpu_processes series at 0: want 8 and 40 (8 GPUs x 5 verdicts)", listed, zeros)
	}
}

// Options.Collectors reaches the exporter: --no-collector.nvlink drops
// the NVLink series and keeps the GPUs'.
func TestCollectorSwitches(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	lib, err := nvml.LoadReplay(filepath.Join(root, "nvml.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := startAgent(t, Options{Root: root, NVML: lib, Collectors: map[string]bool{"nvlink": false}})
	defer r.stop(t)
	<-r.a.Ready()
	_, m := r.get(t, "/metrics")
	if strings.Contains(m, "gpuaffinity_nvlink_") || !strings.Contains(m, "gpuaffinity_gpu_") {
		t.Errorf("with nvlink off, /metrics:\n%s", grepLines(m, "gpuaffinity_nvlink_", "gpuaffinity_gpu_info"))
	}
}
