package exporter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
)

// dgx-h100 (internal/testutil/fakesys/testdata/machines/dgx-h100.yaml): 8 H100 on
// NVSwitch with 18 NVLinks each, GPU n in one PCIe switch with one compute
// ConnectX-7 (NDR 400 Gb/s InfiniBand), two dual-port storage ConnectX-7
// at 200 Gb/s in RoCE mode. The values below are written from that spec.
var dgxH100 = []struct {
	bus, numa, nic, nicBus, netdev string
}{
	{"0000:1b:00.0", "0", "mlx5_0", "0000:18:00.0", "ibp24s0"},
	{"0000:43:00.0", "0", "mlx5_3", "0000:40:00.0", "ibp64s0"},
	{"0000:52:00.0", "0", "mlx5_4", "0000:4f:00.0", "ibp79s0"},
	{"0000:61:00.0", "0", "mlx5_5", "0000:5e:00.0", "ibp94s0"},
	{"0000:9d:00.0", "1", "mlx5_6", "0000:9a:00.0", "ibp154s0"},
	{"0000:c3:00.0", "1", "mlx5_9", "0000:c0:00.0", "ibp192s0"},
	{"0000:d1:00.0", "1", "mlx5_10", "0000:ce:00.0", "ibp206s0"},
	{"0000:df:00.0", "1", "mlx5_11", "0000:dc:00.0", "ibp220s0"},
}

// scrapeOK scrapes h and fails the test unless it answers 200.
func scrapeOK(t *testing.T, h http.Handler) scrapeResult {
	t.Helper()
	r := scrape(t, h)
	if r.code != 200 {
		t.Fatalf("status %d", r.code)
	}
	return r
}

// wantSample is one expected sample: name{labels} = want.
type wantSample struct {
	name   string
	labels map[string]string
	want   float64
}

// expect checks the value of each sample (a missing one fails the test).
func (r scrapeResult) expect(t *testing.T, samples []wantSample) {
	t.Helper()
	for _, c := range samples {
		if got := r.must(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
}

func TestDGXH100(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
	eq := func(name string, labels map[string]string, want float64) {
		t.Helper()
		r.expect(t, []wantSample{{name, labels, want}})
	}
	for _, c := range []string{"nvml", "rdma", "topology"} {
		eq("gpuaffinity_scrape_collector_success", l("collector", c), 1)
	}
	eq("gpuaffinity_nvml_up", nil, 1)
	eq("gpuaffinity_topology_aligned", nil, 1)
	for i, g := range dgxH100 {
		gpu := fmt.Sprint(i)
		eq("gpuaffinity_gpu_info", l("gpu", gpu, "bus_id", g.bus, "numa_node", g.numa,
			"uuid", fmt.Sprintf("GPU-dgxh100-0000-0000-0000-%012d", i), "model", "NVIDIA H100 80GB HBM3"), 1)
		eq("gpuaffinity_gpu_up", l("gpu", gpu), 1)
		// 32.0 GT/s x16 links: PCIe gen 5, 16 lanes.
		eq("gpuaffinity_gpu_pcie_link_generation", l("gpu", gpu), 5)
		eq("gpuaffinity_gpu_pcie_link_max_generation", l("gpu", gpu), 5)
		eq("gpuaffinity_gpu_pcie_link_width", l("gpu", gpu), 16)
		eq("gpuaffinity_gpu_pcie_link_max_width", l("gpu", gpu), 16)
		eq("gpuaffinity_gpu_pcie_replays_total", l("gpu", gpu), 0)
		eq("gpuaffinity_gpu_ecc_uncorrected_volatile_errors_total", l("gpu", gpu), 0)
		eq("gpuaffinity_gpu_remapped_rows_pending", l("gpu", gpu), 0)
		eq("gpuaffinity_gpu_remapped_rows_failure", l("gpu", gpu), 0)
		eq("gpuaffinity_gpu_retired_pages", l("gpu", gpu), 0)
		// NVSwitch GPUs: fabric registration completed with status 0.
		eq("gpuaffinity_gpu_fabric_state", l("gpu", gpu), 3)
		eq("gpuaffinity_gpu_fabric_status", l("gpu", gpu), 0)
		eq("gpuaffinity_nvlink_visible", l("gpu", gpu), 1)
		eq("gpuaffinity_nvlink_expected_links", l("gpu", gpu), 18)
		if n := len(r.find("gpuaffinity_nvlink_up", l("gpu", gpu))); n != 18 {
			t.Errorf("GPU %d: %d nvlink_up series, want 18", i, n)
		}
		for link := range 18 {
			eq("gpuaffinity_nvlink_up", l("gpu", gpu, "link", fmt.Sprint(link)), 1)
		}
		// The error counters are the GPU's, one series each, no link.
		for _, name := range []string{"gpuaffinity_nvlink_crc_flit_errors_total", "gpuaffinity_nvlink_crc_data_errors_total",
			"gpuaffinity_nvlink_replay_errors_total", "gpuaffinity_nvlink_recovery_errors_total"} {
			if n := len(r.find(name, l("gpu", gpu))); n != 1 {
				t.Errorf("GPU %d: %d %s series, want 1", i, n, name)
			}
			eq(name, l("gpu", gpu), 0)
		}
		eq("gpuaffinity_topology_pair_info", l("gpu", gpu, "nic", g.nic, "class", "PIX"), 1)
		eq("gpuaffinity_topology_best_nic_class", l("gpu", gpu), 1)
		// Compute ports: NDR 400 Gb/s = 5e10 bytes/s, ACTIVE, LinkUp.
		port := l("device", g.nic, "port", "1")
		eq("gpuaffinity_rdma_rate_bytes_per_second", port, 5e10)
		eq("gpuaffinity_rdma_state_id", port, 4)
		eq("gpuaffinity_rdma_physical_state_id", port, 5)
		eq("gpuaffinity_rdma_counters_disabled", port, 0)
		eq("gpuaffinity_rdma_symbol_error_total", port, 0)
		eq("gpuaffinity_rdma_info", l("device", g.nic, "port", "1", "link_layer", "InfiniBand",
			"fabric", "infiniband", "role", "compute", "netdev", g.netdev, "bus_id", g.nicBus, "firmware", "28.39.1002"), 1)
		eq("gpuaffinity_rdma_device_present", l("device", g.nic), 1)
	}
	if n := len(r.find("gpuaffinity_gpu_up", nil)); n != 8 {
		t.Errorf("%d gpu_up series, want 8", n)
	}
	// Storage ports, as shipped: port 1 InfiniBand NDR, port 2 400 GbE
	// RoCE, role storage.
	eq("gpuaffinity_rdma_rate_bytes_per_second", l("device", "mlx5_1", "port", "1"), 5e10)
	eq("gpuaffinity_rdma_info", l("device", "mlx5_1", "link_layer", "InfiniBand", "fabric", "infiniband", "role", "storage",
		"netdev", "ibp41s0f0", "bus_id", "0000:29:00.0"), 1)
	eq("gpuaffinity_rdma_info", l("device", "mlx5_2", "link_layer", "Ethernet", "fabric", "roce", "role", "storage",
		"netdev", "enp41s0f1np1", "bus_id", "0000:29:00.1"), 1)
	if n := len(r.find("gpuaffinity_rdma_info", nil)); n != 12 {
		t.Errorf("%d rdma_info series, want 12 (8 compute + 4 storage ports)", n)
	}
}

// h200-vm is the real capture of a one-GPU H200 KVM guest: NVML answers
// NOT_SUPPORTED for every NVLink.
func TestH200VMNVLinkNotVisible(t *testing.T) {
	root, node := fixture(t, fakesys.H200VM)
	e := newExporter(t, root, node, replay(t, root))
	r := scrape(t, e.Handler())
	if v := r.must(t, "gpuaffinity_nvlink_visible", l("gpu", "0")); v != 0 {
		t.Errorf("nvlink_visible = %g, want 0", v)
	}
	if v := r.must(t, "gpuaffinity_nvlink_expected_links", l("gpu", "0")); v != 0 {
		t.Errorf("nvlink_expected_links = %g, want 0", v)
	}
	if ms := r.find("gpuaffinity_nvlink_up", nil); len(ms) != 0 {
		t.Errorf("%d nvlink_up series on a VM, want none", len(ms))
	}
	if v := r.must(t, "gpuaffinity_gpu_up", l("gpu", "0")); v != 1 {
		t.Errorf("gpu_up = %g, want 1", v)
	}
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "nvml")); v != 1 {
		t.Errorf("nvml success = %g, want 1", v)
	}
}

// The agent's own metrics come from State and the XID counter.
func TestAgentMetrics(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var xid XIDCounter
	xid.Add(1, 79, t0.Add(time.Minute))
	xid.Add(1, 79, t0.Add(2*time.Minute))
	xid.Add(1, 48, t0.Add(90*time.Second))
	st := State{
		Node: node,
		Discovery: DiscoveryStatus{
			Last: t0.Add(time.Hour), LastSuccess: t0, OK: false,
			Duration: 1500 * time.Millisecond, Err: "pci: boom",
		},
		Health: &health.Report{Healthy: false, Time: t0.Add(30 * time.Minute), Results: []health.Result{
			{ID: "gpu.count", Verdict: health.Pass},
			{ID: "nic.rate", Verdict: health.Fail},
			{ID: "topo.gdr", Verdict: health.Warn},
		}},
		ExpectedNVLinks: map[int]int{3: 16},
		StateWriteOK:    false,
	}
	e := newExporter(t, root, node, replay(t, root), func(o *Options) {
		o.State = func() State { return st }
		o.XID = &xid
	})
	r := scrape(t, e.Handler())
	r.expect(t, []wantSample{
		{"gpuaffinity_discovery_success", nil, 0},
		{"gpuaffinity_discovery_last_timestamp_seconds", nil, float64(t0.Unix() + 3600)},
		{"gpuaffinity_discovery_last_success_timestamp_seconds", nil, float64(t0.Unix())},
		{"gpuaffinity_discovery_duration_seconds", nil, 1.5},
		{"gpuaffinity_state_write_success", nil, 0},
		{"gpuaffinity_health_healthy", nil, 0},
		{"gpuaffinity_health_last_run_timestamp_seconds", nil, float64(t0.Unix() + 1800)},
		{"gpuaffinity_health_check_failed", l("check", "gpu.count"), 0},
		{"gpuaffinity_health_check_failed", l("check", "nic.rate"), 1},
		{"gpuaffinity_health_check_failed", l("check", "topo.gdr"), 0},
		{"gpuaffinity_gpu_xid_errors_total", l("gpu", "1", "xid", "79"), 2},
		{"gpuaffinity_gpu_xid_errors_total", l("gpu", "1", "xid", "48"), 1},
		{"gpuaffinity_gpu_last_xid_timestamp_seconds", l("gpu", "1"), float64(t0.Unix() + 120)},
		{"gpuaffinity_nvlink_expected_links", l("gpu", "3"), 16},
		{"gpuaffinity_nvlink_expected_links", l("gpu", "2"), 18},
	})
	if _, ok := r.value(t, "gpuaffinity_gpu_last_xid_timestamp_seconds", l("gpu", "0")); ok {
		t.Error("GPU 0 has no XID but a last_xid timestamp")
	}
	if mf := r.mfs["gpuaffinity_build_info"]; mf == nil || len(mf.GetMetric()) != 1 {
		t.Error("no gpuaffinity_build_info")
	}
}

// Before the first discovery: the topology collector fails, NVML still
// renders the GPUs it answers for, health is 0.
func TestNoDiscoveryYet(t *testing.T) {
	root, _ := fixture(t, "dgx-h100")
	r := scrapeOK(t, newExporter(t, root, nil, replay(t, root)).Handler())
	for c, want := range map[string]float64{"nvml": 1, "rdma": 1, "topology": 0} {
		if got := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", c)); got != want {
			t.Errorf("%s success = %g, want %g", c, got, want)
		}
	}
	if n := len(r.find("gpuaffinity_gpu_up", l())); n != 8 {
		t.Errorf("%d gpu_up series, want 8 (from NVML alone)", n)
	}
	if v := r.must(t, "gpuaffinity_gpu_info", l("gpu", "5")); v != 1 {
		t.Errorf("gpu_info = %g", v)
	}
	if got := r.must(t, "gpuaffinity_gpu_info", l("gpu", "5", "bus_id", "0000:c3:00.0", "numa_node", "")); got != 1 {
		t.Error("GPU 5's info from NVML alone should name its bus id and an empty numa_node")
	}
	if got := r.must(t, "gpuaffinity_health_healthy", nil); got != 0 {
		t.Errorf("health_healthy = %g before the first gate, want 0", got)
	}
	if len(r.find("gpuaffinity_topology_aligned", nil)) != 0 {
		t.Error("topology_aligned without a discovery")
	}
}

// dgx-h100-faults (internal/testutil/fakesys/testdata/machines/dgx-h100-faults.yaml)
// is dgx-h100 with: GPU 2's NVLink 5 down after CRC errors (crc_flit 12,
// crc_data 1, replay 3, recovery 2), GPU 4 waiting for a row remap (1
// uncorrectable row), GPU 7 lost (its handle answers GPU_IS_LOST, at
// discovery too), and mlx5_4 port 1 DOWN/Polling with counters (symbol
// errors 117, 3 link downs, 9876543210 and 1234567890 data words received
// and sent, 24681357 packets received) and hw_counters (out_of_sequence 41,
// duplicate_request 7, rnr_nak_retry_err 19).
func TestDGXH100Faults(t *testing.T) {
	root, node := fixture(t, "dgx-h100-faults")
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
	r.expect(t, []wantSample{
		// A lost GPU is the GPU's failure, not the collector's.
		{"gpuaffinity_scrape_collector_success", l("collector", "nvml"), 1},
		{"gpuaffinity_scrape_collector_success", l("collector", "rdma"), 1},
		{"gpuaffinity_nvml_up", nil, 1},
		{"gpuaffinity_gpu_up", l("gpu", "7"), 0},
		{"gpuaffinity_gpu_info", l("gpu", "7", "bus_id", "0000:df:00.0", "numa_node", "1"), 1},
		{"gpuaffinity_gpu_up", l("gpu", "6"), 1},
		{"gpuaffinity_gpu_up", l("gpu", "2"), 1},
		{"gpuaffinity_nvlink_up", l("gpu", "2", "link", "5"), 0},
		{"gpuaffinity_nvlink_up", l("gpu", "2", "link", "4"), 1},
		{"gpuaffinity_nvlink_expected_links", l("gpu", "2"), 18},
		// Summed over the GPU's 18 links: link 5's counts, the others 0
		// (the fixture's spec).
		{"gpuaffinity_nvlink_crc_flit_errors_total", l("gpu", "2"), 12},
		{"gpuaffinity_nvlink_crc_data_errors_total", l("gpu", "2"), 1},
		{"gpuaffinity_nvlink_replay_errors_total", l("gpu", "2"), 3},
		{"gpuaffinity_nvlink_recovery_errors_total", l("gpu", "2"), 2},
		{"gpuaffinity_nvlink_crc_flit_errors_total", l("gpu", "3"), 0},
		{"gpuaffinity_nvlink_recovery_errors_total", l("gpu", "0"), 0},
		{"gpuaffinity_gpu_remapped_rows_pending", l("gpu", "4"), 1},
		{"gpuaffinity_gpu_remapped_rows_uncorrectable", l("gpu", "4"), 1},
		{"gpuaffinity_gpu_remapped_rows_pending", l("gpu", "3"), 0},
		{"gpuaffinity_rdma_state_id", l("device", "mlx5_4", "port", "1"), 1},
		{"gpuaffinity_rdma_physical_state_id", l("device", "mlx5_4", "port", "1"), 2},
		// The rate file of a down InfiniBand port: 10 Gb/sec (4X SDR).
		{"gpuaffinity_rdma_rate_bytes_per_second", l("device", "mlx5_4", "port", "1"), 1.25e9},
		{"gpuaffinity_rdma_symbol_error_total", l("device", "mlx5_4", "port", "1"), 117},
		{"gpuaffinity_rdma_link_downed_total", l("device", "mlx5_4", "port", "1"), 3},
		{"gpuaffinity_rdma_port_data_received_bytes_total", l("device", "mlx5_4", "port", "1"), 4 * 9876543210},
		{"gpuaffinity_rdma_port_data_transmitted_bytes_total", l("device", "mlx5_4", "port", "1"), 4 * 1234567890},
		{"gpuaffinity_rdma_port_packets_received_total", l("device", "mlx5_4", "port", "1"), 24681357},
		{"gpuaffinity_rdma_out_of_sequence_packets_received_total", l("device", "mlx5_4", "port", "1"), 41},
		{"gpuaffinity_rdma_duplicate_requests_packets_total", l("device", "mlx5_4", "port", "1"), 7},
		{"gpuaffinity_rdma_rnr_nak_retry_packets_received_total", l("device", "mlx5_4", "port", "1"), 19},
		{"gpuaffinity_rdma_out_of_sequence_packets_received_total", l("device", "mlx5_5", "port", "1"), 0},
		// mlx5 hw_counters/lifespan is 10 ms.
		{"gpuaffinity_rdma_lifespan_seconds", l("device", "mlx5_4", "port", "1"), 0.01},
		{"gpuaffinity_rdma_state_id", l("device", "mlx5_5", "port", "1"), 4},
	})
	if n := len(r.find("gpuaffinity_nvlink_up", l("gpu", "2"))); n != 18 {
		t.Errorf("GPU 2: %d nvlink_up series, want 18 (the down link stays)", n)
	}
	for _, name := range []string{"gpuaffinity_gpu_pcie_link_width", "gpuaffinity_gpu_remapped_rows_pending"} {
		if _, ok := r.value(t, name, l("gpu", "7")); ok {
			t.Errorf("%s for the lost GPU 7", name)
		}
	}
}

// A discovered GPU NVML no longer lists under its bus id, while NVML has
// another GPU at its index (renumbered GPUs): the discovered one is down,
// the stranger is not sent under the same labels, the collector says so.
func TestRenumberedGPU(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	n := *node
	n.GPUs = slices.Clone(node.GPUs)
	n.GPUs[3].BusID = "0000:ee:00.0"
	e := newExporter(t, root, &n, replay(t, root))
	if _, err := e.Gatherer().Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
	r := scrape(t, e.Handler())
	if v := r.must(t, "gpuaffinity_gpu_up", l("gpu", "3")); v != 0 {
		t.Errorf("gpu_up{gpu=3} = %g, want 0", v)
	}
	if v := r.must(t, "gpuaffinity_gpu_info", l("gpu", "3", "bus_id", "0000:ee:00.0")); v != 1 {
		t.Errorf("gpu_info = %g", v)
	}
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "nvml")); v != 0 {
		t.Errorf("nvml success = %g, want 0", v)
	}
	if v := r.must(t, "gpuaffinity_gpu_up", l("gpu", "4")); v != 1 {
		t.Errorf("gpu_up{gpu=4} = %g, want 1", v)
	}
}

// A GPU's error total is absent, not lowered, in a scrape where one of
// its links' counts is unreadable: a lower sum would read as a counter
// reset, and rate() as a burst of errors. dgx-h100-faults with GPU 2's
// link 7 answering ERROR_NOT_SUPPORTED for its CRC data count.
func TestNVLinkErrorTotalUnreadableLink(t *testing.T) {
	root, node := fixture(t, "dgx-h100-faults")
	path := filepath.Join(root, "nvml.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	dev := doc["devices"].([]any)[2].(map[string]any)
	link := dev["nvlinks"].([]any)[7].(map[string]any)
	link["errors"].(map[string]any)["crc_data"] = map[string]any{"return": "ERROR_NOT_SUPPORTED"}
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
	if got := r.find("gpuaffinity_nvlink_crc_data_errors_total", l("gpu", "2")); len(got) != 0 {
		t.Errorf("GPU 2's CRC data total with link 7's count unreadable: %v, want no series", got)
	}
	r.expect(t, []wantSample{
		{"gpuaffinity_nvlink_crc_flit_errors_total", l("gpu", "2"), 12},
		{"gpuaffinity_nvlink_replay_errors_total", l("gpu", "2"), 3},
		{"gpuaffinity_nvlink_crc_data_errors_total", l("gpu", "3"), 0},
		{"gpuaffinity_nvlink_up", l("gpu", "2", "link", "7"), 1},
	})
}
