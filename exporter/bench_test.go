package exporter

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/audit"
)

// benchScrape GETs url b.N times, reading the whole answer.
func benchScrape(b *testing.B, url string) {
	b.Helper()
	b.ReportAllocs()
	var size int64
	for b.Loop() {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("status %d, %v", resp.StatusCode, err)
		}
		size = n
	}
	b.ReportMetric(float64(size), "bytes/scrape")
}

// BenchmarkScrape is one full HTTP scrape of the agent's /metrics on
// dgx-h100: NVML replayed (8 GPUs, 144 NVLinks), 12 RDMA ports read from
// the fake sysfs, topology, Go and process metrics.
func BenchmarkScrape(b *testing.B) {
	root, node := fixture(b, "dgx-h100")
	e := newExporter(b, root, node, replay(b, root))
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	benchScrape(b, srv.URL)
}

// BenchmarkScrapeRDMA is the RDMA collector's part alone: one
// CounterReader.Read of the 12 ports and their metrics.
func BenchmarkScrapeRDMA(b *testing.B) {
	root, node := fixture(b, "dgx-h100")
	e := newExporter(b, root, node, nil)
	st := State{Node: node}
	b.ReportAllocs()
	for b.Loop() {
		var s sink
		if err := e.collectRDMA(b.Context(), &st, &s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNodeExporterScrape is node_exporter's infiniband-only scrape of
// the same fixture over HTTP, for comparison (its process, not ours, does
// the work; allocations are the client's).
func BenchmarkNodeExporterScrape(b *testing.B) {
	root, _ := fixture(b, "dgx-h100")
	url := startNodeExporter(b, root)
	benchScrape(b, url)
}

// BenchmarkCollectNVML is the nvml collector's run alone on dgx-h100 with
// its label cache warm (as at every scrape after the first): the NVML
// read replayed and its 881 series (8 GPUs, 144 NVLinks).
func BenchmarkCollectNVML(b *testing.B) {
	root, node := fixture(b, "dgx-h100")
	e := newExporter(b, root, node, replay(b, root))
	p := e.parts[0]
	st := State{Node: node}
	b.ReportAllocs()
	for b.Loop() {
		s := sink{lc: &p.labels, buf: make([]series, 0, p.lastN)}
		if err := e.collectNVML(b.Context(), &st, &s); err != nil {
			b.Fatal(err)
		}
		p.labels.endRun()
		p.lastN = len(s.ms)
	}
}

// BenchmarkCollectJobsFabric is the fabric half of the jobs collector
// alone on dgx-h100 (Options.Jobs): one audit.FabricSampler sample of the
// 12 ports' transmit counters and FabricBalance against the previous
// sample, every GPU busy; the GPU process listing (audit.Uses) is not in
// it. Compare BenchmarkScrapeRDMA, the rdma collector's read of the
// same ports.
func BenchmarkCollectJobsFabric(b *testing.B) {
	root, node := fixture(b, "dgx-h100")
	e := newExporter(b, root, node, nil, func(o *Options) { o.Jobs = true })
	var uses []audit.Use
	for g := range 8 {
		uses = append(uses, audit.Use{PID: 100 + g, GPUs: []int{g}})
	}
	at := time.Unix(0, 0)
	e.jobsFabric.sampler.Now = func() time.Time { at = at.Add(15 * time.Second); return at }
	b.ReportAllocs()
	for b.Loop() {
		var s sink
		if err := e.jobsFabric.collectFabric(b.Context(), node, uses, &s); err != nil {
			b.Fatal(err)
		}
	}
}
