package exporter

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// hookedLib is an NVML library whose Init runs a hook first (to count
// collections or to hang like a wedged driver).
type hookedLib struct {
	gonvml.Interface
	hook func()
}

func (h hookedLib) Init() gonvml.Return {
	h.hook()
	return h.Interface.Init()
}

// Concurrent scrapes share one collection: every collection calls NVML's
// Init once, so the Init count is the collection count, and all scrapes
// of one collection report the same collector durations.
func TestConcurrentScrapesCoalesce(t *testing.T) {
	t.Setenv("NODE_NAME", "") // Hostname: the fixture's
	root, node := fixture(t, "dgx-h100")
	var inits atomic.Int64
	lib := hookedLib{replay(t, root), func() {
		inits.Add(1)
		time.Sleep(500 * time.Millisecond)
	}}
	e := newExporter(t, root, node, lib)
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()

	const n = 50
	type answer struct {
		code int
		body string
	}
	answers := make([]answer, n)
	// No gzip: compressing 50 answers dominates the test under -race.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: n}}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
			}
			answers[i] = answer{resp.StatusCode, string(b)}
		})
	}
	wg.Wait()
	// Parsing 50 answers is slow under -race: look for the lines instead.
	durations := map[string]bool{}
	for i, a := range answers {
		if a.code != 200 {
			t.Fatalf("scrape %d: status %d", i, a.code)
		}
		d, ok := line(a.body, `gpuaffinity_scrape_collector_duration_seconds{collector="nvml"} `)
		if !ok {
			t.Fatalf("scrape %d: no nvml duration", i)
		}
		durations[d] = true
		// GPU 3 of dgx-h100 (internal/testutil/fakesys/testdata/machines/dgx-h100.yaml):
		// bus 0000:61:00.0, on host dgx-h100-01.
		if v, _ := line(a.body, `gpuaffinity_gpu_up{Hostname="dgx-h100-01",UUID="GPU-dgxh100-0000-0000-0000-000000000003",gpu="3",model_name="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:61:00.0"} `); v != "1" {
			t.Fatalf("scrape %d: gpu_up{gpu=3} = %q", i, v)
		}
	}
	got := inits.Load()
	t.Logf("%d scrapes, %d collections", n, got)
	if got < 1 || got > 5 {
		t.Errorf("%d scrapes made %d NVML collections, want them shared (1, a few at most)", n, got)
	}
	if int64(len(durations)) != got {
		t.Errorf("%d distinct collections in the answers, %d NVML collections", len(durations), got)
	}
	// Sequential scrapes are separate collections.
	before := inits.Load()
	scrapeURL(t, srv.URL)
	scrapeURL(t, srv.URL)
	if d := inits.Load() - before; d != 2 {
		t.Errorf("two sequential scrapes made %d collections, want 2", d)
	}
}

// A NIC removed between scrapes disappears from the output; the scrape
// still succeeds, and rdma_device_present says the device is gone.
func TestNICRemovedBetweenScrapes(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	e := newExporter(t, root, node, replay(t, root))
	h := e.Handler()
	r := scrape(t, h)
	if v := r.must(t, "gpuaffinity_rdma_state_id", l("device", "mlx5_4", "port", "1")); v != 4 {
		t.Fatalf("mlx5_4 state %g before removal", v)
	}
	link := filepath.Join(root, "sys/class/infiniband/mlx5_4")
	dir, err := filepath.EvalSymlinks(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil { // the class link now dangles
		t.Fatal(err)
	}
	r = scrape(t, h)
	if r.code != 200 {
		t.Fatalf("status %d", r.code)
	}
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "rdma")); v != 1 {
		t.Errorf("rdma success = %g after a NIC vanished, want 1", v)
	}
	for name, mf := range r.mfs {
		if !strings.HasPrefix(name, "gpuaffinity_rdma_") || name == "gpuaffinity_rdma_device_present" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsOf(m)["device"] == "mlx5_4" {
				t.Errorf("%s still has mlx5_4 after its removal", name)
			}
		}
	}
	if v := r.must(t, "gpuaffinity_rdma_device_present", l("device", "mlx5_4")); v != 0 {
		t.Errorf("rdma_device_present{mlx5_4} = %g, want 0", v)
	}
	if v := r.must(t, "gpuaffinity_rdma_state_id", l("device", "mlx5_5", "port", "1")); v != 4 {
		t.Errorf("mlx5_5 state %g, want 4", v)
	}
	// The class link itself removed too: same answer.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	r = scrape(t, h)
	if v := r.must(t, "gpuaffinity_rdma_device_present", l("device", "mlx5_4")); v != 0 {
		t.Errorf("rdma_device_present{mlx5_4} = %g, want 0", v)
	}
}

// A counter file answering EINVAL is read once, then never again, and
// counted in rdma_counters_disabled.
func TestEINVALCounterReadOnce(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	bad := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/counters/VL15_dropped")
	var mu sync.Mutex
	reads := map[string]int{}
	readFile := func(name string) ([]byte, error) {
		mu.Lock()
		reads[name]++
		mu.Unlock()
		if name == bad {
			// What read(2) answers on a ConnectX-7 switch-mode port;
			// a tmpfs file cannot produce it.
			return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EINVAL}
		}
		return os.ReadFile(name)
	}
	e := newExporter(t, root, node, replay(t, root), func(o *Options) { o.ReadFile = readFile })
	h := e.Handler()
	for i := range 3 {
		r := scrape(t, h)
		if v := r.must(t, "gpuaffinity_rdma_counters_disabled", l("device", "mlx5_0", "port", "1")); v != 1 {
			t.Errorf("scrape %d: counters_disabled = %g, want 1", i, v)
		}
		if v := r.must(t, "gpuaffinity_rdma_counters_disabled", l("device", "mlx5_3", "port", "1")); v != 0 {
			t.Errorf("scrape %d: mlx5_3 counters_disabled = %g, want 0", i, v)
		}
		if _, ok := r.value(t, "gpuaffinity_rdma_vl15_dropped_total", l("device", "mlx5_0")); ok {
			t.Errorf("scrape %d: vl15_dropped_total of mlx5_0 exported", i)
		}
		if v := r.must(t, "gpuaffinity_rdma_vl15_dropped_total", l("device", "mlx5_3", "port", "1")); v != 0 {
			t.Errorf("scrape %d: mlx5_3 vl15_dropped_total = %g", i, v)
		}
		if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "rdma")); v != 1 {
			t.Errorf("scrape %d: rdma success = %g, want 1", i, v)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if reads[bad] != 1 {
		t.Errorf("EINVAL file read %d times in 3 scrapes, want 1", reads[bad])
	}
	good := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error")
	if reads[good] != 3 {
		t.Errorf("symbol_error read %d times in 3 scrapes, want 3", reads[good])
	}
	if got := e.DisabledRDMAFiles(); len(got) != 1 || got[0] != bad {
		t.Errorf("DisabledRDMAFiles = %v, want [%s]", got, bad)
	}
}

// NVML that is not there (no driver): the scrape answers 200, nvml_up and
// the nvml collector are 0, every GPU of the discovery is up 0 and keeps
// its info and NVLink series (as 0).
func TestNVMLLibraryNotFound(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	lib := nvml.NewReplay(nvml.ReplayFile{Version: 1, Init: "ERROR_LIBRARY_NOT_FOUND"})
	e := newExporter(t, root, node, lib)
	r := scrape(t, e.Handler())
	if r.code != 200 {
		t.Fatalf("status %d", r.code)
	}
	for name, want := range map[string]float64{"nvml": 0, "rdma": 1, "topology": 1} {
		if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", name)); v != want {
			t.Errorf("%s success = %g, want %g", name, v, want)
		}
	}
	if v := r.must(t, "gpuaffinity_nvml_up", nil); v != 0 {
		t.Errorf("nvml_up = %g, want 0", v)
	}
	for i := range 8 {
		gpu := string(rune('0' + i))
		if v := r.must(t, "gpuaffinity_gpu_up", l("gpu", gpu)); v != 0 {
			t.Errorf("GPU %d up = %g, want 0", i, v)
		}
		r.must(t, "gpuaffinity_gpu_info", l("gpu", gpu, "bus_id", dgxH100[i].bus))
		ups := r.find("gpuaffinity_nvlink_up", l("gpu", gpu))
		if len(ups) != 18 {
			t.Errorf("GPU %d: %d nvlink_up series, want the 18 of the discovery", i, len(ups))
		}
		for _, m := range ups {
			if sampleValue(m) != 0 {
				t.Errorf("GPU %d link %s up without NVML", i, labelsOf(m)["link"])
			}
		}
	}
}

// A collector past its deadline is reported unsuccessful, its output is
// dropped and the scrape returns within about the deadline. While the
// hung read has not returned, later scrapes do not start another one.
func TestCollectorDeadline(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	release := make(chan struct{})
	var inits atomic.Int64
	lib := hookedLib{replay(t, root), func() {
		inits.Add(1)
		<-release
	}}
	t.Cleanup(func() { close(release) })
	const deadline = 300 * time.Millisecond
	e := newExporter(t, root, node, lib, func(o *Options) { o.Timeout = deadline })
	h := e.Handler()
	for i := range 2 {
		start := time.Now()
		r := scrape(t, h)
		took := time.Since(start)
		if r.code != 200 {
			t.Fatalf("scrape %d: status %d", i, r.code)
		}
		if took > deadline+2*time.Second {
			t.Errorf("scrape %d took %s with a %s deadline", i, took, deadline)
		}
		if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "nvml")); v != 0 {
			t.Errorf("scrape %d: nvml success = %g, want 0", i, v)
		}
		if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "rdma")); v != 1 {
			t.Errorf("scrape %d: rdma success = %g, want 1", i, v)
		}
		for _, name := range []string{"gpuaffinity_nvml_up", "gpuaffinity_gpu_up", "gpuaffinity_gpu_info", "gpuaffinity_nvlink_up"} {
			if len(r.find(name, nil)) != 0 {
				t.Errorf("scrape %d: %s exported by a collector past its deadline", i, name)
			}
		}
		r.must(t, "gpuaffinity_rdma_state_id", l("device", "mlx5_0", "port", "1"))
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("%d NVML reads started while the first hung, want 1", n)
	}
}

// line returns the rest of body's line that starts with prefix.
func line(body, prefix string) (string, bool) {
	for _, ln := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(ln, prefix); ok {
			return v, true
		}
	}
	return "", false
}
