package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/audit"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs/rootfstest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The DGX H100's RDMA ports, from the DGX H100 user guide's network
// ports table (as the dgx-h100 spec cites it): one single-port
// ConnectX-7 NDR 400 Gb/s compute NIC in each GPU's PCIe switch, GPU 0
// mlx5_0, GPU 1 mlx5_3, GPU 2 mlx5_4, GPU 3 mlx5_5, GPU 4 mlx5_6, GPU 5
// mlx5_9, GPU 6 mlx5_10, GPU 7 mlx5_11; the storage ports are the two
// dual-port ConnectX-7, one RDMA device per port: mlx5_1, mlx5_2 (29:00.x)
// and mlx5_7, mlx5_8 (aa:00.x).
var (
	dgxCompute = []string{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"}
	dgxStorage = []string{"mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"}
)

// fabricRate turns bytes per second over interval into the 4-byte words
// a port_xmit_data counter grows by.
func fabricWords(bytesPerSecond float64, interval time.Duration) uint64 {
	return uint64(bytesPerSecond * interval.Seconds() / 4)
}

// fabricRig is the DGX H100 fixture discovered, with a sampler on its
// root whose clock advances by interval at each sample.
type fabricRig struct {
	t        *testing.T
	root     string
	node     topology.Node
	sampler  *audit.FabricSampler
	interval time.Duration
	words    map[string]uint64 // the counters as last written, by device
}

const fabricInterval = 10 * time.Second

func newFabricRig(t *testing.T) *fabricRig {
	t.Helper()
	root := fakesystest.Root(t, "dgx-h100")
	n, err := discover.Discover(discover.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	s := audit.NewFabricSampler(rootfstest.Open(t, root))
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	s.Now = func() time.Time {
		at = at.Add(fabricInterval)
		return at
	}
	r := &fabricRig{t: t, root: root, node: n, sampler: s, interval: fabricInterval, words: map[string]uint64{}}
	// Counters far from 0, as on a node up for a while.
	for _, d := range append(slices.Clone(dgxCompute), dgxStorage...) {
		r.set(d, 1_000_000_000_000)
	}
	return r
}

// set writes dev port 1's port_xmit_data.
func (r *fabricRig) set(dev string, words uint64) {
	r.t.Helper()
	r.words[dev] = words
	p := filepath.Join(r.root, "sys/class/infiniband", dev, "ports/1/counters/port_xmit_data")
	if err := os.WriteFile(p, fmt.Appendf(nil, "%d\n", words), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// send makes dev transmit bytesPerSecond over the next interval.
func (r *fabricRig) send(dev string, bytesPerSecond float64) {
	r.set(dev, r.words[dev]+fabricWords(bytesPerSecond, r.interval))
}

// run samples, lets traffic (dev -> bytes/s; every other port 1 kB/s of
// management datagrams) flow for one interval, samples again and judges.
func (r *fabricRig) run(busy []int, traffic map[string]float64, between func()) audit.Fabric {
	r.t.Helper()
	first := r.sampler.Sample(context.Background())
	for _, d := range append(slices.Clone(dgxCompute), dgxStorage...) {
		rate, ok := traffic[d]
		if !ok {
			rate = 1e3
		}
		r.send(d, rate)
	}
	if between != nil {
		between()
	}
	second := r.sampler.Sample(context.Background())
	var uses []audit.Use
	for i, g := range busy {
		uses = append(uses, audit.Use{PID: 9000 + i, GPUs: []int{g}, Sources: []string{"nvml"}})
	}
	return audit.FabricBalance(r.node, uses, first, second)
}

// idleByGPU maps each busy GPU group's GPUs ("1"; "0,1") to its idle ports.
func idleByGPU(f audit.Fabric) map[string][]string {
	out := map[string][]string{}
	for _, g := range f.GPUs {
		var ids []string
		for _, i := range g.GPUs {
			ids = append(ids, fmt.Sprint(i))
		}
		if len(g.Idle) > 0 {
			out[strings.Join(ids, ",")] = g.Idle
		}
	}
	return out
}

func storageFlagged(f audit.Fabric) []string {
	var out []string
	for _, p := range f.Ports {
		if p.ComputeTraffic {
			out = append(out, p.Name())
		}
	}
	return out
}

func portOf(t *testing.T, f audit.Fabric, name string) audit.FabricPort {
	t.Helper()
	for _, p := range f.Ports {
		if p.Name() == name {
			return p
		}
	}
	t.Fatalf("no port %s in %+v", name, f.Ports)
	return audit.FabricPort{}
}

// allGPUs are the DGX H100's eight.
var allGPUs = []int{0, 1, 2, 3, 4, 5, 6, 7}

// One busy NIC of eight (the classic NCCL_IB_HCA=mlx5_0) with all eight
// GPUs busy: the other seven compute NICs are idle, each named with its
// GPU; no storage NIC is flagged.
func TestFabricOneNICOfEight(t *testing.T) {
	t.Parallel()
	r := newFabricRig(t)
	f := r.run(allGPUs, map[string]float64{"mlx5_0": 40e9}, nil)
	if !f.Active || f.Busiest != "mlx5_0:1" || f.Seconds != 10 {
		t.Fatalf("active %v busiest %q over %gs: want active, mlx5_0:1, 10 s", f.Active, f.Busiest, f.Seconds)
	}
	// 40 GB/s busiest: idle under 1% of it; the floor is 1% of NDR's
	// 400 Gb/s = 50 GB/s.
	if f.IdleBelowBytesPerSecond != 0.4e9 || f.FloorBytesPerSecond != 0.5e9 {
		t.Errorf("idle below %g, floor %g: want 4e8, 5e8", f.IdleBelowBytesPerSecond, f.FloorBytesPerSecond)
	}
	want := map[string][]string{
		"1": {"mlx5_3:1"}, "2": {"mlx5_4:1"}, "3": {"mlx5_5:1"},
		"4": {"mlx5_6:1"}, "5": {"mlx5_9:1"}, "6": {"mlx5_10:1"}, "7": {"mlx5_11:1"},
	}
	if got := idleByGPU(f); !equalIdle(got, want) {
		t.Errorf("idle ports by GPU %v, want %v", got, want)
	}
	if len(f.GPUs) != 8 {
		t.Errorf("%d GPU entries, want one per GPU (8): %+v", len(f.GPUs), f.GPUs)
	}
	if got := storageFlagged(f); len(got) != 0 {
		t.Errorf("storage ports flagged %v, want none", got)
	}
	if len(f.Degraded) != 0 {
		t.Errorf("degraded %q", f.Degraded)
	}
	if p := portOf(t, f, "mlx5_0:1"); p.BytesPerSecond == nil || *p.BytesPerSecond != 40e9 || p.Idle || !slices.Equal(p.GPUs, []int{0}) {
		t.Errorf("mlx5_0:1 %+v: want 40 GB/s, GPU 0, not idle", p)
	}

	// Only GPUs 0-3 busy: GPUs 4-7's NICs are idle too, but not theirs
	// to report.
	f = r.run([]int{0, 1, 2, 3}, map[string]float64{"mlx5_0": 40e9}, nil)
	want = map[string][]string{"1": {"mlx5_3:1"}, "2": {"mlx5_4:1"}, "3": {"mlx5_5:1"}}
	if got := idleByGPU(f); !equalIdle(got, want) {
		t.Errorf("GPUs 0-3 busy: idle ports by GPU %v, want %v", got, want)
	}

	var table bytes.Buffer
	if err := audit.WriteTable(&table, audit.Report{Schema: audit.Schema, Processes: []audit.Process{}, Fabric: &f}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "GPU 1: leaves compute port(s) mlx5_3:1 idle") ||
		!slices.ContainsFunc(strings.Split(table.String(), "\n"), func(l string) bool {
			return strings.Join(strings.Fields(l), " ") == "mlx5_3:1 compute 1 1.0 kB/s idle"
		}) {
		t.Errorf("table lacks GPU 1's idle mlx5_3:1:\n%s", table.String())
	}
	var js bytes.Buffer
	if err := audit.WriteJSON(&js, audit.Report{Schema: audit.Schema, Fabric: &f}); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Fabric struct {
			GPUs []struct {
				GPUs []int    `json:"gpus"`
				Idle []string `json:"idle"`
			} `json:"gpus"`
		} `json:"fabric"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Fabric.GPUs) != 4 || !slices.Equal(back.Fabric.GPUs[1].Idle, []string{"mlx5_3:1"}) {
		t.Errorf("JSON fabric %+v (%v):\n%s", back.Fabric, err, js.String())
	}
}

func equalIdle(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// A storage port transmitting as much as the compute ports (NCCL_IB_HCA
// left unset, so NCCL uses the storage NICs too) is flagged; one at a
// twentieth of it (checkpoint trickle) is not; balanced compute ports
// leave none idle.
func TestFabricStorageNICBusy(t *testing.T) {
	t.Parallel()
	r := newFabricRig(t)
	traffic := map[string]float64{"mlx5_2": 25e9, "mlx5_7": 1e9}
	for _, d := range dgxCompute {
		traffic[d] = 20e9
	}
	f := r.run(allGPUs, traffic, nil)
	if got := storageFlagged(f); !slices.Equal(got, []string{"mlx5_2:1"}) {
		t.Errorf("storage ports flagged %v, want [mlx5_2:1]", got)
	}
	if f.StorageFromBytesPerSecond != 20e9 {
		t.Errorf("storage threshold %g, want the median compute rate 2e10", f.StorageFromBytesPerSecond)
	}
	if got := idleByGPU(f); len(got) != 0 {
		t.Errorf("idle ports %v, want none", got)
	}
}

// An idle fabric reports nothing: mlx5_0 sends 1 MB/s (a thousand
// times the others' 1 kB/s of management datagrams, but under the 500
// MB/s floor), so the ports under 1% of it are not called idle. Busy
// compute ports with no GPU busy report nothing either.
func TestFabricIdle(t *testing.T) {
	t.Parallel()
	r := newFabricRig(t)
	f := r.run(allGPUs, map[string]float64{"mlx5_0": 1e6}, nil)
	if f.Active || len(idleByGPU(f)) != 0 || len(storageFlagged(f)) != 0 {
		t.Errorf("idle fabric: active %v, idle %v, storage %v: want nothing", f.Active, idleByGPU(f), storageFlagged(f))
	}
	f = r.run(nil, map[string]float64{"mlx5_0": 40e9, "mlx5_1": 40e9}, nil)
	if f.Active || len(idleByGPU(f)) != 0 || len(storageFlagged(f)) != 0 {
		t.Errorf("no GPU busy: active %v, idle %v, storage %v: want nothing", f.Active, idleByGPU(f), storageFlagged(f))
	}
}

// A counter that went down (reset), a port that vanished and a counter
// that cannot be read are each degraded, named with device and file, and
// never judged; the other ports still are.
func TestFabricDegraded(t *testing.T) {
	t.Parallel()
	r := newFabricRig(t)
	ib := filepath.Join(r.root, "sys/class/infiniband")
	f := r.run(allGPUs, map[string]float64{"mlx5_0": 40e9}, func() {
		r.set("mlx5_4", 12345) // reset: below the first sample's value
		if err := os.RemoveAll(filepath.Join(ib, "mlx5_9")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ib, "mlx5_10/ports/1/counters/port_xmit_data"), []byte("garbage\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	wants := []string{
		"mlx5_4:1: " + filepath.Join(ib, "mlx5_4/ports/1/counters/port_xmit_data") + " went down from 1000000000000 to 12345",
		"mlx5_9:1: gone between the samples",
		"second sample: " + filepath.Join(ib, "mlx5_10/ports/1/counters/port_xmit_data") + ": malformed counter",
		"mlx5_10:1: its transmit data counter " + filepath.Join(ib, "mlx5_10/ports/1/counters/port_xmit_data") + " could not be read in the second sample",
	}
	for _, w := range wants {
		if !slices.ContainsFunc(f.Degraded, func(d string) bool { return strings.Contains(d, w) }) {
			t.Errorf("degraded %q: want one with %q", f.Degraded, w)
		}
	}
	for _, name := range []string{"mlx5_4:1", "mlx5_9:1", "mlx5_10:1"} {
		if p := portOf(t, f, name); p.BytesPerSecond != nil || p.Idle {
			t.Errorf("%s %+v: want no rate, not idle", name, p)
		}
	}
	want := map[string][]string{"1": {"mlx5_3:1"}, "3": {"mlx5_5:1"}, "4": {"mlx5_6:1"}, "7": {"mlx5_11:1"}}
	if got := idleByGPU(f); !equalIdle(got, want) {
		t.Errorf("idle ports by GPU %v, want %v", got, want)
	}
}

// A 32-bit counter at its maximum is saturated, not a rate; samples that
// are not apart give no rate; GPUs paired with the same NIC are one
// entry. Hand-made samples, FabricBalance alone.
func TestFabricBalanceEdges(t *testing.T) {
	t.Parallel()
	n := topology.Node{
		NICs: []topology.NIC{
			{Name: "mlx5_0", RDMADevice: "mlx5_0", Role: topology.RoleCompute},
			{Name: "mlx5_1", RDMADevice: "mlx5_1", Role: topology.RoleCompute},
		},
		Pairs: []topology.Pair{{GPU: 0, NICs: []string{"mlx5_0"}}, {GPU: 1, NICs: []string{"mlx5_0"}}, {GPU: 2, NICs: []string{"mlx5_1"}}},
	}
	t0 := time.Unix(1000, 0)
	sample := func(at time.Time, w0, w1 uint64) audit.FabricSample {
		return audit.FabricSample{At: at, Ports: []audit.PortCounter{
			{Device: "mlx5_0", Port: 1, State: "ACTIVE", Active: true, RateGbps: 400, File: "c/mlx5_0", Words: w0},
			{Device: "mlx5_1", Port: 1, State: "ACTIVE", Active: true, RateGbps: 400, File: "c/mlx5_1", Words: w1},
		}}
	}
	uses := []audit.Use{{PID: 1, GPUs: []int{0, 1, 2}}}
	f := audit.FabricBalance(n, uses, sample(t0, 0, 0), sample(t0.Add(10*time.Second), 0, 100e9))
	if len(f.GPUs) != 2 || !slices.Equal(f.GPUs[0].GPUs, []int{0, 1}) || !slices.Equal(f.GPUs[0].Idle, []string{"mlx5_0:1"}) {
		t.Errorf("GPUs %+v: want GPUs 0,1 sharing mlx5_0:1, idle", f.GPUs)
	}
	f = audit.FabricBalance(n, uses, sample(t0, 5, 0), sample(t0.Add(10*time.Second), 4294967295, 100e9))
	if !slices.ContainsFunc(f.Degraded, func(d string) bool { return strings.Contains(d, "mlx5_0:1: c/mlx5_0 holds 4294967295") }) {
		t.Errorf("saturated: degraded %q", f.Degraded)
	}
	// A link rate unknown (0): the floor is 1 Gb/s = 125 MB/s, so 1 MB/s
	// on mlx5_1 is no traffic and mlx5_0 is not called idle.
	unknown := func(s audit.FabricSample) audit.FabricSample {
		for i := range s.Ports {
			s.Ports[i].RateGbps = 0
		}
		return s
	}
	f = audit.FabricBalance(n, uses, unknown(sample(t0, 0, 0)), unknown(sample(t0.Add(10*time.Second), 0, 2.5e6)))
	if f.Active || f.FloorBytesPerSecond != 125e6 || len(f.GPUs[0].Idle) != 0 {
		t.Errorf("unknown link rate, 1 MB/s: active %v, floor %g, idle %v: want not active, 1.25e8, none", f.Active, f.FloorBytesPerSecond, f.GPUs[0].Idle)
	}
	f = audit.FabricBalance(n, uses, sample(t0, 0, 0), sample(t0, 0, 100e9))
	if len(f.Degraded) != 2 || f.Active {
		t.Errorf("samples 0 s apart: degraded %q, active %v: want both ports degraded, nothing judged", f.Degraded, f.Active)
	}
}
