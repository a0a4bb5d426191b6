package exporter

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// fixture builds machine into a temp root and discovers it (NVML replayed
// from the root's nvml.json).
func fixture(tb testing.TB, machine string) (string, *topology.Node) {
	tb.Helper()
	root := fakesystest.Root(tb, machine)
	n, err := discover.Discover(discover.Options{Root: root})
	if err != nil {
		tb.Fatalf("discover %s: %v", machine, err)
	}
	return root, &n
}

// replay loads root/nvml.json.
func replay(tb testing.TB, root string) gonvml.Interface {
	tb.Helper()
	lib, err := nvml.LoadReplay(filepath.Join(root, "nvml.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return lib
}

// newExporter returns an exporter on root, node and lib, with a pedantic
// registry; tweak may change the options.
func newExporter(tb testing.TB, root string, node *topology.Node, lib gonvml.Interface, tweak ...func(*Options)) *Exporter {
	tb.Helper()
	opts := Options{
		Root:     root,
		State:    func() State { return State{Node: node, StateWriteOK: true} },
		NVML:     func() gonvml.Interface { return lib },
		Registry: prometheus.NewPedanticRegistry(),
	}
	for _, f := range tweak {
		f(&opts)
	}
	e, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// scrapeResult is one HTTP scrape, parsed.
type scrapeResult struct {
	code int
	body string
	mfs  map[string]*dto.MetricFamily
}

// scrape GETs h once (text format) and parses the answer.
func scrape(tb testing.TB, h http.Handler) scrapeResult {
	tb.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	return scrapeURL(tb, srv.URL)
}

func scrapeURL(tb testing.TB, url string) scrapeResult {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	req.Header.Set("Accept-Encoding", "identity") // gzip is slow under -race
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("scrape %s: %v", url, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		tb.Fatalf("parse scrape of %s: %v\n%s", url, err, b)
	}
	return scrapeResult{code: resp.StatusCode, body: string(b), mfs: mfs}
}

// labelsOf returns a metric's labels as a map.
func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// value returns the value of the sample of name whose labels include
// want (all of them); ok is false when there is none, and the test fails
// when there are several.
func (r scrapeResult) value(tb testing.TB, name string, want map[string]string) (float64, bool) {
	tb.Helper()
	ms := r.find(name, want)
	switch len(ms) {
	case 0:
		return 0, false
	case 1:
		return sampleValue(ms[0]), true
	}
	tb.Fatalf("%s%v: %d samples, want one", name, want, len(ms))
	return 0, false
}

// must is value that fails the test when the sample is missing.
func (r scrapeResult) must(tb testing.TB, name string, want map[string]string) float64 {
	tb.Helper()
	v, ok := r.value(tb, name, want)
	if !ok {
		tb.Fatalf("no sample %s%v", name, want)
	}
	return v
}

func (r scrapeResult) find(name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	mf := r.mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		ls := labelsOf(m)
		for k, v := range want {
			if ls[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// names returns the metric names of the scrape with prefix, sorted.
func (r scrapeResult) names(prefix string) []string {
	var out []string
	for n := range r.mfs {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// l builds a label map from pairs.
func l(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// writeFile overwrites a file of a fixture root.
func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// hw gives mlx5_1 port 1 (a RoCE port of dgx-h100) every hw_counters/
// file the exporter reads, with distinct values, and returns them by file.
func hw(tb testing.TB, root string) map[string]uint64 {
	tb.Helper()
	dir := filepath.Join(root, "sys/class/infiniband/mlx5_1/ports/1/hw_counters")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	_, _, files := rdmaCounterFiles()
	out := map[string]uint64{}
	for i, f := range files {
		v := uint64(100 + i)
		if f == lifespanFile {
			v = 10 // ms
		}
		out[f] = v
		writeFile(tb, filepath.Join(dir, f), fmt.Sprintf("%d\n", v))
	}
	return out
}
