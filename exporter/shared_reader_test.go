package exporter

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/health"
)

// The health checks read counters through the exporter's own
// CounterReader (as the agent wires them): a file that answered EINVAL
// at check time is not read again by a scrape, and the scrape counts it
// disabled.
func TestHealthSharesCounterReader(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	bad := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/counters/link_downed")
	var mu sync.Mutex
	reads := map[string]int{}
	readFile := func(name string) ([]byte, error) {
		mu.Lock()
		reads[name]++
		mu.Unlock()
		if name == bad {
			return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EINVAL}
		}
		return os.ReadFile(name)
	}
	e := newExporter(t, root, node, replay(t, root), func(o *Options) { o.ReadFile = readFile })
	rep, err := health.Run(context.Background(), *node, health.Options{
		Root: root, Only: []string{"nic.errors"}, Interval: time.Millisecond,
		Reader: health.NewReader(root, "", e.CounterReader()),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Verdict != health.Pass || !strings.Contains(r.Reason, "8 ports") {
		t.Errorf("nic.errors: %s %s", r.Verdict, r.Reason)
	}
	mu.Lock()
	if reads[bad] != 1 {
		t.Errorf("EINVAL file read %d times by two check-time reads, want 1", reads[bad])
	}
	mu.Unlock()
	if got := e.DisabledRDMAFiles(); len(got) != 1 || got[0] != bad {
		t.Errorf("DisabledRDMAFiles = %v, want [%s]", got, bad)
	}
	r := scrape(t, e.Handler())
	if v := r.must(t, "gpuaffinity_rdma_counters_disabled", l("device", "mlx5_0", "port", "1")); v != 1 {
		t.Errorf("counters_disabled = %g, want 1", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if reads[bad] != 1 {
		t.Errorf("EINVAL file read %d times after a scrape, want 1", reads[bad])
	}
}
