package grafana

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/promtest"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// The demo machines the agent runs on, by the role they play here.
const (
	healthyDemo = "dgx-h100"
	faultsDemo  = "dgx-h100-faults"
	trayDemo    = "gb200-nvl72-tray"
	job         = "gpuaffinity"
)

// fleetAgents are the agents Prometheus scrapes, by name and demo
// machine. The node panels run on healthyDemo and faultsDemo; the Fleet
// row's panels, which show the whole job, see all four: a second
// dgx-h100 gives its model a strict majority (2 of 3) that the faulty
// node's layout (GPU 7 lost, GPU 2 paired at NODE) differs from, and a
// GB200 NVL72 tray brings an NVLink clique and an IMEX node list (18
// nodes, 1 reporting).
var fleetAgents = []struct{ name, demo string }{
	{healthyDemo, healthyDemo},
	{faultsDemo, faultsDemo},
	{"dgx-h100-peer", healthyDemo},
	{trayDemo, trayDemo},
}

// nodeDemos are the agents the node panels' queries run on, with the Node
// variable set to each in turn.
var nodeDemos = []string{healthyDemo, faultsDemo}

// trayClique is the gb200-nvl72-tray fixture's NVLink clique:
// "<cluster_uuid>.<clique_id>".
const trayClique = "5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845.32766"

// fleetWantValues are the Fleet row's values on fleetAgents; faults is
// the faulty agent's address (its instance label).
func fleetWantValues(faults string) []wantValue {
	return []wantValue{
		{"Nodes", "A", nil, 4},
		{"Nodes with layout drift", "A", nil, 1},
		{"Nodes with firmware drift", "A", nil, 0},
		{"NVLink clique members missing", "A", nil, 17},
		{"Fleet: placement", "A", map[string]string{"hostname": "gb200-r01-ct04", "clique": trayClique, "slot": "4", "tray": "3"}, 1},
		// The one drifting node: the faulty one, against the 2 dgx-h100s.
		{"Fleet: nodes whose layout differs from their peers", "A", map[string]string{"instance": faults, "model": "DGXH100"}, 2},
		{"Fleet: layout variants per model", "A", map[string]string{"model": "GB200 NVL"}, 1},
		{"Fleet: NIC firmware variants per model", "A", map[string]string{"model": "DGXH100"}, 3},
		{"Fleet: NIC firmware variants per model", "A", map[string]string{"model": "GB200 NVL"}, 1},
		{"NVLink cliques: members reporting vs IMEX list", "A", map[string]string{"clique": trayClique}, 1},
		{"NVLink cliques: members reporting vs IMEX list", "B", map[string]string{"clique": trayClique}, 18},
		{"NVLink cliques: members reporting vs IMEX list", "C", map[string]string{"clique": trayClique}, 17},
	}
}

// wantEmpty are the panel targets that must return no data on
// fleetAgents, and why: the demo machines' NICs all run their model's
// one firmware, so the drift query, which lists only the nodes off their
// model's strict majority, has nothing to list. Returning no data there
// is what holds the query from flagging the majority itself.
var wantEmpty = map[[2]string]string{
	{"Fleet: nodes whose NIC firmware differs from their peers", "A"}: "every demo machine of a model has the same NIC firmware",
}

// Values the test gives Grafana's variables. Prometheus scrapes every
// promtest.Interval (1 s), and Grafana's $__rate_interval is
// max($__interval + scrape interval, 4 × scrape interval)
// (https://grafana.com/docs/grafana/latest/datasources/prometheus/template-variables/#use-__rate_interval),
// so 4s with a 1s $__interval. $__range is the dashboard's default time
// range, now-1h (TestDashboard holds it relative).
var grafanaValues = map[string]string{"__interval": "1s", "__rate_interval": "4s", "__range": "1h"}

// wantValue is a value a panel's query must return on one demo machine,
// for the series whose labels include labels.
type wantValue struct {
	panel, ref string
	labels     map[string]string
	value      float64
}

// Expected values, written from the fixtures:
//   - dgx-h100 (internal/testutil/fakesys/testdata/machines/dgx-h100.yaml and the
//     dgx-h100 row of docs/metrics.md's series table): 8 H100 GPUs with 18
//     NVLinks each (gpu_gpu NV18: 144 links), 12 RDMA ports of 12 devices,
//     8 of them compute (roles mlx5_0, 3, 4, 5, 6, 9, 10, 11), every GPU
//     paired PIX, all healthy.
//   - dgx-h100-faults (dgx-h100-faults.yaml, faults and expect): GPU 7
//     lost, GPU 2's NVLink 5 down and GPU 2 using mlx5_0 at NODE since its
//     own mlx5_4/1 is DOWN/Polling, GPU 4 waiting for a row remap, GPU 1
//     with XIDs 48, 94 and 94. The failing checks follow docs/health.md:
//     gpu.visible (lost GPU), nvlink.active (17 of 18 links),
//     nic.port_state (port not ACTIVE/LinkUp), gpu.row_remap (pending).
var wantValues = map[string][]wantValue{
	healthyDemo: {
		{"GPUs", "A", nil, 8},
		{"GPUs down", "A", nil, 0},
		{"RDMA NICs", "A", nil, 12},
		{"Compute NICs", "A", nil, 8},
		{"Health verdict", "A", nil, 1},
		{"GPU↔NIC aligned", "A", nil, 1},
		{"Agent up", "A", nil, 1},
		{"Discovery", "A", nil, 1},
		{"NVML", "A", nil, 1},
		{"State files", "A", nil, 1},
		{"GPUs not aligned", "A", nil, 0},
		{"Pairs by path class", "A", map[string]string{"class": "PIX"}, 8},
		{"NVLinks up", "A", nil, 144},
		{"NVLinks expected", "A", nil, 144},
		{"NVLinks missing", "A", nil, 0},
		{"GPUs without NVLink state", "A", nil, 0},
		{"Links missing per GPU", "A", map[string]string{"gpu": "2"}, 0},
		{"Ports not active", "A", nil, 0},
		{"Ports without physical link", "A", nil, 0},
		{"RDMA devices gone", "A", nil, 0},
		{"Counter files disabled", "A", nil, 0},
		{"Failed checks", "A", nil, 0},
		{"XIDs since the agent started", "A", map[string]string{"gpu": "1"}, 0},
		{"Failed discoveries in range", "A", nil, 0},
		// The Jobs row: the demo machine runs no GPU process, so no
		// process is misbound and no NIC is flagged.
		{"GPU processes", "A", nil, 0},
		{"GPU processes misbound", "A", nil, 0},
		{"Idle compute NICs", "A", nil, 0},
		{"Storage NICs carrying compute traffic", "A", nil, 0},
	},
	faultsDemo: {
		{"GPUs", "A", nil, 8},
		{"GPUs down", "A", nil, 1},
		{"Health verdict", "A", nil, 0},
		{"GPU↔NIC aligned", "A", nil, 0},
		{"GPUs not aligned", "A", nil, 1},
		{"Pairs by path class", "A", map[string]string{"class": "NODE"}, 1},
		{"Pairs by path class", "A", map[string]string{"class": "PIX"}, 7},
		{"Best NIC path class per GPU", "A", map[string]string{"gpu": "2"}, 4},
		{"Links missing per GPU", "A", map[string]string{"gpu": "2"}, 1},
		{"Ports not active", "A", nil, 1},
		{"Ports without physical link", "A", nil, 1},
		{"Port state", "A", map[string]string{"device": "mlx5_4", "port": "1"}, 1},
		{"XIDs since the agent started", "A", map[string]string{"gpu": "1"}, 3},
		{"XIDs since the agent started", "A", map[string]string{"gpu": "0"}, 0},
		{"Checks", "A", map[string]string{"check": "gpu.visible"}, 1},
		{"Checks", "A", map[string]string{"check": "nvlink.active"}, 1},
		{"Checks", "A", map[string]string{"check": "nic.port_state"}, 1},
		{"Checks", "A", map[string]string{"check": "gpu.row_remap"}, 1},
		{"Checks", "A", map[string]string{"check": "topo.gdr"}, 0},
		{"GPU health (current)", "A", map[string]string{"gpu": "7"}, 0}, // NVML: GPU 7 lost
		{"GPU health (current)", "G", map[string]string{"gpu": "4"}, 1}, // remap pending
	},
}

// The dashboard against a real Prometheus: the agent (the binary, built
// here) runs on the demo machines of fleetAgents, Prometheus scrapes them
// every second, and every node panel query, with the variables set to
// the healthy and the faulty node in turn, parses and returns data; the
// Fleet row's queries, run once for the job, return data (or none, where
// wantEmpty says why) and fleetWantValues; the job and node variables'
// label_values queries list the job and every agent; every metric the
// dashboard names exists; and the panels that count faults count those
// of the fixtures (wantValues).
func TestDashboardOnPrometheus(t *testing.T) {
	promtest.Binary(t) // skip (or fail under CI) before building anything
	start := time.Now()
	d := load(t)

	// Prometheus first: it takes up to 5 s to start scraping (see
	// promtest.Server.WaitScrapes), time the build and the agents' start use.
	addrs := map[string]string{}
	var targets []string
	for _, f := range fleetAgents {
		addrs[f.name] = promtest.FreeAddr(t)
		targets = append(targets, addrs[f.name])
	}
	prom := promtest.Start(t, job, targets...)
	bin := buildAgent(t)
	t.Logf("built the agent in %s", time.Since(start).Round(time.Millisecond))
	agents := map[string]*agentProc{}
	for _, f := range fleetAgents {
		agents[f.name] = startAgent(t, bin, f.demo, addrs[f.name])
	}
	for name, a := range agents {
		a.waitDiscovered(t, name)
	}
	t.Logf("agents serving after %s", time.Since(start).Round(time.Millisecond))
	// 4 scrapes, 1 s apart: a 4s rate window holds at least 3 samples from
	// then on. (Prometheus applies new targets up to 5 s after it starts:
	// its scrape manager's reload ticker.)
	prom.WaitScrapes(t, 4, 30*time.Second)
	t.Logf("Prometheus has 4 scrapes of each agent after %s", time.Since(start).Round(time.Millisecond))
	at := rateWindowFull(t, prom)

	checkVariables(t, d, prom, targets)
	checkMetricNames(t, d, prom)

	ps := queryPanels(d.Panels)
	fleet := fleetPanels(d.Panels)
	byTitle := map[string]panel{}
	for _, p := range ps {
		byTitle[p.Title] = p
	}
	queries := 0
	for _, demo := range nodeDemos {
		a := agents[demo]
		vals := map[string]string{"job": job, "instance": a.addr}
		for k, v := range grafanaValues {
			vals[k] = v
		}
		for _, p := range ps {
			if fleet[p.Title] {
				continue
			}
			for _, tg := range p.Targets {
				expr, err := substitute(tg.Expr, vals)
				if err != nil {
					t.Error(err)
					continue
				}
				got, err := prom.QueryAt(expr, at)
				queries++
				if err != nil {
					t.Errorf("%s: panel %q target %s: %v", demo, p.Title, tg.RefID, err)
				} else if len(got) == 0 {
					t.Errorf("%s: panel %q target %s: no data for %s", demo, p.Title, tg.RefID, expr)
				}
			}
		}
		for _, w := range wantValues[demo] {
			p, ok := byTitle[w.panel]
			i := slices.IndexFunc(p.Targets, func(tg target) bool { return tg.RefID == w.ref })
			if !ok || i < 0 {
				t.Errorf("no panel %q with target %s", w.panel, w.ref)
				continue
			}
			expr, err := substitute(p.Targets[i].Expr, vals)
			if err != nil {
				t.Error(err)
				continue
			}
			got, err := prom.QueryAt(expr, at)
			if err != nil {
				t.Errorf("%s: panel %q: %v", demo, w.panel, err)
				continue
			}
			checkValue(t, demo, w, got)
		}
	}
	queries += checkFleet(t, prom, at, ps, fleet, fleetWantValues(agents[faultsDemo].addr))
	t.Logf("%d panel queries on %d nodes checked after %s", queries, len(fleetAgents), time.Since(start).Round(time.Millisecond))
}

// checkFleet runs the Fleet row's queries once, with no Node variable
// (TestDashboard holds them to job alone): each must return data, or none
// where wantEmpty says so, and want's values. It returns the number of
// queries.
func checkFleet(t *testing.T, prom *promtest.Server, at time.Time, ps []panel, fleet map[string]bool, want []wantValue) int {
	t.Helper()
	vals := map[string]string{"job": job}
	for k, v := range grafanaValues {
		vals[k] = v
	}
	results := map[[2]string][]promtest.Sample{}
	queries := 0
	for _, p := range ps {
		if !fleet[p.Title] {
			continue
		}
		for _, tg := range p.Targets {
			key := [2]string{p.Title, tg.RefID}
			expr, err := substitute(tg.Expr, vals)
			if err != nil {
				t.Error(err)
				continue
			}
			got, err := prom.QueryAt(expr, at)
			queries++
			_, empty := wantEmpty[key]
			switch {
			case err != nil:
				t.Errorf("fleet: panel %q target %s: %v", p.Title, tg.RefID, err)
			case empty && len(got) != 0:
				t.Errorf("fleet: panel %q target %s: %v for %s, want no data (%s)", p.Title, tg.RefID, got, expr, wantEmpty[key])
			case !empty && len(got) == 0:
				t.Errorf("fleet: panel %q target %s: no data for %s", p.Title, tg.RefID, expr)
			}
			results[key] = got
		}
	}
	for key := range wantEmpty {
		if _, ok := results[key]; !ok {
			t.Errorf("wantEmpty: no Fleet panel %q with target %s", key[0], key[1])
		}
	}
	for _, w := range want {
		got, ok := results[[2]string{w.panel, w.ref}]
		if !ok {
			t.Errorf("no Fleet panel %q with target %s", w.panel, w.ref)
			continue
		}
		checkValue(t, "fleet", w, got)
	}
	return queries
}

// rateWindowFull returns a time at which every target's last
// $__rate_interval holds at least 3 scrapes, so that each rate() has
// samples to work on. All panel queries are evaluated at that one time:
// on a loaded machine a scrape can stall or time out while the queries
// run, which would empty a window that ends at each query's own "now".
func rateWindowFull(t *testing.T, prom *promtest.Server) time.Time {
	t.Helper()
	expr := fmt.Sprintf("min(count_over_time(up{job=%q}[%s]))", job, grafanaValues["__rate_interval"])
	deadline := time.Now().Add(30 * time.Second)
	for {
		at := time.Now()
		got, err := prom.QueryAt(expr, at)
		if err == nil && len(got) == 1 && got[0].Value >= 3 {
			return at
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s window with 3 scrapes of every agent within 30 s: %s = %v, %v", grafanaValues["__rate_interval"], expr, got, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkValue finds the one sample of got whose labels include w.labels
// and compares its value.
func checkValue(t *testing.T, demo string, w wantValue, got []promtest.Sample) {
	t.Helper()
	var match []promtest.Sample
	for _, s := range got {
		ok := true
		for k, v := range w.labels {
			ok = ok && s.Metric[k] == v
		}
		if ok {
			match = append(match, s)
		}
	}
	if len(match) != 1 || match[0].Value != w.value {
		t.Errorf("%s: panel %q target %s %v = %v, want one series of value %g", demo, w.panel, w.ref, w.labels, match, w.value)
	}
}

// checkVariables evaluates the job and instance variables' label_values
// queries through the label values API, as Grafana's Prometheus data
// source does: job lists the job, instance (for that job) both agents.
func checkVariables(t *testing.T, d dashboard, prom *promtest.Server, targets []string) {
	t.Helper()
	want := map[string][]string{"job": {job}, "instance": slices.Sorted(slices.Values(targets))}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesRE.FindStringSubmatch(v.Query)
		if m == nil {
			t.Errorf("variable %s: %q is no label_values query", v.Name, v.Query)
			continue
		}
		match, err := substitute(m[1], map[string]string{"job": job})
		if err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
			continue
		}
		var matchers []string
		if match != "" {
			matchers = []string{match}
		}
		got, err := prom.LabelValues(m[2], matchers...)
		if err != nil || !slices.Equal(got, want[v.Name]) {
			t.Errorf("variable %s (%s): %q, %v; want %q", v.Name, v.Query, got, err, want[v.Name])
		}
	}
}

// checkMetricNames holds every metric a query names to the series
// Prometheus holds: a query that falls back to 0 (`or on() (0 * …)`)
// would hide a misspelt name from the no-data check.
func checkMetricNames(t *testing.T, d dashboard, prom *promtest.Server) {
	t.Helper()
	names, err := prom.LabelValues("__name__", fmt.Sprintf(`{job=%q}`, job))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range queryPanels(d.Panels) {
		for _, tg := range p.Targets {
			sels, _ := selectors(tg.Expr) // TestDashboard reports errors
			for _, s := range sels {
				if !slices.Contains(names, s.name) {
					t.Errorf("panel %q target %s: no series named %s on either demo machine", p.Title, tg.RefID, s.name)
				}
			}
		}
	}
}

// buildAgent builds cmd/gpuaffinity (the full binary, agent included)
// into a temporary directory.
func buildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gpuaffinity")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/gpuaffinity/gpuaffinity/cmd/gpuaffinity")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// agentProc is `gpuaffinity agent --demo NAME` running as a process.
type agentProc struct {
	addr   string
	stderr *promtest.SyncBuffer
	exited chan struct{}
}

// startAgent runs the agent on a demo machine, listening on addr, with
// its state and the demo machine's files in temporary directories.
// t.Cleanup stops it with SIGTERM.
func startAgent(t *testing.T, bin, demo, addr string) *agentProc {
	t.Helper()
	tmp := t.TempDir()
	a := &agentProc{addr: addr, stderr: &promtest.SyncBuffer{}, exited: make(chan struct{})}
	// The demo machine, written out, with NVML's process lists recorded
	// empty: an idle node whose lists NVML answers (the demo's own
	// nvml.json was recorded without them, which the jobs collector
	// rightly reports as not listed, never as 0 processes).
	root := filepath.Join(tmp, "root")
	if out, err := exec.Command(bin, "snapshot", "--demo", demo, "-f", root).CombinedOutput(); err != nil {
		t.Fatalf("snapshot --demo %s: %v\n%s", demo, err, out)
	}
	if _, err := os.Stat(filepath.Join(root, nvml.ReplayFileName)); err == nil {
		fakesystest.SetNVMLProcesses(t, root, nil, true)
	}
	// --collector.jobs: the Jobs row's series (the job audit is off by
	// default; docs/audit.md, "In the agent"). --placement off as --demo
	// has it: a demo machine is not where its DMI says.
	cmd := exec.Command(bin, "agent", "--root", root, "--placement", "off", "--state-dir", filepath.Join(tmp, "state"),
		"--web.listen-address", a.addr, "--collector.jobs")
	// The demo machine is built under TMPDIR; no GPUAFFINITY_* setting of
	// the caller reaches the agent.
	cmd.Env = []string{"TMPDIR=" + tmp}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GPUAFFINITY_") && !strings.HasPrefix(e, "TMPDIR=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Stdout, cmd.Stderr = a.stderr, a.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-a.exited
			t.Errorf("agent --demo %s did not stop within 10 s of SIGTERM; stderr:\n%s", demo, a.stderr)
		}
	})
	return a
}

// waitDiscovered waits until the agent's /metrics carries the topology
// series, which exist only after the first discovery (docs/metrics.md,
// "Topology"), so every scrape Prometheus takes has the full set.
func (a *agentProc) waitDiscovered(t *testing.T, demo string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := client.Get("http://" + a.addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte("\ngpuaffinity_topology_aligned ")) {
				return
			}
		}
		select {
		case <-a.exited:
			t.Fatalf("agent --demo %s exited; stderr:\n%s", demo, a.stderr)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent --demo %s: no topology series on /metrics within 30 s; stderr:\n%s", demo, a.stderr)
		}
	}
}
