package exporter

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// promSeries writes a series as PromQL and promtool write one:
// name{label="value",...}, labels sorted.
func promSeries(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(labels[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// with returns a copy of m with kv added.
func with(m map[string]string, kv ...string) map[string]string {
	out := l(kv...)
	for k, v := range m {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out
}

// joinExamples returns the PromQL blocks of docs/metrics.md's section
// "Joining with dcgm-exporter and node_exporter", in order.
func joinExamples(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Joining with dcgm-exporter and node_exporter\n")
	if start < 0 {
		t.Fatal(`docs/metrics.md has no section "Joining with dcgm-exporter and node_exporter"`)
	}
	section := doc[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(section, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

// promtoolTest is the part of promtool's unit test file (promtool test
// rules) this test writes.
type promtoolTest struct {
	RuleFiles          []string       `json:"rule_files"`
	EvaluationInterval string         `json:"evaluation_interval"`
	Tests              []promtoolCase `json:"tests"`
}

type promtoolCase struct {
	Interval    string             `json:"interval"`
	InputSeries []promtoolSeries   `json:"input_series"`
	ExprTests   []promtoolExprTest `json:"promql_expr_test"`
}

type promtoolSeries struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type promtoolExprTest struct {
	Expr     string           `json:"expr"`
	EvalTime string           `json:"eval_time"`
	Samples  []promtoolSample `json:"exp_samples"`
}

type promtoolSample struct {
	Labels string  `json:"labels"`
	Value  float64 `json:"value"`
}

// The PromQL examples of docs/metrics.md's join section give, on
// Prometheus's own engine (promtool test rules), the answers written
// below by hand. The agent's series are a scrape of dgx-h100-faults, as
// Prometheus would store them behind this repository's ServiceMonitor
// (job, instance, node). By its spec
// (internal/testutil/fakesys/testdata/machines/dgx-h100-faults.yaml) GPU 2's
// NVLink 5 is down and its own NIC mlx5_4 too, so GPU 2 pairs with GPU
// 0's mlx5_0 at NODE, while GPU 0 is PIX. dcgm-exporter's series are
// written by hand in its format (render_metrics.go's gpuMetricsFormat:
// gpu, UUID, pci_bus_id, device, modelName, Hostname, and a pod's
// namespace and pod) for GPUs 0 and 2; node_exporter's as kube-prometheus
// stores them (instance is the node name).
func TestJoinExamples(t *testing.T) {
	bin := needBinary(t, "promtool")
	t.Setenv("NODE_NAME", "")
	root, node := fixture(t, "dgx-h100-faults")
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())

	const host = "dgx-h100-01" // the fixture's (dgx-h100-faults extends dgx-h100.yaml)
	var input []promtoolSeries
	target := l("job", "gpuaffinity-agent", "instance", "10.0.0.1:19400", "node", host)
	for _, name := range []string{"gpuaffinity_topology_pair_info", "gpuaffinity_topology_best_nic_class", "gpuaffinity_gpu_info",
		"gpuaffinity_nvlink_up", "gpuaffinity_nvlink_expected_links", "gpuaffinity_rdma_info"} {
		ms := r.find(name, nil)
		if len(ms) == 0 {
			t.Fatalf("no %s in the scrape", name)
		}
		for _, m := range ms {
			v := sampleValue(m)
			input = append(input, promtoolSeries{promSeries(name, with(labelsOf(m), "job", target["job"],
				"instance", target["instance"], "node", target["node"])), fmt.Sprintf("%g+0x80", v)})
		}
	}
	// dcgm-exporter on GPU 0 (40 %) and GPU 2 (90 %, held by pod
	// ml/train-0).
	dcgm0 := l("gpu", "0", "UUID", "GPU-dgxh100-0000-0000-0000-000000000000", "pci_bus_id", "00000000:1B:00.0",
		"device", "nvidia0", "modelName", "NVIDIA H100 80GB HBM3", "Hostname", host,
		"job", "dcgm-exporter", "instance", "10.0.7.3:9400")
	dcgm2 := l("gpu", "2", "UUID", "GPU-dgxh100-0000-0000-0000-000000000002", "pci_bus_id", "00000000:52:00.0",
		"device", "nvidia2", "modelName", "NVIDIA H100 80GB HBM3", "Hostname", host,
		"namespace", "ml", "pod", "train-0", "job", "dcgm-exporter", "instance", "10.0.7.3:9400")
	// node_exporter: mlx5_0 (the compute NIC of GPUs 0 and 2) receives
	// 61440 bytes every 15 s, 4096 B/s; mlx5_1 port 1 (storage) 2048 B/s.
	// Powers of two, so that rate's floating point is exact.
	ne := func(device string) map[string]string {
		return l("device", device, "port", "1", "job", "node-exporter", "instance", host)
	}
	input = append(input,
		promtoolSeries{promSeries("DCGM_FI_DEV_GPU_UTIL", dcgm0), "40+0x80"},
		promtoolSeries{promSeries("DCGM_FI_DEV_GPU_UTIL", dcgm2), "90+0x80"},
		promtoolSeries{promSeries("DCGM_FI_DEV_FB_USED", dcgm0), "1000+0x80"},
		promtoolSeries{promSeries("DCGM_FI_DEV_FB_USED", dcgm2), "2000+0x80"},
		promtoolSeries{promSeries("node_infiniband_port_data_received_bytes_total", ne("mlx5_0")), "0+61440x80"},
		promtoolSeries{promSeries("node_infiniband_port_data_received_bytes_total", ne("mlx5_1")), "0+30720x80"},
	)

	// The answers, in the order of the examples.
	noName := func(m map[string]string, kv ...string) string { return promSeries("", with(m, kv...)) }
	want := [][]promtoolSample{
		// Utilisation with the GPU's pairing class.
		{{noName(dcgm0, "class", "PIX"), 40}, {noName(dcgm2, "class", "NODE"), 90}},
		// Busy and farther than a PCIe switch: GPU 2 (NODE, 90 %).
		{{promSeries("DCGM_FI_DEV_GPU_UTIL", dcgm2), 90}},
		// Its pod.
		{{promSeries("", l("namespace", "ml", "pod", "train-0")), 1}},
		// Framebuffer with the NUMA node (GPUs 0-3 on node 0).
		{{noName(dcgm0, "numa_node", "0"), 1000}, {noName(dcgm2, "numa_node", "0"), 2000}},
		// An NVLink down: GPU 2.
		{{promSeries("DCGM_FI_DEV_GPU_UTIL", dcgm2), 90}},
		// node_exporter's compute ports: mlx5_0 (ibp24s0), not mlx5_1.
		{{noName(ne("mlx5_0"), "node", host, "role", "compute", "netdev", "ibp24s0"), 4096}},
		// Per GPU: GPUs 0 and 2 share mlx5_0; the other compute NICs
		// have no node_exporter series here.
		{
			{promSeries("", l("node", host, "gpu", "0", "UUID", "GPU-dgxh100-0000-0000-0000-000000000000")), 4096},
			{promSeries("", l("node", host, "gpu", "2", "UUID", "GPU-dgxh100-0000-0000-0000-000000000002")), 4096},
		},
	}
	examples := joinExamples(t)
	if len(examples) != len(want) {
		t.Fatalf("docs/metrics.md has %d join examples, the test answers %d", len(examples), len(want))
	}
	tc := promtoolCase{Interval: "15s", InputSeries: input}
	for i, expr := range examples {
		tc.ExprTests = append(tc.ExprTests, promtoolExprTest{Expr: expr, EvalTime: "10m", Samples: want[i]})
	}
	b, err := json.MarshalIndent(promtoolTest{RuleFiles: []string{}, EvaluationInterval: "1m", Tests: []promtoolCase{tc}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// JSON is YAML.
	file := filepath.Join(t.TempDir(), "join_test.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "test", "rules", file).CombinedOutput()
	if err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}
