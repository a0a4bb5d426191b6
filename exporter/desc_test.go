package exporter

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuaffinity/gpuaffinity/health"
)

// docMetric is one row of docs/metrics.md.
type docMetric struct {
	typ    string // "gauge", "counter"; "" in the RDMA counters table (all counters)
	labels string // "gpu, link"; device, port in the RDMA counters table
}

// docMetrics reads the metric tables of docs/metrics.md.
func docMetrics(t *testing.T) map[string]docMetric {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(gpuaffinity_[a-z0-9_]+)` \\|(.*)$")
	out := map[string]docMetric{}
	for _, line := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cols := strings.Split(m[2], "|")
		d := docMetric{labels: "device, port"}
		if len(cols) >= 3 && (strings.TrimSpace(cols[0]) == "gauge" || strings.TrimSpace(cols[0]) == "counter") {
			d = docMetric{typ: strings.TrimSpace(cols[0]), labels: strings.TrimSpace(cols[1])}
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("docs/metrics.md lists %s twice", m[1])
		}
		out[m[1]] = d
	}
	return out
}

// Every metric the exporter describes is in docs/metrics.md with the
// same labels, and the doc lists no other gpuaffinity_ metric.
func TestDocListsEveryMetric(t *testing.T) {
	doc := docMetrics(t)
	desc := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	ours := map[string]string{"gpuaffinity_build_info": "version, revision, branch, goversion, goos, goarch, tags"}
	all := slices.Clone(fixedDescs)
	for _, c := range rdmaCounters {
		all = append(all, c.desc)
	}
	for _, d := range all {
		m := desc.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		ours[m[1]] = strings.ReplaceAll(m[2], ",", ", ")
	}
	docLabels := map[string]string{}
	for name, d := range doc {
		docLabels[name] = d.labels
	}
	if d := cmp.Diff(docLabels, ours); d != "" {
		t.Errorf("docs/metrics.md (-) and the exporter's metrics (+) differ:\n%s", d)
	}
}

// Every gpuaffinity_ family of a scrape has the type the doc gives it.
func TestDocTypes(t *testing.T) {
	doc := docMetrics(t)
	root, node := fixture(t, "dgx-h100-faults")
	distinctCounters(t, root)
	var xid XIDCounter
	xid.Add(1, 48, time.Now())
	st := State{Node: node, Health: &health.Report{Time: time.Now(), Results: []health.Result{{ID: "gpu.count", Verdict: health.Pass}}},
		Discovery: DiscoveryStatus{Last: time.Now(), LastSuccess: time.Now(), OK: true}}
	e := newExporter(t, root, node, replay(t, root), func(o *Options) {
		o.XID = &xid
		o.State = func() State { return st }
	})
	r := scrape(t, e.Handler())
	seen := 0
	for _, name := range r.names("gpuaffinity_") {
		d, ok := doc[name]
		if !ok {
			t.Errorf("%s is not in docs/metrics.md", name)
			continue
		}
		want := d.typ
		if want == "" {
			want = "counter"
		}
		if got := strings.ToLower(dto.MetricType_name[int32(r.mfs[name].GetType())]); got != want {
			t.Errorf("%s is a %s, docs/metrics.md says %s", name, got, want)
		}
		seen++
	}
	if seen < 80 {
		t.Errorf("only %d gpuaffinity_ families in the scrape", seen)
	}
}
