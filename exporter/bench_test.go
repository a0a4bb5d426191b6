package exporter

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
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
	e.jobs.fabric.sampler.Now = func() time.Time { at = at.Add(15 * time.Second); return at }
	b.ReportAllocs()
	for b.Loop() {
		var s sink
		if err := e.jobs.fabric.collectFabric(b.Context(), node, uses, nil, &s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScrapeJobs is BenchmarkScrape with the jobs collector off and
// on, side by side on the same input: the dgx-h100 root with the
// recorded processes of audit/testdata/dgx-h100-jobs (six processes on
// six GPUs, one list not recorded). off and on are each one scrape;
// pair scrapes off then on at each iteration and reports the median of
// the pairs' on/off wall time ratios (on/off; a loaded machine's drift
// cancels from a pair, as in peerbench's figures, docs/bench.md) and
// the ratio of the process's CPU time (user + system, getrusage) spent
// in the on scrapes to that in the off ones (cpu-on/off; the server
// runs in this process). The goal is ≤ 1.10.
func BenchmarkScrapeJobs(b *testing.B) {
	root, node := jobsFixture(b, "dgx-h100", "dgx-h100-jobs")
	off := httptest.NewServer(jobsExporter(b, root, node, false, false).Handler())
	defer off.Close()
	on := httptest.NewServer(jobsExporter(b, root, node, true, false).Handler())
	defer on.Close()
	b.Run("off", func(b *testing.B) { benchScrape(b, off.URL) })
	b.Run("on", func(b *testing.B) { benchScrape(b, on.URL) })
	b.Run("pair", func(b *testing.B) {
		b.ReportAllocs()
		var ratios []float64
		var cpuOff, cpuOn time.Duration
		get := func(url string) (wall, cpu time.Duration) {
			c0, start := cpuTime(b), time.Now()
			resp, err := http.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			return time.Since(start), cpuTime(b) - c0
		}
		for b.Loop() {
			wOff, cOff := get(off.URL)
			wOn, cOn := get(on.URL)
			ratios = append(ratios, float64(wOn)/float64(wOff))
			cpuOff, cpuOn = cpuOff+cOff, cpuOn+cOn
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "on/off")
		b.ReportMetric(float64(cpuOn)/float64(cpuOff), "cpu-on/off")
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
