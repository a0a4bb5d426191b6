package exporter

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// family returns every sample of a family as "label=value,..." (its
// labels but the join labels, sorted by name) to its value: the whole
// family, for a complete hand-written want.
func (r scrapeResult) family(name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range r.mfs[name].GetMetric() {
		ls := labelsOf(m)
		for _, k := range joinLabels {
			delete(ls, k)
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(ls)) {
			parts = append(parts, k+"="+ls[k])
		}
		out[strings.Join(parts, ",")] = sampleValue(m)
	}
	return out
}

// expectFamilies compares each family of want with the scrape's, whole.
func (r scrapeResult) expectFamilies(t *testing.T, want map[string]map[string]float64) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if d := cmp.Diff(want[name], r.family(name)); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
}

// perGPU is one sample per GPU index of gpus: "gpu=N" and the labels of
// rest (already "k=v,..." after gpu in name order) to v.
func perGPU(gpus []int, before, after string, v float64) map[string]float64 {
	out := map[string]float64{}
	for _, g := range gpus {
		out[strings.Trim(strings.Join([]string{before, fmt.Sprintf("gpu=%d", g), after}, ","), ",")] = v
	}
	return out
}

// union merges sample maps.
func union(ms ...map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// healthyMask is the seven fields of health mask 20906 (0x51aa), as the
// Blackwell fixtures' comments take it apart from nvml.h's
// NVML_GPU_FABRIC_HEALTH_MASK_*: four "false" 2-bit fields, no incorrect
// configuration, partition assigned, global fabric manager connected.
// None is bad.
func healthyMask(gpus ...int) map[string]float64 {
	return union(
		perGPU(gpus, "field=access_timeout_recovery", "value=false", 0),
		perGPU(gpus, "field=degraded_bw", "value=false", 0),
		perGPU(gpus, "field=gfm_state", "value=connected", 0),
		perGPU(gpus, "field=incorrect_configuration", "value=none", 0),
		perGPU(gpus, "field=partition_assigned", "value=true", 0),
		perGPU(gpus, "field=route_recovery", "value=false", 0),
		perGPU(gpus, "field=route_unhealthy", "value=false", 0),
	)
}

// The GB200 NVL72 tray's cluster UUID and clique
// (internal/testutil/fakesys/testdata/machines/gb200-nvl72-tray.yaml).
const (
	nvl72UUID   = "5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845"
	nvl72Clique = "32766"
)

// gb200-nvl72-tray: four GB200 GPUs in one multi-node NVLink domain and
// clique, a healthy mask (20906) and summary 1 each, compute tray index 3
// in chassis slot 4 of chassis 1821725090146, module ids 2, 1, 4, 3 in bus
// order; IMEX channel 0 made with the driver's major 234 and the daemon
// configured. All from the spec.
func TestFabricGB200Tray(t *testing.T) {
	root, node := fixture(t, "gb200-nvl72-tray")
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
	all := []int{0, 1, 2, 3}
	r.expectFamilies(t, map[string]map[string]float64{
		"gpuaffinity_gpu_fabric_info":           perGPU(all, "clique_id="+nvl72Clique+",cluster_uuid="+nvl72UUID, "", 1),
		"gpuaffinity_gpu_fabric_health_bad":     healthyMask(all...),
		"gpuaffinity_gpu_fabric_health_summary": perGPU(all, "", "", 1),
		"gpuaffinity_gpu_fabric_state":          perGPU(all, "", "", 3),
		"gpuaffinity_gpu_fabric_status":         perGPU(all, "", "", 0),
		"gpuaffinity_gpu_platform_info": {
			"chassis_serial=1821725090146,gpu=0,host=0,module=2,slot=4,tray=3": 1,
			"chassis_serial=1821725090146,gpu=1,host=0,module=1,slot=4,tray=3": 1,
			"chassis_serial=1821725090146,gpu=2,host=0,module=4,slot=4,tray=3": 1,
			"chassis_serial=1821725090146,gpu=3,host=0,module=3,slot=4,tray=3": 1,
		},
		"gpuaffinity_topology_nvlink_domain_gpus":     {"clique_id=" + nvl72Clique + ",cluster_uuid=" + nvl72UUID: 4},
		"gpuaffinity_topology_nvlink_domains":         {"": 1},
		"gpuaffinity_topology_nvlink_multi_node":      {"": 1},
		"gpuaffinity_topology_imex_channels_usable":   {"": 1},
		"gpuaffinity_topology_imex_driver_registered": {"": 1},
		"gpuaffinity_topology_imex_config_present":    {"": 1},
	})
}

// gb200-nvl72-fabric-failed: GPU 2's registration completed with status
// 23 (NVML_ERROR_INSUFFICIENT_RESOURCES) and an all-zero cluster UUID, its
// mask 21929 (0x55a9): degraded_bw 1 (true, bad), route_recovery,
// route_unhealthy and access_timeout_recovery 2 (false),
// incorrect_configuration 5 (insufficient_nvlinks, bad),
// partition_assigned 1 (true), gfm_state 1 (connected); summary 2
// (unhealthy). The other three GPUs are the tray's. IMEX: the driver's
// major registered, no channel node made again after the reboot.
func TestFabricGB200Failed(t *testing.T) {
	root, node := fixture(t, "gb200-nvl72-fabric-failed")
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
	good := []int{0, 1, 3}
	r.expectFamilies(t, map[string]map[string]float64{
		"gpuaffinity_gpu_fabric_info": perGPU(good, "clique_id="+nvl72Clique+",cluster_uuid="+nvl72UUID, "", 1),
		"gpuaffinity_gpu_fabric_health_bad": union(healthyMask(good...), map[string]float64{
			"field=access_timeout_recovery,gpu=2,value=false":                0,
			"field=degraded_bw,gpu=2,value=true":                             1,
			"field=gfm_state,gpu=2,value=connected":                          0,
			"field=incorrect_configuration,gpu=2,value=insufficient_nvlinks": 1,
			"field=partition_assigned,gpu=2,value=true":                      0,
			"field=route_recovery,gpu=2,value=false":                         0,
			"field=route_unhealthy,gpu=2,value=false":                        0,
		}),
		"gpuaffinity_gpu_fabric_health_summary": union(perGPU(good, "", "", 1), map[string]float64{"gpu=2": 2}),
		"gpuaffinity_gpu_fabric_state":          perGPU([]int{0, 1, 2, 3}, "", "", 3),
		"gpuaffinity_gpu_fabric_status":         union(perGPU(good, "", "", 0), map[string]float64{"gpu=2": 23}),
		// The discovery groups GPUs whose registration completed with
		// success by cluster UUID and clique (topology.Node.NVLinkFabric):
		// GPU 2, completed with an error, is in none.
		"gpuaffinity_topology_nvlink_domain_gpus":     {"clique_id=" + nvl72Clique + ",cluster_uuid=" + nvl72UUID: 3},
		"gpuaffinity_topology_nvlink_domains":         {"": 1},
		"gpuaffinity_topology_nvlink_multi_node":      {"": 1},
		"gpuaffinity_topology_imex_channels_usable":   {"": 0},
		"gpuaffinity_topology_imex_driver_registered": {"": 1},
		"gpuaffinity_topology_imex_config_present":    {"": 1},
	})
	// The exposition, as an alert reads it.
	for _, want := range []string{
		`gpuaffinity_gpu_fabric_health_bad{Hostname="gb200-r01-ct04",UUID="GPU-6c1f2b9e-0018-4a3d-9e51-2b7a00000002",field="degraded_bw",gpu="2",model_name="NVIDIA GB200",pci_bus_id="00000018:01:00.0",value="true"} 1`,
		`gpuaffinity_gpu_fabric_health_bad{Hostname="gb200-r01-ct04",UUID="GPU-6c1f2b9e-0018-4a3d-9e51-2b7a00000002",field="incorrect_configuration",gpu="2",model_name="NVIDIA GB200",pci_bus_id="00000018:01:00.0",value="insufficient_nvlinks"} 1`,
		`gpuaffinity_gpu_fabric_info{Hostname="gb200-r01-ct04",UUID="GPU-6c1f2b9e-0008-4a3d-9e51-2b7a00000000",clique_id="32766",cluster_uuid="5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845",gpu="0",model_name="NVIDIA GB200",pci_bus_id="00000008:01:00.0"} 1`,
	} {
		if !slices.Contains(strings.Split(r.body, "\n"), want) {
			t.Errorf("no line %s", want)
		}
	}
	// promlint accepts the fabric series (TestLint covers the rest on
	// dgx-h100).
	problems, err := testutil.GatherAndLint(newExporter(t, root, node, replay(t, root)).Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// dgx-b200: a single-node NVSwitch system. Registration completed with an
// all-zero cluster UUID (no gpu_fabric_info, one domain of 8 under
// cluster_uuid ""), the healthy mask and summary on each GPU, no platform
// info (NOT_SUPPORTED), no IMEX. dgx-h100's spec has no fabric block:
// its v4 answer has every mask field 0 (not supported) and summary 0, so
// it has no health series at all.
func TestFabricSingleNode(t *testing.T) {
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for _, c := range []struct {
		machine string
		health  map[string]float64
		summary map[string]float64
	}{
		{"dgx-b200", healthyMask(all...), perGPU(all, "", "", 1)},
		{"dgx-h100", map[string]float64{}, map[string]float64{}},
	} {
		t.Run(c.machine, func(t *testing.T) {
			root, node := fixture(t, c.machine)
			r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
			r.expectFamilies(t, map[string]map[string]float64{
				"gpuaffinity_gpu_fabric_info":                 {},
				"gpuaffinity_gpu_fabric_health_bad":           c.health,
				"gpuaffinity_gpu_fabric_health_summary":       c.summary,
				"gpuaffinity_gpu_fabric_state":                perGPU(all, "", "", 3),
				"gpuaffinity_gpu_fabric_status":               perGPU(all, "", "", 0),
				"gpuaffinity_gpu_platform_info":               {},
				"gpuaffinity_topology_nvlink_domain_gpus":     {"clique_id=0,cluster_uuid=": 8},
				"gpuaffinity_topology_nvlink_domains":         {"": 1},
				"gpuaffinity_topology_nvlink_multi_node":      {"": 0},
				"gpuaffinity_topology_imex_channels_usable":   {"": 0},
				"gpuaffinity_topology_imex_driver_registered": {"": 0},
				"gpuaffinity_topology_imex_config_present":    {"": 0},
			})
		})
	}
}

// A node without an NVLink fabric (PCIe cards) has no domain and still
// says so; a node without NVIDIA GPUs (amd-mi300x: 8 AMD MI300X in an
// XGMI hive, no NVLink, no IMEX) has none of the node series, nor any
// GPU's fabric series, though its GPUs are there.
func TestFabricNone(t *testing.T) {
	root, node := fixture(t, "smt-off-2s")
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
	r.expectFamilies(t, map[string]map[string]float64{
		"gpuaffinity_gpu_fabric_state":            {},
		"gpuaffinity_gpu_fabric_info":             {},
		"gpuaffinity_topology_nvlink_domain_gpus": {},
		"gpuaffinity_topology_nvlink_domains":     {"": 0},
		"gpuaffinity_topology_nvlink_multi_node":  {"": 0},
	})
	root, node = fixture(t, "amd-mi300x")
	r = scrapeOK(t, newExporter(t, root, node, nil).Handler())
	if n := len(r.find("gpuaffinity_gpu_info", nil)); n != 8 {
		t.Errorf("amd-mi300x: %d gpu_info series, want its 8 GPUs", n)
	}
	for _, name := range []string{"gpuaffinity_topology_nvlink_domain_gpus", "gpuaffinity_topology_nvlink_domains",
		"gpuaffinity_topology_nvlink_multi_node", "gpuaffinity_topology_imex_channels_usable",
		"gpuaffinity_topology_imex_driver_registered", "gpuaffinity_topology_imex_config_present",
		"gpuaffinity_gpu_fabric_state", "gpuaffinity_gpu_fabric_info", "gpuaffinity_gpu_fabric_health_bad"} {
		if n := len(r.find(name, nil)); n != 0 {
			t.Errorf("amd-mi300x: %d %s series, want none", n, name)
		}
	}
}
