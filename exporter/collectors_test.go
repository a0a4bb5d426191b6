package exporter

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// parseCollectorFlags registers the collector flags on a new flag set and
// parses args.
func parseCollectorFlags(t testing.TB, args ...string) (map[string]bool, error) {
	t.Helper()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	f := RegisterCollectorFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return f.Collectors(), nil
}

func TestCollectorFlags(t *testing.T) {
	all := func(on bool) map[string]bool {
		m := map[string]bool{}
		for _, n := range CollectorNames() {
			m[n] = on
		}
		return m
	}
	with := func(m map[string]bool, kv ...any) map[string]bool {
		m = maps.Clone(m)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(bool)
		}
		return m
	}
	for _, c := range []struct {
		args []string
		want map[string]bool
	}{
		{nil, all(true)},
		{[]string{"--no-collector.nvlink"}, with(all(true), "nvlink", false)},
		{[]string{"--collector.rdma=false", "--no-collector.topology"}, with(all(true), "rdma", false, "topology", false)},
		{[]string{"--collector.disable-defaults"}, all(false)},
		{[]string{"--collector.disable-defaults", "--collector.rdma"}, with(all(false), "rdma", true)},
		{[]string{"--collector.nvml", "--collector.disable-defaults"}, with(all(false), "nvml", true)},
		// The last switch of a collector wins, as with kingpin's.
		{[]string{"--no-collector.rdma", "--collector.rdma"}, all(true)},
		{[]string{"--collector.rdma", "--no-collector.rdma"}, with(all(true), "rdma", false)},
		{[]string{"--no-collector.nvml=false"}, all(true)},
	} {
		got, err := parseCollectorFlags(t, c.args...)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%q: (-want +got)\n%s", c.args, d)
		}
	}
	for _, args := range [][]string{{"--collector.bogus"}, {"--no-collector.bogus"}, {"--collector.rdma=maybe"}} {
		if _, err := parseCollectorFlags(t, args...); err == nil {
			t.Errorf("%q parsed", args)
		}
	}
}

// The usage lists --collector.NAME (default true) and the
// disable-defaults switch; the --no-collector.NAME flags are hidden.
func TestCollectorFlagsUsage(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	RegisterCollectorFlags(fs)
	usage := fs.FlagUsages()
	for _, n := range CollectorNames() {
		if !strings.Contains(usage, "--collector."+n+" ") || !strings.Contains(usage, "--no-collector."+n+" disables it) (default true)") {
			t.Errorf("usage lacks --collector.%s:\n%s", n, usage)
		}
		if strings.Contains(usage, "  --no-collector."+n) {
			t.Errorf("usage shows --no-collector.%s:\n%s", n, usage)
		}
	}
	if !strings.Contains(usage, "--collector.disable-defaults") {
		t.Errorf("usage lacks --collector.disable-defaults:\n%s", usage)
	}
}

func TestUnknownCollector(t *testing.T) {
	_, err := New(Options{Collectors: map[string]bool{"nvml": true, "gpu": false}})
	if err == nil || !strings.Contains(err.Error(), `"gpu"`) {
		t.Errorf("New with collector gpu: %v", err)
	}
}

// amdOwnFamilies are the families only the amdgpu collector sends.
var amdOwnFamilies = []string{
	"gpuaffinity_gpu_amd_up", "gpuaffinity_gpu_amd_info", "gpuaffinity_gpu_ras_errors_total",
	"gpuaffinity_gpu_xgmi_link_up", "gpuaffinity_gpu_xgmi_links", "gpuaffinity_gpu_xgmi_expected_links",
}

// collectorFamilies says which gpuaffinity_ families a collector owns.
func collectorFamilies(name string) []string {
	var out []string
	all := []string{"gpuaffinity_nvml_up"}
	for _, d := range fixedDescs {
		all = append(all, *descFamilies[d].name)
	}
	for _, c := range rdmaCounters {
		all = append(all, *descFamilies[c.desc].name)
	}
	for _, f := range all {
		var owner string
		switch {
		case f == "gpuaffinity_gpu_xid_errors_total", f == "gpuaffinity_gpu_last_xid_timestamp_seconds":
			owner = "" // the agent's event watch
		case slices.Contains(amdOwnFamilies, f):
			owner = CollectorAMDGPU
		case f == "gpuaffinity_nvml_up", strings.HasPrefix(f, "gpuaffinity_gpu_"):
			// gpu_info and gpu_pcie_* are the amdgpu collector's too, for
			// AMD GPUs.
			owner = CollectorNVML
		case strings.HasPrefix(f, "gpuaffinity_nvlink_"):
			owner = CollectorNVLink
		case strings.HasPrefix(f, "gpuaffinity_rdma_"):
			owner = CollectorRDMA
		case strings.HasPrefix(f, "gpuaffinity_topology_"), strings.HasPrefix(f, "gpuaffinity_node_"):
			owner = CollectorTopology
		case strings.HasPrefix(f, "gpuaffinity_storage_"):
			owner = CollectorStorage
		}
		if owner == name && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// seriesOf lists a scrape's gpuaffinity_ and build info series, name and
// labels, without their values.
func seriesOf(r scrapeResult) map[string][]string {
	out := map[string][]string{}
	for _, name := range r.names("gpuaffinity_") {
		for _, m := range r.mfs[name].GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[name] = append(out[name], strings.Join(ls, ","))
		}
	}
	return out
}

// Disabling a collector removes exactly its families and its
// scrape_collector_* series; every other series stays. (Without nvml the
// NVML read runs as the nvlink collector.) The flags' defaults are all
// collectors, as no Options.Collectors.
func TestCollectorSwitches(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	lib := replay(t, root)
	var xid XIDCounter
	xid.Add(2, 79, time.Now())
	scrapeWith := func(collectors map[string]bool) scrapeResult {
		t.Helper()
		e := newExporter(t, root, node, lib, func(o *Options) {
			o.XID = &xid
			o.Collectors = collectors
		})
		return scrapeOK(t, e.Handler())
	}
	base := seriesOf(scrapeWith(nil))
	defaults, err := parseCollectorFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(base, seriesOf(scrapeWith(defaults))); d != "" {
		t.Errorf("the flags' defaults differ from no Options.Collectors (-nil +flags):\n%s", d)
	}
	for _, name := range CollectorNames() {
		t.Run(name, func(t *testing.T) {
			if name == CollectorAMDGPU {
				// dgx-h100 has no AMD GPU: the collector sends nothing,
				// not even its scrape_collector_* pair, and switching it
				// off changes nothing (TestAMDCollectorSwitch switches it
				// on an AMD machine).
				if d := cmp.Diff(base, seriesOf(scrapeWith(map[string]bool{name: false}))); d != "" {
					t.Errorf("--no-collector.amdgpu on dgx-h100 (-on +off):\n%s", d)
				}
				return
			}
			fams := collectorFamilies(name)
			want := maps.Clone(base)
			present := 0
			for _, f := range fams {
				if _, ok := want[f]; ok { // counters_ext are not on dgx-h100
					present++
					delete(want, f)
				}
			}
			if present < len(fams)/2 {
				t.Fatalf("the default scrape has %d of the %d families of %s", present, len(fams), name)
			}
			for _, f := range []string{"gpuaffinity_scrape_collector_duration_seconds", "gpuaffinity_scrape_collector_success"} {
				var ls []string
				for _, s := range want[f] {
					switch {
					case s != "collector="+name:
						ls = append(ls, s)
					case name == CollectorNVML:
						ls = append(ls, "collector=nvlink")
					}
				}
				want[f] = ls
			}
			if name == CollectorNVLink { // part of the nvml collector
				want["gpuaffinity_scrape_collector_duration_seconds"] = base["gpuaffinity_scrape_collector_duration_seconds"]
				want["gpuaffinity_scrape_collector_success"] = base["gpuaffinity_scrape_collector_success"]
			}
			r := scrapeWith(map[string]bool{name: false})
			if d := cmp.Diff(want, seriesOf(r)); d != "" {
				t.Errorf("--no-collector.%s: series (-want +got):\n%s", name, d)
			}
			for _, m := range r.find("gpuaffinity_scrape_collector_success", nil) {
				if v := sampleValue(m); v != 1 {
					t.Errorf("%s success = %g", labelsOf(m)["collector"], v)
				}
			}
		})
	}
}

// The NVLink collector alone runs the NVML read under its own name and
// sends the NVLink series only; with no collector the agent's own series
// remain.
func TestCollectorNVLinkAloneAndNone(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	lib := replay(t, root)
	only, err := parseCollectorFlags(t, "--collector.disable-defaults", "--collector.nvlink")
	if err != nil {
		t.Fatal(err)
	}
	r := scrapeOK(t, newExporter(t, root, node, lib, func(o *Options) { o.Collectors = only }).Handler())
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "nvlink")); v != 1 {
		t.Errorf("nvlink success = %g", v)
	}
	if n := len(r.find("gpuaffinity_scrape_collector_success", nil)); n != 1 {
		t.Errorf("%d collectors report, want nvlink alone", n)
	}
	if n := len(r.find("gpuaffinity_nvlink_up", nil)); n != 144 {
		t.Errorf("%d nvlink_up series, want 144", n)
	}
	for _, f := range []string{"gpuaffinity_nvml_up", "gpuaffinity_gpu_up", "gpuaffinity_gpu_info", "gpuaffinity_rdma_info", "gpuaffinity_topology_aligned"} {
		if r.mfs[f] != nil {
			t.Errorf("%s with the nvlink collector alone", f)
		}
	}

	none, err := parseCollectorFlags(t, "--collector.disable-defaults")
	if err != nil {
		t.Fatal(err)
	}
	r = scrapeOK(t, newExporter(t, root, node, lib, func(o *Options) { o.Collectors = none }).Handler())
	got := r.names("gpuaffinity_")
	want := []string{"gpuaffinity_build_info", "gpuaffinity_discovery_success", "gpuaffinity_health_healthy", "gpuaffinity_state_write_success"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("no collectors: families (-want +got):\n%s", d)
	}
	if len(r.names("go_")) == 0 || len(r.names("process_")) == 0 {
		t.Error("no collectors: no go_ or process_ metrics")
	}
}
