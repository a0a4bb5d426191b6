package exporter

import (
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// metricsCollector sends a fixed list of metrics.
type metricsCollector []prometheus.Metric

func (metricsCollector) Describe(chan<- *prometheus.Desc) {}

func (c metricsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c {
		ch <- m
	}
}

func encodeText(t *testing.T, mfs []*dto.MetricFamily) string {
	t.Helper()
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// familyBuilder gives what prometheus.Registry.Gather gives for the same
// metrics: families and their order, label order ("10" before "2"), the
// first of two metrics with equal labels, a metric of the wrong type
// dropped, an error where the registry has one.
func TestFamilyBuilderIsRegistry(t *testing.T) {
	type kind struct {
		d *prometheus.Desc
		t prometheus.ValueType
		n int // labels
	}
	kinds := []kind{
		{descNVLinkUp, prometheus.GaugeValue, 6},
		{descNVLinkCRCFlit, prometheus.CounterValue, 5},
		{descGPUUp, prometheus.GaugeValue, 5},
		{descRDMAState, prometheus.GaugeValue, 2},
		{descTopologyAlign, prometheus.GaugeValue, 0},
		{descRDMAInfo, prometheus.GaugeValue, 8},
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	errRounds := 0
	for round := range 50 {
		var lc labelCache
		var ms, consts []prometheus.Metric
		for range 1 + rnd.IntN(400) {
			k := kinds[rnd.IntN(len(kinds))]
			labels := make([]string, k.n)
			for i := range labels {
				labels[i] = itoa(rnd.IntN(3 + round%20))
			}
			typ := k.t
			if rnd.IntN(50) == 0 { // the wrong type now and then
				typ = prometheus.UntypedValue
			}
			v := float64(rnd.IntN(1000))
			consts = append(consts, prometheus.MustNewConstMetric(k.d, typ, v, labels...))
			if rnd.IntN(2) == 0 {
				ms = append(ms, consts[len(consts)-1])
				continue
			}
			s := sink{lc: &lc}
			if k.n >= len(gpuLabelNames) && rnd.IntN(2) == 0 {
				// A GPU series by its gpuLabels: the same cache
				// entries as by its label values.
				g := &gpuLabels{values: labels[:len(gpuLabelNames)], key: strings.Join(labels[:len(gpuLabelNames)], "\xff")}
				s.addGPU(k.d, typ, v, g, labels[len(gpuLabelNames):])
			} else {
				s.add(k.d, typ, v, labels...)
			}
			if len(s.errs) > 0 {
				t.Fatal(s.errs)
			}
			ms = append(ms, s.ms...)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(metricsCollector(consts))
		want, wantErr := reg.Gather()

		b := newFamilyBuilder(familyCounts{})
		for _, m := range ms {
			b.add(m)
		}
		got, errs, _ := b.families()
		if d := cmp.Diff(encodeText(t, want), encodeText(t, got)); d != "" {
			t.Fatalf("round %d: registry (-) and familyBuilder (+) differ:\n%s", round, d)
		}
		if (wantErr != nil) != (len(errs) > 0) {
			t.Fatalf("round %d: registry error %v, familyBuilder errors %v", round, wantErr, errs)
		}
		if wantErr != nil {
			errRounds++
		}
	}
	if errRounds == 0 || errRounds == 50 {
		t.Errorf("%d of 50 rounds had duplicates or wrong types, want some", errRounds)
	}
}

// A collector's label cache holds the series of its last runs, not every
// series it ever sent.
func TestLabelCacheBounded(t *testing.T) {
	var c labelCache
	const perRun = 100
	for run := range 200 {
		for i := range perRun {
			// Half the series stay, half are new at every run (GPUs
			// renumbered, NICs replaced).
			id := i
			if i%2 == 1 {
				id = run*perRun + i
			}
			if _, err := c.pairs(descRDMAState, prometheus.GaugeValue, 1, []string{itoa(id % 7), itoa(id)}); err != nil {
				t.Fatal(err)
			}
		}
		c.endRun()
		n := 0
		for _, m := range c.byDesc {
			n += len(m)
		}
		if n != c.size || n > 2*perRun+64 {
			t.Fatalf("run %d: %d entries (size %d), want at most %d", run, n, c.size, 2*perRun+64)
		}
	}
	// Entries are reused: the same values give the same pairs.
	a, _ := c.pairs(descRDMAPresent, prometheus.GaugeValue, 1, []string{"mlx5_3"})
	b, _ := c.pairs(descRDMAPresent, prometheus.GaugeValue, 0, []string{"mlx5_3"})
	if &a[0] != &b[0] {
		t.Error("label pairs of one series built twice")
	}
	// Refused values are refused every time, never cached.
	for range 2 {
		if _, err := c.pairs(descRDMAPresent, prometheus.GaugeValue, 1, []string{"\xff"}); err == nil {
			t.Error("a label value that is not UTF-8 accepted")
		}
	}
	if _, err := c.pairs(descRDMAPresent, prometheus.GaugeValue, 1, []string{"1", "2"}); err == nil {
		t.Error("two values for one label accepted")
	}
}

// The topology series are rendered once per State.Node, and again when
// the agent hands over another node.
func TestTopologyCachePerNode(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	sys := *node
	sys.Pairs = slices.Clone(node.Pairs)
	for i := range sys.Pairs {
		if sys.Pairs[i].GPU == 0 {
			sys.Pairs[i].Class = topology.ClassSYS
		}
	}
	cur := node
	e := newExporter(t, root, node, nil, func(o *Options) { o.State = func() State { return State{Node: cur} } })
	h := e.Handler()
	for i, c := range []struct {
		n             *topology.Node
		best, aligned float64
	}{{node, 1, 1}, {node, 1, 1}, {&sys, 5, 0}, {&sys, 5, 0}, {node, 1, 1}} {
		cur = c.n
		r := scrape(t, h)
		if v := r.must(t, "gpuaffinity_topology_best_nic_class", l("gpu", "0")); v != c.best {
			t.Errorf("scrape %d: best_nic_class{gpu=0} = %g, want %g", i, v, c.best)
		}
		if v := r.must(t, "gpuaffinity_topology_aligned", nil); v != c.aligned {
			t.Errorf("scrape %d: aligned = %g, want %g", i, v, c.aligned)
		}
	}
}

// Handler answers gzip (the stateless encoder) exactly where promhttp's own
// handler would, and the decompressed answer is the plain one.
func TestHandlerGzipNegotiation(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	e := newExporter(t, root, node, replay(t, root))
	ours := httptest.NewServer(e.Handler())
	defer ours.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x."}))
	theirs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer theirs.Close()

	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func(url, accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if accept != "-" {
			req.Header.Set("Accept-Encoding", accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	plain := func(b []byte, enc string) string {
		t.Helper()
		if enc != "gzip" {
			return string(b)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	// The values of the agent's own series change between scrapes.
	stable := func(body string) string {
		var out []string
		for _, ln := range strings.Split(body, "\n") {
			if strings.HasPrefix(ln, "gpuaffinity_") && !strings.HasPrefix(ln, "gpuaffinity_scrape_collector_duration") {
				out = append(out, ln)
			}
		}
		return strings.Join(out, "\n")
	}
	_, ref := get(ours.URL, "identity")
	want := stable(string(ref))
	for _, accept := range []string{
		"-", "", "gzip", "GZIP", "identity", "gzip, identity", "identity, gzip", "*", "*;q=0", "gzip;q=0",
		"gzip;q=0.5, identity;q=0.6", "identity;q=0.5, gzip;q=0.6", "identity;q=0, gzip", "deflate, br",
		"br;q=1.0, gzip;q=0.8, *;q=0.1", "gzip;level=1", "gzip ;q=1", "x-gzip", "gzip,deflate",
	} {
		tr, tb := get(theirs.URL, accept)
		or, ob := get(ours.URL, accept)
		te, oe := tr.Header.Get("Content-Encoding"), or.Header.Get("Content-Encoding")
		if te != oe {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, promhttp says %q", accept, oe, te)
		}
		if got, want := or.Header.Values("Vary"), tr.Header.Values("Vary"); !slices.Equal(got, want) {
			t.Errorf("Accept-Encoding %q: Vary %q, promhttp says %q", accept, got, want)
		}
		if or.StatusCode != 200 || tr.StatusCode != 200 {
			t.Errorf("Accept-Encoding %q: status %d, promhttp %d", accept, or.StatusCode, tr.StatusCode)
		}
		plain(tb, te)
		if got := stable(plain(ob, oe)); got != want {
			t.Errorf("Accept-Encoding %q: the answer differs from the identity one", accept)
		}
	}
}

// BenchmarkScrapeCollectors is BenchmarkScrape with collectors switched
// off, and with the agent's registry (not pedantic).
func BenchmarkScrapeCollectors(b *testing.B) {
	root, node := fixture(b, "dgx-h100")
	lib := replay(b, root)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		{"no-nvlink", []string{"--no-collector.nvlink"}},
		{"no-rdma", []string{"--no-collector.rdma"}},
		{"rdma-only", []string{"--collector.disable-defaults", "--collector.rdma"}},
		{"minimal", []string{"--collector.disable-defaults"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			on, err := parseCollectorFlags(b, c.args...)
			if err != nil {
				b.Fatal(err)
			}
			e := newExporter(b, root, node, lib, func(o *Options) {
				o.Collectors = on
				o.Registry = nil
			})
			srv := httptest.NewServer(e.Handler())
			defer srv.Close()
			benchScrape(b, srv.URL)
		})
	}
}
