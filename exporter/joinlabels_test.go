package exporter

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
)

// joinLabels are the labels dcgm-exporter users join on, besides gpu
// (dcgm-exporter 4.5.3-4.8.2, internal/pkg/rendermetrics/render_metrics.go,
// gpuMetricsFormat; modelName as model_name, see gpulabels.go).
var joinLabels = []string{"UUID", "pci_bus_id", "model_name", "Hostname"}

// dgxH100Join is GPU n's join labels on dgx-h100, written from
// internal/testutil/fakesys/testdata/machines/dgx-h100.yaml (hostname dgx-h100-01;
// each GPU's uuid and name; its bdf, 0000:1b:00.0 for GPU 0) in
// dcgm-exporter's formats: pci_bus_id as NVML writes it,
// NVML_DEVICE_PCI_BUS_ID_FMT "%08X:%02X:%02X.0" (nvml.h). dcgm-exporter's
// own test data for a DGX H100 (internal/pkg/transformation/
// kubernetes_mig_test.go) lists the same eight GPUs as "00000000:1B:00.0"
// to "00000000:DF:00.0".
var dgxH100Join = func() []map[string]string {
	buses := []string{"00000000:1B:00.0", "00000000:43:00.0", "00000000:52:00.0", "00000000:61:00.0",
		"00000000:9D:00.0", "00000000:C3:00.0", "00000000:D1:00.0", "00000000:DF:00.0"}
	out := make([]map[string]string, len(buses))
	for i, b := range buses {
		out[i] = map[string]string{
			"UUID":       fmt.Sprintf("GPU-dgxh100-0000-0000-0000-%012d", i),
			"pci_bus_id": b,
			"model_name": "NVIDIA H100 80GB HBM3",
			"Hostname":   "dgx-h100-01",
		}
	}
	return out
}()

// joinOf returns the join labels of a series' labels.
func joinOf(ls map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range joinLabels {
		if v, ok := ls[k]; ok {
			out[k] = v
		}
	}
	return out
}

// Every series of a GPU carries the GPU's join labels, with the values of
// the fixture's layout, and no other series carries them.
func TestJoinLabelsDGXH100(t *testing.T) {
	t.Setenv("NODE_NAME", "") // Hostname: the fixture's
	root, node := fixture(t, "dgx-h100")
	var xid XIDCounter
	xid.Add(1, 79, time.Now())
	e := newExporter(t, root, node, replay(t, root), func(o *Options) { o.XID = &xid })
	r := scrapeOK(t, e.Handler())

	var gpuFamilies []string
	for _, name := range r.names("gpuaffinity_") {
		perGPU := false
		for _, m := range r.mfs[name].GetMetric() {
			ls := labelsOf(m)
			gpu, ok := ls["gpu"]
			if !ok {
				if j := joinOf(ls); len(j) > 0 {
					t.Errorf("%s%v has no gpu label but %v", name, ls, j)
				}
				continue
			}
			perGPU = true
			i, err := strconv.Atoi(gpu)
			if err != nil || i < 0 || i >= len(dgxH100Join) {
				t.Fatalf("%s%v: gpu %q", name, ls, gpu)
			}
			if d := cmp.Diff(dgxH100Join[i], joinOf(ls)); d != "" {
				t.Errorf("%s%v: join labels (-want +got):\n%s", name, ls, d)
			}
		}
		if perGPU {
			gpuFamilies = append(gpuFamilies, name)
		}
	}
	// docs/metrics.md: 18 gpu_* families of the nvml collector, 2 XID
	// families, 7 nvlink_*, 2 topology_* and 2 storage_* per GPU.
	if len(gpuFamilies) != 18+2+7+2+2 {
		t.Errorf("%d families with a gpu label, want 31: %v", len(gpuFamilies), gpuFamilies)
	}

	// gpu_info keeps its own labels, in the sysfs form.
	r.expect(t, []wantSample{{"gpuaffinity_gpu_info", l("gpu", "0", "uuid", "GPU-dgxh100-0000-0000-0000-000000000000",
		"bus_id", "0000:1b:00.0", "model", "NVIDIA H100 80GB HBM3", "numa_node", "0", "pci_bus_id", "00000000:1B:00.0"), 1}})
	if n := len(r.mfs["gpuaffinity_gpu_info"].GetMetric()[0].GetLabel()); n != 9 {
		t.Errorf("gpu_info has %d labels, want 9 (gpu, 4 join labels, uuid, bus_id, model, numa_node)", n)
	}
	// The exposition, as a join sees it (labels sorted by name).
	for _, want := range []string{
		`gpuaffinity_gpu_up{Hostname="dgx-h100-01",UUID="GPU-dgxh100-0000-0000-0000-000000000000",gpu="0",model_name="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:1B:00.0"} 1`,
		`gpuaffinity_nvlink_up{Hostname="dgx-h100-01",UUID="GPU-dgxh100-0000-0000-0000-000000000007",gpu="7",link="17",model_name="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:DF:00.0"} 1`,
		`gpuaffinity_gpu_xid_errors_total{Hostname="dgx-h100-01",UUID="GPU-dgxh100-0000-0000-0000-000000000001",gpu="1",model_name="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:43:00.0",xid="79"} 1`,
		`gpuaffinity_topology_pair_info{Hostname="dgx-h100-01",UUID="GPU-dgxh100-0000-0000-0000-000000000004",class="PIX",gpu="4",model_name="NVIDIA H100 80GB HBM3",nic="mlx5_6",pci_bus_id="00000000:9D:00.0"} 1`,
		`gpuaffinity_storage_nvme_pair_info{Hostname="dgx-h100-01",UUID="GPU-dgxh100-0000-0000-0000-000000000004",class="PIX",device="nvme6",gpu="4",model_name="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:9D:00.0"} 1`,
		// The RDMA series keep node_exporter's labels only.
		`gpuaffinity_rdma_symbol_error_total{device="mlx5_0",port="1"} 0`,
	} {
		if !slices.Contains(strings.Split(r.body, "\n"), want) {
			t.Errorf("no line %s", want)
		}
	}
}

// The Hostname label: Options.Hostname, else $NODE_NAME (as
// dcgm-exporter's internal/pkg/hostname getLocalHostname, and the
// spec.nodeName its DaemonSet puts there), else the root's
// proc/sys/kernel/hostname, else the discovery's hostname.
func TestJoinLabelsHostname(t *testing.T) {
	for _, c := range []struct {
		name, env, option string
		noFile, noNode    bool
		want              string
	}{
		{name: "the root's hostname", want: "dgx-h100-01"},
		{name: "NODE_NAME", env: "gpu-node-7", want: "gpu-node-7"},
		{name: "the option over NODE_NAME", env: "gpu-node-7", option: "rack3-n12", want: "rack3-n12"},
		{name: "the discovery's hostname", noFile: true, want: "dgx-h100-01"},
		{name: "none known", noFile: true, noNode: true, want: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("NODE_NAME", c.env)
			root, node := fixture(t, "dgx-h100")
			if c.noFile {
				if err := os.Remove(filepath.Join(root, "proc/sys/kernel/hostname")); err != nil {
					t.Fatal(err)
				}
			}
			if c.noNode {
				node = nil
			}
			var log bytes.Buffer
			e := newExporter(t, root, node, replay(t, root), func(o *Options) {
				o.Hostname = c.option
				o.Logger = slog.New(slog.NewTextHandler(&log, nil))
			})
			// Without the option, NODE_NAME or the root's file, New warns
			// that the label falls back to the discovery's (or nothing).
			if warned := strings.Contains(log.String(), "level=WARN msg=\"no host name for the GPU series' Hostname label"); warned != c.noFile {
				t.Errorf("warned %v, want %v; log:\n%s", warned, c.noFile, log.String())
			}
			r := scrapeOK(t, e.Handler())
			for _, name := range []string{"gpuaffinity_gpu_up", "gpuaffinity_nvlink_up", "gpuaffinity_gpu_info"} {
				ms := r.find(name, l("gpu", "2"))
				if len(ms) == 0 {
					t.Fatalf("no %s{gpu=2}", name)
				}
				for _, m := range ms {
					if got := labelsOf(m)["Hostname"]; got != c.want {
						t.Errorf("%s: Hostname %q, want %q", name, got, c.want)
					}
				}
			}
		})
	}
}

// Before the first discovery the GPUs NVML answers for have NVML's
// values; an XID of a GPU nobody knows has gpu and Hostname only.
func TestJoinLabelsWithoutDiscovery(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	root, _ := fixture(t, "dgx-h100")
	var xid XIDCounter
	xid.Add(9, 31, time.Now())
	e := newExporter(t, root, nil, replay(t, root), func(o *Options) { o.XID = &xid })
	r := scrapeOK(t, e.Handler())
	for i, want := range dgxH100Join {
		for _, name := range []string{"gpuaffinity_gpu_up", "gpuaffinity_gpu_info", "gpuaffinity_nvlink_up"} {
			ms := r.find(name, l("gpu", itoa(i)))
			if len(ms) == 0 {
				t.Fatalf("no %s{gpu=%d}", name, i)
			}
			for _, m := range ms {
				if d := cmp.Diff(want, joinOf(labelsOf(m))); d != "" {
					t.Errorf("%s{gpu=%d}: join labels (-want +got):\n%s", name, i, d)
				}
			}
		}
	}
	want := l("UUID", "", "pci_bus_id", "", "model_name", "", "Hostname", "dgx-h100-01")
	ms := r.find("gpuaffinity_gpu_xid_errors_total", l("gpu", "9", "xid", "31"))
	if len(ms) != 1 {
		t.Fatalf("%d XID series of GPU 9, want 1", len(ms))
	}
	if d := cmp.Diff(want, joinOf(labelsOf(ms[0]))); d != "" {
		t.Errorf("XID of an unknown GPU: join labels (-want +got):\n%s", d)
	}
}

// pciBusID writes NVML's form, NVML_DEVICE_PCI_BUS_ID_FMT
// "%08X:%02X:%02X.0" (nvml.h).
func TestPCIBusID(t *testing.T) {
	for in, want := range map[string]string{
		"0000:1b:00.0":     "00000000:1B:00.0",
		"0000:df:00.0":     "00000000:DF:00.0",
		"0001:00:00.0":     "00000001:00:00.0",
		"10000:e1:00.0":    "00010000:E1:00.0", // a VMD domain (5 digits in sysfs)
		"00000000:1B:00.0": "00000000:1B:00.0",
		"":                 "",
		"1b:00.0":          "1B:00.0", // no domain: not the sysfs form, only upper-cased
	} {
		if got := pciBusID(in); got != want {
			t.Errorf("pciBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

// seriesTable is one row of docs/metrics.md's "Series per node" table:
// the series the collectors sent before the join labels came, which they
// must not change.
type seriesTable struct {
	gpus                                                    int
	nvml, nvlink, amdgpu, rdma, topology, storage, defaults int
}

func readSeriesTable(t *testing.T) map[string]seriesTable {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)`[^|]* \\| (\\d+) \\| (\\d+) \\| (\\d+) \\| (\\d+) \\| (\\d+) \\| (\\d+) \\| (\\d+) \\| (\\d+) \\| (\\d+) \\| (\\d+) \\| (\\d+) \\|$")
	out := map[string]seriesTable{}
	for _, line := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n := make([]int, 0, 11)
		for _, s := range m[2:] {
			v, _ := strconv.Atoi(s)
			n = append(n, v)
		}
		out[m[1]] = seriesTable{gpus: n[0], nvml: n[3], nvlink: n[4], amdgpu: n[5], rdma: n[6], topology: n[7], storage: n[8], defaults: n[9]}
	}
	return out
}

// The join labels add no series: on every example machine each
// collector sends the series docs/metrics.md counted before they came,
// no two series of a family differ in their join labels alone, and each
// GPU has one set of join label values across all its series. On
// dgx-h100 the count of every GPU family is written by hand: 8 GPUs, 18
// NVLinks each, one compute NIC each; on amd-mi300x those of the AMD
// GPUs'.
func TestJoinLabelsKeepCardinality(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	table := readSeriesTable(t)
	if d := cmp.Diff(fakesys.Machines(), slices.Sorted(func(yield func(string) bool) {
		for k := range table {
			if !yield(k) {
				return
			}
		}
	})); d != "" {
		t.Fatalf("docs/metrics.md's series table and fakesys.Machines() differ (-machines +table):\n%s", d)
	}
	owner := map[string]string{}
	for _, c := range CollectorNames() {
		for _, f := range collectorFamilies(c) {
			owner[f] = c
		}
	}
	now := time.Now()
	for _, machine := range fakesys.Machines() {
		t.Run(machine, func(t *testing.T) {
			root, node := fixture(t, machine)
			st := State{Node: node, StateWriteOK: true,
				Discovery: DiscoveryStatus{Last: now, LastSuccess: now, OK: true, Duration: time.Second}}
			var lib gonvml.Interface // none on the AMD machines
			if _, err := os.Stat(filepath.Join(root, "nvml.json")); err == nil {
				lib = replay(t, root)
			}
			amd := map[string]bool{} // gpu label values of AMD GPUs
			for _, g := range node.GPUs {
				amd[itoa(g.Index)] = g.IsAMD()
			}
			e := newExporter(t, root, node, lib, func(o *Options) { o.State = func() State { return st } })
			r := scrapeOK(t, e.Handler())

			var got seriesTable
			byGPU := map[string]map[string]string{} // gpu → join labels
			gpus := map[string]bool{}
			for _, name := range r.names("gpuaffinity_") {
				ms := r.mfs[name].GetMetric()
				got.defaults += len(ms)
				without := map[string]bool{} // the series without their join labels
				for _, m := range ms {
					ls := labelsOf(m)
					// gpu_info and gpu_pcie_* are the amdgpu collector's
					// for an AMD GPU, the nvml collector's otherwise.
					c := owner[name]
					if c == CollectorNVML && amd[ls["gpu"]] {
						c = CollectorAMDGPU
					}
					switch c {
					case CollectorNVML:
						got.nvml++
					case CollectorNVLink:
						got.nvlink++
					case CollectorAMDGPU:
						got.amdgpu++
					case CollectorRDMA:
						got.rdma++
					case CollectorTopology:
						got.topology++
					case CollectorStorage:
						got.storage++
					}
					j := joinOf(ls)
					for k := range j {
						delete(ls, k)
					}
					key := fmt.Sprint(ls)
					if without[key] {
						t.Errorf("%s: two series differ in their join labels alone: %v", name, ls)
					}
					without[key] = true
					gpu, ok := ls["gpu"]
					if !ok {
						continue
					}
					gpus[gpu] = true
					if len(j) != len(joinLabels) {
						t.Errorf("%s%v: join labels %v", name, ls, j)
					}
					if prev, ok := byGPU[gpu]; !ok {
						byGPU[gpu] = j
					} else if d := cmp.Diff(prev, j); d != "" {
						t.Errorf("GPU %s: %s has other join labels than its other series (-first +%s):\n%s", gpu, name, name, d)
					}
				}
			}
			want := table[machine]
			got.gpus = len(gpus)
			if got != want {
				t.Errorf("series: got %+v, docs/metrics.md counted %+v", got, want)
			}
			if machine == "amd-mi300x" {
				// 8 GPUs in one fully connected XGMI hive (8 x 7 directed
				// links), 7 RAS blocks each (ue and ce, umc's de too: 15),
				// one compute NIC each.
				for name, n := range map[string]int{
					"gpuaffinity_gpu_info": 8, "gpuaffinity_gpu_amd_up": 8, "gpuaffinity_gpu_amd_info": 8,
					"gpuaffinity_gpu_pcie_link_generation": 8, "gpuaffinity_gpu_pcie_link_max_generation": 8,
					"gpuaffinity_gpu_pcie_link_width": 8, "gpuaffinity_gpu_pcie_link_max_width": 8,
					"gpuaffinity_gpu_pcie_replays_total": 8, "gpuaffinity_gpu_ras_errors_total": 8 * 15,
					"gpuaffinity_gpu_xgmi_link_up": 8 * 7, "gpuaffinity_gpu_xgmi_links": 8,
					"gpuaffinity_gpu_xgmi_expected_links": 8,
					"gpuaffinity_topology_pair_info":      8, "gpuaffinity_topology_best_nic_class": 8,
					"gpuaffinity_gpu_up": 0, "gpuaffinity_nvml_up": 0, "gpuaffinity_nvlink_visible": 0,
				} {
					if got := len(r.find(name, nil)); got != n {
						t.Errorf("%s: %d series, want %d", name, got, n)
					}
				}
			}
			if machine != "dgx-h100" {
				return
			}
			for name, n := range map[string]int{
				"gpuaffinity_gpu_info": 8, "gpuaffinity_gpu_up": 8,
				"gpuaffinity_gpu_pcie_link_generation": 8, "gpuaffinity_gpu_pcie_link_max_generation": 8,
				"gpuaffinity_gpu_pcie_link_width": 8, "gpuaffinity_gpu_pcie_link_max_width": 8,
				"gpuaffinity_gpu_pcie_replays_total": 8, "gpuaffinity_gpu_ecc_uncorrected_volatile_errors_total": 8,
				"gpuaffinity_gpu_ecc_uncorrected_aggregate_errors_total": 8, "gpuaffinity_gpu_remapped_rows_correctable": 8,
				"gpuaffinity_gpu_remapped_rows_uncorrectable": 8, "gpuaffinity_gpu_remapped_rows_pending": 8,
				"gpuaffinity_gpu_remapped_rows_failure": 8, "gpuaffinity_gpu_retired_pages": 8,
				"gpuaffinity_gpu_retired_pages_pending": 8, "gpuaffinity_gpu_fabric_state": 8,
				"gpuaffinity_gpu_fabric_status": 8, "gpuaffinity_gpu_recovery_action": 8,
				"gpuaffinity_nvlink_visible": 8, "gpuaffinity_nvlink_expected_links": 8,
				"gpuaffinity_nvlink_up": 8 * 18, "gpuaffinity_nvlink_crc_flit_errors_total": 8,
				"gpuaffinity_nvlink_crc_data_errors_total": 8, "gpuaffinity_nvlink_replay_errors_total": 8,
				"gpuaffinity_nvlink_recovery_errors_total": 8,
				"gpuaffinity_topology_pair_info":           8, "gpuaffinity_topology_best_nic_class": 8,
			} {
				if got := len(r.find(name, nil)); got != n {
					t.Errorf("%s: %d series, want %d", name, got, n)
				}
			}
		})
	}
}

// The join labels are built once per discovery: the collectors share one
// set per State.Node, a new node gets a new set, and a series sent again
// costs no label allocation.
func TestGPULabelsOncePerDiscovery(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	c := &gpuLabelCache{host: "h"}
	a := c.get(node)
	if c.get(node) != a {
		t.Error("the label set of one node built twice")
	}
	other := *node
	b := c.get(&other)
	if b == a {
		t.Error("another node got the first node's label set")
	}
	if b.byIndex[3] == a.byIndex[3] || b.byIndex[3].key != a.byIndex[3].key {
		t.Error("the new node's labels should be new values equal to the first's")
	}

	var lc labelCache
	g := b.byIndex[3]
	first, err := lc.gpuPairs(descNVLinkUp, prometheus.GaugeValue, 1, g, []string{"5"})
	if err != nil {
		t.Fatal(err)
	}
	extra := []string{"5"}
	allocs := testing.AllocsPerRun(100, func() {
		p, err := lc.gpuPairs(descNVLinkUp, prometheus.GaugeValue, 0, g, extra)
		if err != nil || &p[0] != &first[0] {
			t.Fatal("the cached label pairs not reused")
		}
		if _, err := lc.gpuPairs(descGPUUp, prometheus.GaugeValue, 1, g, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a cached GPU series costs %g allocations, want 0", allocs)
	}
	// The GPU's series share its join label pairs.
	up, _ := lc.gpuPairs(descGPUUp, prometheus.GaugeValue, 1, g, nil)
	uuidPair := func(ps []*dto.LabelPair) *dto.LabelPair {
		for _, p := range ps {
			if p.GetName() == "UUID" {
				return p
			}
		}
		t.Fatal("no UUID pair")
		return nil
	}
	if a, b := uuidPair(first), uuidPair(up); a != b || a.GetValue() != "GPU-dgxh100-0000-0000-0000-000000000003" {
		t.Errorf("UUID pairs %p %q and %p %q: want one pair of GPU 3's UUID", a, a.GetValue(), b, b.GetValue())
	}
	// Two scrapes of the NVML collector: the second builds no entry.
	e := newExporter(t, root, node, replay(t, root))
	p := e.parts[0]
	st := State{Node: node}
	run := func() int {
		s := sink{lc: &p.labels}
		if err := e.collectNVML(t.Context(), &st, &s); err != nil {
			t.Fatal(err)
		}
		p.labels.endRun()
		return len(s.ms)
	}
	n := run()
	size := p.labels.size
	if run() != n || p.labels.size != size || size != n { // one entry a series, nvml_up's too
		t.Errorf("second run: %d entries after the first run's %d for %d series", p.labels.size, size, n)
	}
}
