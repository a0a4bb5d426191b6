package exporter

import (
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/fleet/nodeview"
	"github.com/gpuaffinity/gpuaffinity/placement"
)

// The fleet series of a GB200 NVL72 compute tray (gb200-nvl72-tray: the
// fixture's rack position, NVLink domain and 18-node IMEX list) with the
// site's switches, of a GCP VM with its metadata placement and machine
// type (its DMI names only "Google Compute Engine"), and of a node with
// none: each label as docs/metrics.md describes it, written
// from the fixtures' specs.
func TestNodePlacementSeries(t *testing.T) {
	for _, tc := range []struct {
		machine string
		pl      *placement.Placement
		want    map[string]string
		imex    float64 // 0: no series
	}{
		{
			machine: "gb200-nvl72-tray",
			pl:      &placement.Placement{Cloud: "baremetal", Tiers: []string{"ib-leaf-01", "ib-spine-01"}, Source: placement.SourceSite},
			want: map[string]string{
				"hostname": "gb200-r01-ct04", "model": "GB200 NVL", "gpu_model": "NVIDIA GB200", "cloud": "baremetal",
				"tier0": "ib-leaf-01", "tier1": "ib-spine-01", "tier2": "", "host_id": "",
				"clique": "5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845.32766", "gpu_memory_fabric": "",
				"chassis_serial": "1821725090146", "slot": "4", "tray": "3", "source": "site",
			},
			imex: 18,
		},
		{
			machine: "gcp-a3-ultragpu",
			pl: &placement.Placement{Cloud: "gcp", Tiers: []string{"5b2e8d1f", "c1a2f3e4d5b6a7c8"}, Block: "c1a2f3e4d5b6a7c8", SubBlock: "5b2e8d1f",
				Host: "0a1b2c3d4e5f6071", InstanceType: "a3-ultragpu-8g", Source: "http://169.254.169.254" + placement.GCPPhysicalHostPath},
			want: map[string]string{
				"hostname": "a3ultra-0", "model": "a3-ultragpu-8g", "gpu_model": "NVIDIA H200", "cloud": "gcp",
				"tier0": "5b2e8d1f", "tier1": "c1a2f3e4d5b6a7c8", "tier2": "", "host_id": "0a1b2c3d4e5f6071",
				"clique": "", "gpu_memory_fabric": "", "chassis_serial": "", "slot": "", "tray": "", "source": "gcp-metadata",
			},
		},
		{
			machine: "oci-bm-gpu-h100",
			want: map[string]string{
				"hostname": "gpu-h100-0", "model": "BM.GPU.H100.8", "gpu_model": "NVIDIA H100 80GB HBM3", "cloud": "oci",
				"tier0": "", "tier1": "", "tier2": "", "host_id": "", "clique": "", "gpu_memory_fabric": "",
				"chassis_serial": "", "slot": "", "tray": "", "source": "",
			},
		},
	} {
		t.Run(tc.machine, func(t *testing.T) {
			root, node := fixture(t, tc.machine)
			now := time.Now()
			st := State{Node: node, Placement: tc.pl, StateWriteOK: true,
				Discovery: DiscoveryStatus{Last: now, LastSuccess: now, OK: true, Duration: time.Second}}
			e := newExporter(t, root, node, replay(t, root), func(o *Options) { o.State = func() State { return st } })
			r := scrapeOK(t, e.Handler())
			ms := r.find("gpuaffinity_node_placement_info", nil)
			if len(ms) != 1 {
				t.Fatalf("%d gpuaffinity_node_placement_info series, want 1", len(ms))
			}
			got := labelsOf(ms[0])
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("placement_info %s = %q, want %q", k, got[k], v)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("placement_info labels %v, want exactly %v", got, tc.want)
			}
			layout, firmware := nodeview.NodeFacts(node)
			r.must(t, "gpuaffinity_node_layout_info", map[string]string{"hostname": tc.want["hostname"],
				"model": tc.want["model"], "gpu_model": tc.want["gpu_model"],
				"layout": nodeview.Digest(layout), "firmware": nodeview.Digest(firmware)})
			v, ok := r.value(t, "gpuaffinity_topology_imex_config_nodes", nil)
			if tc.imex == 0 && ok {
				t.Errorf("imex_config_nodes = %v on a node without an IMEX node list", v)
			} else if tc.imex != 0 && v != tc.imex {
				t.Errorf("imex_config_nodes = %v (present %t), want %v", v, ok, tc.imex)
			}
		})
	}
}
