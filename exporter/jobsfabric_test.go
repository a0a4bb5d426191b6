package exporter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The fabric series over scrapes of the DGX H100 fixture with a process
// on every GPU. Its ports, from the DGX H100 user guide's network ports
// table (the dgx-h100 spec): compute mlx5_0 (GPU 0), mlx5_3, mlx5_4,
// mlx5_5, mlx5_6, mlx5_9, mlx5_10, mlx5_11 (GPUs 1-7), NDR 400 Gb/s;
// storage mlx5_1, mlx5_2, mlx5_7, mlx5_8; one port each.
func TestJobsFabricSeries(t *testing.T) {
	t.Parallel()
	root, node := busyDGX(t)
	e := newExporter(t, root, node, replay(t, root), func(o *Options) { o.Jobs = true })
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	e.jobs.fabric.sampler.Now = func() time.Time { return at }

	compute := []string{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"}
	storage := []string{"mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"}
	words := map[string]uint64{}
	set := func(dev string, w uint64) {
		words[dev] = w
		writeFile(t, filepath.Join(root, "sys/class/infiniband", dev, "ports/1/counters/port_xmit_data"), fmt.Sprintf("%d\n", w))
	}
	// send adds bytes/s over 10 s to dev's counter (4-byte words).
	send := func(dev string, bytesPerSecond float64) { set(dev, words[dev]+uint64(bytesPerSecond*10/4)) }
	for _, d := range append(compute, storage...) {
		set(d, 5_000_000_000)
	}
	const idle, stor = "gpuaffinity_job_compute_nic_idle", "gpuaffinity_job_storage_nic_compute_traffic"

	// One sample: no series yet.
	r := scrape(t, e.Handler())
	if n := len(r.find(idle, nil)) + len(r.find(stor, nil)); n != 0 {
		t.Fatalf("first scrape: %d fabric series, want none before two samples", n)
	}
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "jobs")); v != 1 {
		t.Errorf("first scrape: jobs collector success %v", v)
	}

	// 10 s on: only mlx5_0 carries the job (40 GB/s), and storage port
	// mlx5_2 as much; the rest send management datagrams (1 kB/s).
	for _, d := range append(compute, storage...) {
		send(d, 1e3)
	}
	send("mlx5_0", 40e9)
	send("mlx5_2", 40e9)
	at = at.Add(10 * time.Second)
	r = scrape(t, e.Handler())
	want := func(r scrapeResult, name string, dev string, v float64) {
		t.Helper()
		if got, ok := r.value(t, name, l("device", dev, "port", "1")); !ok || got != v {
			t.Errorf("%s{device=%q}: %v (present %v), want %v", name, dev, got, ok, v)
		}
	}
	for _, d := range compute {
		want(r, idle, d, map[bool]float64{true: 0, false: 1}[d == "mlx5_0"])
	}
	for _, d := range storage {
		want(r, stor, d, map[bool]float64{true: 1, false: 0}[d == "mlx5_2"])
	}
	if n, m := len(r.find(idle, nil)), len(r.find(stor, nil)); n != 8 || m != 4 {
		t.Errorf("%d idle and %d storage series, want 8 and 4 (one per port)", n, m)
	}

	// 0.3 s later (a second Prometheus): nothing moved since, but the
	// rate is taken from the first sample (10.3 s), not over 0.3 s of
	// silence: mlx5_3 is still idle beside a busy mlx5_0.
	at = at.Add(300 * time.Millisecond)
	r = scrape(t, e.Handler())
	want(r, idle, "mlx5_3", 1)
	want(r, stor, "mlx5_2", 1)

	// 10 s after the second: every compute port busy, but mlx5_4's
	// counter reset (a driver reload): no series for it, the collector
	// says why and names the file.
	for _, d := range compute {
		send(d, 20e9)
	}
	for _, d := range storage {
		send(d, 1e3)
	}
	set("mlx5_4", 42)
	at = at.Add(10 * time.Second)
	r = scrape(t, e.Handler())
	if _, ok := r.value(t, idle, l("device", "mlx5_4")); ok {
		t.Errorf("mlx5_4 has an idle series after its counter reset")
	}
	for _, d := range compute {
		if d != "mlx5_4" {
			want(r, idle, d, 0)
		}
	}
	want(r, stor, "mlx5_2", 0)
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "jobs")); v != 0 {
		t.Errorf("counter reset: jobs collector success %v, want 0", v)
	}
	p := e.parts[len(e.parts)-1]
	p.mu.Lock()
	msg := p.lastErr
	p.mu.Unlock()
	file := filepath.Join(root, "sys/class/infiniband/mlx5_4/ports/1/counters/port_xmit_data")
	// The second sample's 5,000,000,000 + 2,500 words (1 kB/s for 10 s),
	// the rate's start, to 42.
	if !strings.Contains(msg, "mlx5_4:1: "+file+" went down from 5000002500 to 42") {
		t.Errorf("collector error %q: want mlx5_4's reset, naming %s", msg, file)
	}

	// The series pass promlint.
	problems, err := testutil.GatherAndLint(e.Gatherer(), idle, stor)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// With the rdma collector on, the fabric's counters are that collector's
// read of the same collection (portsread.go): each port's counter file is
// read once a scrape, and what the rdma collector read is what the
// fabric judges. Here only the read through Options.ReadFile (the rdma
// collector's reader) sees mlx5_0 move, 40 GB/s; the files on disk stay
// still, so a fabric reading them itself would find an idle fabric and
// report nothing.
func TestJobsFabricSharesRDMARead(t *testing.T) {
	t.Parallel()
	root, node := busyDGX(t)
	busy := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data")
	var mu sync.Mutex
	reads, words := 0, uint64(5_000_000_000)
	e := newExporter(t, root, node, replay(t, root), func(o *Options) {
		o.Jobs = true
		o.ReadFile = func(name string) ([]byte, error) {
			if name != busy {
				return os.ReadFile(name)
			}
			mu.Lock()
			defer mu.Unlock()
			reads++
			words += 40e9 * 10 / 4 // 40 GB/s over the 10 s between scrapes
			return fmt.Appendf(nil, "%d\n", words), nil
		}
	})
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	e.jobs.fabric.sampler.Now = func() time.Time { return at }
	scrape(t, e.Handler())
	at = at.Add(10 * time.Second)
	r := scrape(t, e.Handler())
	if reads != 2 {
		t.Errorf("%s read %d times in 2 scrapes, want once a scrape", busy, reads)
	}
	for _, d := range []string{"mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"} {
		if v, ok := r.value(t, "gpuaffinity_job_compute_nic_idle", l("device", d, "port", "1")); !ok || v != 1 {
			t.Errorf("%s idle %v (present %v), want 1 beside the busy mlx5_0 of the rdma collector's read", d, v, ok)
		}
	}
	if v, ok := r.value(t, "gpuaffinity_job_compute_nic_idle", l("device", "mlx5_0", "port", "1")); !ok || v != 0 {
		t.Errorf("mlx5_0 idle %v (present %v), want 0", v, ok)
	}
}

// busyDGX is the DGX H100 fixture with one process on each of its eight
// GPUs in NVML's lists: every GPU busy.
func busyDGX(t *testing.T) (string, *topology.Node) {
	t.Helper()
	root, node := fixture(t, "dgx-h100")
	procs := map[int][]nvml.ReplayProcess{}
	for i := range 8 {
		procs[i] = []nvml.ReplayProcess{{PID: uint32(7100 + i)}}
	}
	fakesystest.SetNVMLProcesses(t, root, procs, true)
	return root, node
}
