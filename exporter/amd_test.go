package exporter

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The amd-mi300x machine as its spec writes it
// (internal/testutil/fakesys/testdata/machines/amd-mi300x.yaml, after AMD's
// reference mapping, ROCm system-acceptance-docs
// docs/network/topology-mapping.md @23e7312: 8 MI300X, GPUs 0-3 on CPU 0
// and 4-7 on CPU 1, each sharing a platform PCIe switch with one
// ConnectX-7, all 8 in one fully connected XGMI hive). GPU i is at
// mi300xBus[i], KFD node 2+i, render node 128+8i (eight DRM devices per
// MI300, ROCm/rocDecode#38), paired with mlx5_i.
var mi300xBus = []string{"0000:05:00.0", "0000:2b:00.0", "0000:5b:00.0", "0000:65:00.0",
	"0000:7d:00.0", "0000:a5:00.0", "0000:d5:00.0", "0000:e7:00.0"}

const mi300xHive = "0x7c2e5a91d04b36f8" // the spec's xgmi_hive

// mi300xRAS is every RAS counter of a GPU of amd-mi300x, all 0: the
// blocks whose MI300 RAS objects count errors (umc, sdma, gfx, mmhub,
// pcie_bif, hdp, and xgmi_wafl in a hive), ue and ce each, umc with its
// deferred count (amdgpu_ras.c amdgpu_ras_sysfs_read; FORMAT.md).
func mi300xRAS(gpu int) map[string]float64 {
	out := map[string]float64{}
	for _, b := range []string{"gfx", "hdp", "mmhub", "pcie_bif", "sdma", "umc", "xgmi_wafl"} {
		for _, t := range []string{"ue", "ce"} {
			out[fmt.Sprintf("block=%s,gpu=%d,type=%s", b, gpu, t)] = 0
		}
	}
	out[fmt.Sprintf("block=umc,gpu=%d,type=de", gpu)] = 0
	return out
}

// xgmiLinkUp is gpu_xgmi_link_up of a fully connected 8-GPU hive, every
// directed pair 1 but those of down (pairs "a-b", both directions), 0.
func xgmiLinkUp(down ...string) map[string]float64 {
	out := map[string]float64{}
	for a := range mi300xBus {
		for b := range mi300xBus {
			if a == b {
				continue
			}
			v := 1.0
			for _, d := range down {
				if d == fmt.Sprintf("%d-%d", a, b) || d == fmt.Sprintf("%d-%d", b, a) {
					v = 0
				}
			}
			out[fmt.Sprintf("gpu=%d,peer_bus_id=%s,peer_gpu=%d", a, mi300xBus[b], b)] = v
		}
	}
	return out
}

// each is one sample per GPU of amd-mi300x with the labels f gives and
// value v(gpu).
func each(f func(gpu int) string, v func(gpu int) float64) map[string]float64 {
	out := map[string]float64{}
	for g := range mi300xBus {
		out[f(g)] = v(g)
	}
	return out
}

func gpuKey(g int) string { return fmt.Sprintf("gpu=%d", g) }

func all(v float64) func(int) float64 { return func(int) float64 { return v } }

// amdScrape scrapes machine without NVML (an AMD node has none).
func amdScrape(t *testing.T, machine string, tweak ...func(root string)) (scrapeResult, *topology.Node) {
	t.Helper()
	root, node := fixture(t, machine)
	for _, f := range tweak {
		f(root)
	}
	return scrapeOK(t, newExporter(t, root, node, nil).Handler()), node
}

// The healthy hive: every GPU's info, up, PCIe link (Gen5 x16, the
// guide's "Speed 32GT/s (ok), Width x16 (ok)"), zero RAS counts and
// replays, 56 directed XGMI links all up (8 x 7: rocm-smi --showtopo on
// 8x MI300X reads XGMI, weight 15, hops 1 for every pair, frontier.md
// 4.2), and the GPU-NIC pairing of the guide (GPU i and mlx5_i under one
// switch: PXB). No NVIDIA series: no gpu_up, nvml_up, NVLink or IMEX
// series, and the nvml collector does not fail for want of NVML.
func TestAMDMI300X(t *testing.T) {
	r, _ := amdScrape(t, "amd-mi300x")
	up := map[string]float64{}
	ras := map[string]float64{}
	for g := range mi300xBus {
		up[gpuKey(g)] = 1
		for k, v := range mi300xRAS(g) {
			ras[k] = v
		}
	}
	r.expectFamilies(t, map[string]map[string]float64{
		"gpuaffinity_gpu_info": each(func(g int) string {
			return fmt.Sprintf("bus_id=%s,gpu=%d,model=AMD Instinct MI300X,numa_node=%d,uuid=%s", mi300xBus[g], g, g/4, rocrUUID(mi300xBus[g]))
		}, all(1)),
		"gpuaffinity_gpu_amd_up": up,
		"gpuaffinity_gpu_amd_info": each(func(g int) string {
			return fmt.Sprintf("bus_id=%s,compute_partition=SPX,gfx_target=gfx942,gpu=%d,memory_partition=NPS1,render_minor=%d,xgmi_hive_id=%s",
				mi300xBus[g], g, 128+8*g, mi300xHive)
		}, all(1)),
		"gpuaffinity_gpu_pcie_link_generation":     each(gpuKey, all(5)),
		"gpuaffinity_gpu_pcie_link_max_generation": each(gpuKey, all(5)),
		"gpuaffinity_gpu_pcie_link_width":          each(gpuKey, all(16)),
		"gpuaffinity_gpu_pcie_link_max_width":      each(gpuKey, all(16)),
		"gpuaffinity_gpu_pcie_replays_total":       each(gpuKey, all(0)),
		"gpuaffinity_gpu_ras_errors_total":         ras,
		"gpuaffinity_gpu_xgmi_link_up":             xgmiLinkUp(),
		"gpuaffinity_gpu_xgmi_links":               each(gpuKey, all(7)),
		"gpuaffinity_gpu_xgmi_expected_links":      each(gpuKey, all(7)),
		"gpuaffinity_topology_pair_info": each(func(g int) string {
			return fmt.Sprintf("class=PXB,gpu=%d,nic=mlx5_%d", g, g)
		}, all(1)),
		"gpuaffinity_topology_best_nic_class": each(gpuKey, all(2)),
		"gpuaffinity_topology_aligned":        {"": 1},
		"gpuaffinity_scrape_collector_success": {
			"collector=amdgpu": 1, "collector=nvml": 1, "collector=rdma": 1, "collector=storage": 1, "collector=topology": 1,
		},
	})
	if n := len(r.find("gpuaffinity_gpu_xgmi_link_up", nil)); n != 56 {
		t.Errorf("%d gpu_xgmi_link_up series, want 8 x 7 = 56", n)
	}
	for _, name := range []string{"gpuaffinity_nvml_up", "gpuaffinity_gpu_up", "gpuaffinity_nvlink_visible",
		"gpuaffinity_nvlink_expected_links", "gpuaffinity_gpu_fabric_state", "gpuaffinity_topology_nvlink_domains",
		"gpuaffinity_topology_nvlink_multi_node", "gpuaffinity_topology_imex_channels_usable",
		"gpuaffinity_topology_imex_driver_registered", "gpuaffinity_topology_imex_config_present"} {
		if n := len(r.find(name, nil)); n != 0 {
			t.Errorf("amd-mi300x: %d %s series, want none (NVIDIA only)", n, name)
		}
	}
}

// rocrUUID is ROCr's UUID of a GPU of the fixtures: "GPU-" and KFD's
// unique_id in 16 hex digits, the fixtures' unique_id being FNV-1a 64 of
// "unique:<bdf>" (internal/testutil/fakesys/FORMAT.md, amdgpu.unique_id).
func rocrUUID(bdf string) string {
	h := fnv.New64a()
	h.Write([]byte("unique:" + bdf))
	return fmt.Sprintf("GPU-%016x", h.Sum64())
}

// amd-mi300x-faults (its spec's description): GPU 3 has uncorrectable
// HBM errors (ras/umc_err_count ue 2, ce 14), GPU 2 37 PCIe replays, GPU 5
// a link trained at x8 of x16, and GPU 6 lost its direct XGMI links to
// GPUs 0 and 1, both ways: the 4 directed series of those pairs are 0, the
// other 52 are 1; GPU 6 keeps 5 direct links, GPUs 0 and 1 six each, of
// the 7 a fully connected hive gives every GPU.
func TestAMDMI300XFaults(t *testing.T) {
	r, _ := amdScrape(t, "amd-mi300x-faults")
	ras := map[string]float64{}
	for g := range mi300xBus {
		for k, v := range mi300xRAS(g) {
			ras[k] = v
		}
	}
	ras["block=umc,gpu=3,type=ue"] = 2
	ras["block=umc,gpu=3,type=ce"] = 14
	r.expectFamilies(t, map[string]map[string]float64{
		"gpuaffinity_gpu_ras_errors_total":   ras,
		"gpuaffinity_gpu_pcie_replays_total": each(gpuKey, func(g int) float64 { return map[int]float64{2: 37}[g] }),
		"gpuaffinity_gpu_pcie_link_width": each(gpuKey, func(g int) float64 {
			if g == 5 {
				return 8
			}
			return 16
		}),
		"gpuaffinity_gpu_pcie_link_max_width":  each(gpuKey, all(16)),
		"gpuaffinity_gpu_pcie_link_generation": each(gpuKey, all(5)),
		"gpuaffinity_gpu_xgmi_link_up":         xgmiLinkUp("6-0", "6-1"),
		"gpuaffinity_gpu_xgmi_links": each(gpuKey, func(g int) float64 {
			return []float64{6, 6, 7, 7, 7, 7, 5, 7}[g]
		}),
		"gpuaffinity_gpu_xgmi_expected_links": each(gpuKey, all(7)),
		"gpuaffinity_gpu_amd_up":              each(gpuKey, all(1)),
	})
	down := 0
	for _, m := range r.find("gpuaffinity_gpu_xgmi_link_up", nil) {
		if sampleValue(m) == 0 {
			down++
		}
	}
	if down != 4 {
		t.Errorf("%d gpu_xgmi_link_up series are 0, want 4 (6-0, 6-1, 0-6, 1-6)", down)
	}
}

// The GPU-NIC alignment series work on every AMD machine: one pair per
// GPU (each fixture pairs GPU i with one NIC), a best class per GPU and
// aligned as the class says: PXB on the bare-metal boxes (a shared
// switch), NODE on the Azure VM (Hyper-V gives every device its own PCI
// domain: no common switch, so not aligned).
func TestAMDTopologySeries(t *testing.T) {
	for machine, want := range map[string]struct {
		class   string
		aligned float64
	}{
		"amd-mi300x": {"PXB", 1}, "amd-mi300x-faults": {"PXB", 1}, "amd-mi300x-pollara": {"PXB", 1},
		"oci-bm-gpu-mi300x": {"PXB", 1}, "azure-nd-mi300x-v5": {"NODE", 0},
	} {
		t.Run(machine, func(t *testing.T) {
			r, _ := amdScrape(t, machine)
			pairs := r.find("gpuaffinity_topology_pair_info", nil)
			if len(pairs) != 8 {
				t.Errorf("%d pair series, want 8", len(pairs))
			}
			for _, m := range pairs {
				if c := labelsOf(m)["class"]; c != want.class {
					t.Errorf("pair %v: class %s, want %s", labelsOf(m), c, want.class)
				}
			}
			if n := len(r.find("gpuaffinity_topology_best_nic_class", nil)); n != 8 {
				t.Errorf("%d best_nic_class series, want 8", n)
			}
			if v := r.must(t, "gpuaffinity_topology_aligned", nil); v != want.aligned {
				t.Errorf("aligned = %g, want %g", v, want.aligned)
			}
			if n := len(r.find("gpuaffinity_gpu_xgmi_link_up", nil)); n != 56 {
				t.Errorf("%d gpu_xgmi_link_up series, want 56 (8 GPUs in one fully connected hive)", n)
			}
		})
	}
}

// A GPU gone from the bus is amdgpu_up 0 with its info kept and no
// counters, without failing the collector; one amdgpu let go of (no
// driver link) the same; a RAS file that does not parse fails the
// collector, names the file, and costs that block only.
func TestAMDDegraded(t *testing.T) {
	dev := func(root string, bus string) string { return filepath.Join(root, "sys/bus/pci/devices", bus) }
	r, _ := amdScrape(t, "amd-mi300x", func(root string) {
		if err := os.Remove(dev(root, mi300xBus[3])); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dev(root, mi300xBus[4]), "driver")); err != nil {
			t.Fatal(err)
		}
	})
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "amdgpu")); v != 1 {
		t.Errorf("amdgpu success = %g with a GPU gone: a lost GPU is not a collector failure", v)
	}
	for g, want := range map[int]float64{0: 1, 3: 0, 4: 0} {
		if v := r.must(t, "gpuaffinity_gpu_amd_up", l("gpu", itoa(g))); v != want {
			t.Errorf("GPU %d amd_up = %g, want %g", g, v, want)
		}
	}
	for _, g := range []int{3, 4} {
		for _, name := range []string{"gpuaffinity_gpu_ras_errors_total", "gpuaffinity_gpu_pcie_replays_total", "gpuaffinity_gpu_pcie_link_width"} {
			if n := len(r.find(name, l("gpu", itoa(g)))); n != 0 {
				t.Errorf("GPU %d: %d %s series, want none", g, n, name)
			}
		}
		for _, name := range []string{"gpuaffinity_gpu_info", "gpuaffinity_gpu_amd_info", "gpuaffinity_gpu_xgmi_links"} {
			if n := len(r.find(name, l("gpu", itoa(g)))); n != 1 {
				t.Errorf("GPU %d: %d %s series, want 1 (from the discovery)", g, n, name)
			}
		}
	}

	root, node := fixture(t, "amd-mi300x")
	bad := filepath.Join(dev(root, mi300xBus[2]), "ras/gfx_err_count")
	writeFile(t, bad, "ue: lots\nce: 0\n")
	var logs strings.Builder
	r = scrapeOK(t, newExporter(t, root, node, nil, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}).Handler())
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "amdgpu")); v != 0 {
		t.Errorf("amdgpu success = %g with a garbage RAS file", v)
	}
	if !strings.Contains(logs.String(), "ras/gfx_err_count") {
		t.Errorf("the error does not name the file:\n%s", logs.String())
	}
	if n := len(r.find("gpuaffinity_gpu_ras_errors_total", l("gpu", "2"))); n != 13 {
		t.Errorf("GPU 2: %d RAS series, want the 13 of its other blocks", n)
	}
	if n := len(r.find("gpuaffinity_gpu_ras_errors_total", nil)); n != 7*15+13 {
		t.Errorf("%d RAS series, want %d", n, 7*15+13)
	}
}

// amdgpu's xgmi_error is cleared by every read (amdgpu_xgmi.c
// amdgpu_xgmi_show_error), so a scrape must never read it: with the file
// made unreadable as a file (a directory) on every GPU the collector
// still succeeds.
func TestAMDDoesNotReadXGMIError(t *testing.T) {
	r, _ := amdScrape(t, "amd-mi300x", func(root string) {
		for _, b := range mi300xBus {
			p := filepath.Join(root, "sys/bus/pci/devices", b, "xgmi_error")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	})
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "amdgpu")); v != 1 {
		t.Errorf("amdgpu success = %g: the collector read xgmi_error", v)
	}
}

// On a hive that need not be fully connected (an ISA before MI300: here
// amd-mi300x's node relabelled gfx90a, MI250X's), only pairs with a
// direct link on at least one side get a link series, and no expected
// count is given: a pair without a direct link may be the design. GPU 7
// made to reach every peer in 2 hops has no link series but its count 0.
func TestAMDXGMIPartialMesh(t *testing.T) {
	root, node := fixture(t, "amd-mi300x")
	n := *node
	n.GPUs = append([]topology.GPU(nil), node.GPUs...)
	for i := range n.GPUs {
		a := *n.GPUs[i].AMD
		a.GFXTarget = "gfx90a"
		a.XGMILinks = append([]topology.XGMILink(nil), a.XGMILinks...)
		for j := range a.XGMILinks {
			if i == 7 || a.XGMILinks[j].Peer == mi300xBus[7] {
				a.XGMILinks[j].Hops, a.XGMILinks[j].Weight = 2, 30
			}
		}
		n.GPUs[i].AMD = &a
	}
	r := scrapeOK(t, newExporter(t, root, &n, nil).Handler())
	want := xgmiLinkUp()
	for k := range want {
		if strings.HasPrefix(k, "gpu=7,") || strings.HasSuffix(k, "peer_gpu=7") {
			delete(want, k)
		}
	}
	r.expectFamilies(t, map[string]map[string]float64{
		"gpuaffinity_gpu_xgmi_link_up":        want,
		"gpuaffinity_gpu_xgmi_links":          each(gpuKey, func(g int) float64 { return []float64{6, 6, 6, 6, 6, 6, 6, 0}[g] }),
		"gpuaffinity_gpu_xgmi_expected_links": {},
	})
}

// The AMD exposition passes promlint and the pedantic registry, and every
// family it has is in docs/metrics.md with the type the doc gives it.
func TestAMDLintAndDocTypes(t *testing.T) {
	root, node := fixture(t, "amd-mi300x-faults")
	st := State{Node: node, Discovery: DiscoveryStatus{Last: time.Now(), LastSuccess: time.Now(), OK: true}}
	e := newExporter(t, root, node, nil, func(o *Options) { o.State = func() State { return st } })
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
	doc := docMetrics(t)
	r := scrapeOK(t, e.Handler())
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
		if got := strings.ToLower(r.mfs[name].GetType().String()); got != want {
			t.Errorf("%s is a %s, docs/metrics.md says %s", name, got, want)
		}
	}
}

// --no-collector.amdgpu drops exactly the AMD GPUs' series and the
// collector's own pair; the other collectors' series stay. On an NVIDIA
// node the collector sends nothing at all (TestJoinLabelsKeepCardinality
// counts every NVIDIA machine as before).
func TestAMDCollectorSwitch(t *testing.T) {
	root, node := fixture(t, "amd-mi300x")
	on := seriesOf(scrapeOK(t, newExporter(t, root, node, nil).Handler()))
	off := seriesOf(scrapeOK(t, newExporter(t, root, node, nil, func(o *Options) {
		o.Collectors = map[string]bool{CollectorAMDGPU: false}
	}).Handler()))
	for _, f := range amdNodeFamilies {
		if len(on[f]) == 0 {
			t.Errorf("%s: no series with amdgpu on", f)
		}
		if len(off[f]) != 0 {
			t.Errorf("%s: %d series with amdgpu off", f, len(off[f]))
		}
		delete(on, f)
		delete(off, f)
	}
	for _, f := range []string{"gpuaffinity_scrape_collector_duration_seconds", "gpuaffinity_scrape_collector_success"} {
		var kept []string
		for _, s := range on[f] {
			if s != "collector=amdgpu" {
				kept = append(kept, s)
			}
		}
		on[f] = kept
	}
	if fmt.Sprint(on) != fmt.Sprint(off) {
		t.Errorf("--no-collector.amdgpu changed other series:\n on: %v\noff: %v", on, off)
	}

	root, node = fixture(t, "dgx-h100")
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
	if n := len(r.find("gpuaffinity_scrape_collector_success", l("collector", "amdgpu"))); n != 0 {
		t.Errorf("dgx-h100: the amdgpu collector reports (%d series)", n)
	}
}

// amdNodeFamilies are the families the amdgpu collector sends on an AMD
// node: its own, and gpu_info and the gpu_pcie_* families, which the nvml
// collector sends for NVIDIA GPUs.
var amdNodeFamilies = []string{
	"gpuaffinity_gpu_amd_up", "gpuaffinity_gpu_amd_info", "gpuaffinity_gpu_ras_errors_total",
	"gpuaffinity_gpu_xgmi_link_up", "gpuaffinity_gpu_xgmi_links", "gpuaffinity_gpu_xgmi_expected_links",
	"gpuaffinity_gpu_info", "gpuaffinity_gpu_pcie_link_generation", "gpuaffinity_gpu_pcie_link_max_generation",
	"gpuaffinity_gpu_pcie_link_width", "gpuaffinity_gpu_pcie_link_max_width", "gpuaffinity_gpu_pcie_replays_total",
}

// A node with both vendors' GPUs (mixed-h100-mi210: an H100 PCIe, NVML
// index 0, and an MI210, gfx90a without a bridge, index 1 after it): the
// H100 has its NVML series, the MI210 none of them (no gpu_up, whose 0
// would say NVML lost it, no NVLink series) but the amdgpu collector's:
// six RAS blocks (no xgmi_wafl outside a hive), its Gen4 x16 link, and
// no XGMI series. The node's NVLink and IMEX series are there (it has an
// NVIDIA GPU).
func TestAMDMixedNode(t *testing.T) {
	root, node := fixture(t, "mixed-h100-mi210")
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
	ras := map[string]float64{"block=umc,gpu=1,type=de": 0}
	for _, b := range []string{"gfx", "hdp", "mmhub", "pcie_bif", "sdma", "umc"} {
		ras["block="+b+",gpu=1,type=ue"] = 0
		ras["block="+b+",gpu=1,type=ce"] = 0
	}
	r.expectFamilies(t, map[string]map[string]float64{
		"gpuaffinity_nvml_up":                      {"": 1},
		"gpuaffinity_gpu_up":                       {"gpu=0": 1},
		"gpuaffinity_nvlink_visible":               {"gpu=0": 0},
		"gpuaffinity_nvlink_expected_links":        {"gpu=0": 0},
		"gpuaffinity_gpu_amd_up":                   {"gpu=1": 1},
		"gpuaffinity_gpu_ras_errors_total":         ras,
		"gpuaffinity_gpu_pcie_link_generation":     {"gpu=0": 5, "gpu=1": 4},
		"gpuaffinity_gpu_pcie_link_width":          {"gpu=0": 16, "gpu=1": 16},
		"gpuaffinity_gpu_xgmi_link_up":             {},
		"gpuaffinity_gpu_xgmi_links":               {},
		"gpuaffinity_gpu_xgmi_expected_links":      {},
		"gpuaffinity_topology_nvlink_domains":      {"": 0},
		"gpuaffinity_topology_imex_config_present": {"": 0},
	})
	if n := len(r.find("gpuaffinity_gpu_info", nil)); n != 2 {
		t.Errorf("%d gpu_info series, want one per GPU", n)
	}
	if v := r.must(t, "gpuaffinity_gpu_amd_info", l("gpu", "1")); v != 1 {
		t.Errorf("GPU 1 amd_info = %g", v)
	}
	if m := r.find("gpuaffinity_gpu_amd_info", nil); len(m) == 1 {
		ls := labelsOf(m[0])
		if ls["gfx_target"] != "gfx90a" || ls["xgmi_hive_id"] != "" || ls["compute_partition"] != "" {
			t.Errorf("MI210 amd_info labels %v: want gfx90a, no hive, no partition", ls)
		}
	}
}

// amdJoinExamples returns the PromQL blocks of docs/metrics.md's section
// "Beside ROCm's device-metrics-exporter", in order.
func amdJoinExamples(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n### Beside ROCm's device-metrics-exporter\n")
	if start < 0 {
		t.Fatal(`docs/metrics.md has no section "Beside ROCm's device-metrics-exporter"`)
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

// The PromQL of the device-metrics-exporter section gives, on
// Prometheus's engine (promtool test rules), the answers written here by
// hand. The agent's series are a scrape of amd-mi300x-faults (GPU 6 lost
// its XGMI links to GPUs 0 and 1; every GPU pairs with its NIC at PXB).
// device-metrics-exporter's series are written by hand in its format (a
// subset of gpuMandatoryLables, pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go:
// gpu_id, card_model, serial_number, gpu_partition_id, the partition
// types lower case, hostname), for GPUs 0, 3 and 6, its gpu_id being the
// same index here.
func TestAMDJoinExamples(t *testing.T) {
	bin := needBinary(t, "promtool")
	t.Setenv("NODE_NAME", "")
	r, _ := amdScrape(t, "amd-mi300x-faults")
	const host = "mi300x-01" // the spec's hostname (amd-mi300x.yaml)
	target := l("job", "gpuaffinity-agent", "instance", "10.0.0.1:19400", "node", host)
	var input []promtoolSeries
	for _, name := range []string{"gpuaffinity_gpu_xgmi_links", "gpuaffinity_gpu_xgmi_expected_links", "gpuaffinity_topology_pair_info"} {
		ms := r.find(name, nil)
		if len(ms) == 0 {
			t.Fatalf("no %s in the scrape", name)
		}
		for _, m := range ms {
			input = append(input, promtoolSeries{promSeries(name, with(labelsOf(m), "job", target["job"],
				"instance", target["instance"], "node", target["node"])), fmt.Sprintf("%g+0x80", sampleValue(m))})
		}
	}
	dme := func(gpu int) map[string]string {
		return l("gpu_id", itoa(gpu), "card_model", "MI300X", "serial_number", fmt.Sprintf("SN%04d", gpu),
			"gpu_partition_id", "0", "gpu_compute_partition_type", "spx", "gpu_memory_partition_type", "nps1",
			"hostname", host, "job", "amd-metrics-exporter", "instance", "10.0.7.9:5000")
	}
	input = append(input,
		promtoolSeries{promSeries("gpu_ecc_uncorrect_xgmi_wafl", dme(0)), "0+0x80"},
		promtoolSeries{promSeries("gpu_ecc_uncorrect_xgmi_wafl", dme(3)), "0+0x80"},
		promtoolSeries{promSeries("gpu_ecc_uncorrect_xgmi_wafl", dme(6)), "4+0x80"},
		promtoolSeries{promSeries("gpu_gfx_activity", dme(0)), "40+0x80"},
		promtoolSeries{promSeries("gpu_gfx_activity", dme(6)), "90+0x80"},
	)
	joined := func(gpu int, kv ...string) map[string]string {
		return with(dme(gpu), append([]string{"gpu", itoa(gpu), "Hostname", host}, kv...)...)
	}
	want := [][]promtoolSample{
		// GPUs 0 and 6 lost a link (3 did not): their XGMI errors.
		{{promSeries("gpu_ecc_uncorrect_xgmi_wafl", joined(0)), 0}, {promSeries("gpu_ecc_uncorrect_xgmi_wafl", joined(6)), 4}},
		// Activity with the pairing class: PXB for both.
		{{promSeries("", joined(0, "class", "PXB")), 40}, {promSeries("", joined(6, "class", "PXB")), 90}},
	}
	examples := amdJoinExamples(t)
	if len(examples) != len(want) {
		t.Fatalf("docs/metrics.md has %d device-metrics-exporter examples, the test answers %d", len(examples), len(want))
	}
	tc := promtoolCase{Interval: "15s", InputSeries: input}
	for i, expr := range examples {
		tc.ExprTests = append(tc.ExprTests, promtoolExprTest{Expr: expr, EvalTime: "10m", Samples: want[i]})
	}
	b, err := json.MarshalIndent(promtoolTest{RuleFiles: []string{}, EvaluationInterval: "1m", Tests: []promtoolCase{tc}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "amd_join_test.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "test", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}
