package exporter

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The exposition passes client_golang's promlint, on a node with every
// kind of series (counters_ext and hw_counters included).
func TestLint(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	distinctCounters(t, root)
	hw(t, root)
	var xid XIDCounter
	xid.Add(0, 79, time.Now())
	e := newExporter(t, root, node, replay(t, root), func(o *Options) { o.XID = &xid })
	if _, err := e.Gatherer().Gather(); err != nil {
		t.Fatalf("pedantic gather: %v", err)
	}
	problems, err := testutil.GatherAndLint(e.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// promtool check metrics (Prometheus's own linter) accepts a scrape.
func TestPromtoolCheckMetrics(t *testing.T) {
	bin := needBinary(t, "promtool")
	root, node := fixture(t, "dgx-h100")
	distinctCounters(t, root)
	hw(t, root)
	r := scrape(t, newExporter(t, root, node, replay(t, root)).Handler())
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = strings.NewReader(r.body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
