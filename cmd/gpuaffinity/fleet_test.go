//go:build !omit_agent

package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/gpuaffinity/gpuaffinity/agent"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/fleet/kube"
	"github.com/gpuaffinity/gpuaffinity/fleet/nodeview"
	"github.com/gpuaffinity/gpuaffinity/fleet/prom"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/promtest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/slurmtest"
	"github.com/gpuaffinity/gpuaffinity/placement"
)

// fleetFixture is testdata/fleet/fleet.yaml: the fixture fleet.
type fleetFixture struct {
	Nodes []fleetNode `yaml:"nodes"`
}

type fleetNode struct {
	Name     string   `yaml:"name"`
	Machine  string   `yaml:"machine"`
	Switches []string `yaml:"switches"`
	Platform *struct {
		ChassisSerial string `yaml:"chassis_serial"`
		Slot          int    `yaml:"slot"`
		Tray          int    `yaml:"tray"`
	} `yaml:"platform"`
	PhysicalHost string `yaml:"physical_host"`
	OCI          *struct {
		HPCIsland    string `yaml:"hpc_island"`
		NetworkBlock string `yaml:"network_block"`
		LocalBlock   string `yaml:"local_block"`
		Host         string `yaml:"host"`
	} `yaml:"oci"`
	Faults map[string]any `yaml:"faults"`
}

func loadFleetFixture(t *testing.T) fleetFixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "fleet", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f fleetFixture
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("testdata/fleet/fleet.yaml: %v", err)
	}
	return f
}

// buildFleetNode writes node's fixture root under dir: its machine with
// its faults (an `extends` spec, as internal/testutil/fakesys FORMAT.md writes
// them), its hostname, and its GPUs' rack position.
func buildFleetNode(t *testing.T, n fleetNode, dir string) {
	t.Helper()
	doc := map[string]any{"name": n.Name, "extends": n.Machine}
	if n.Faults != nil {
		doc["faults"] = n.Faults
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := fakesys.Parse("fleet.yaml "+n.Name, data)
	if err != nil {
		t.Fatalf("node %s: %v", n.Name, err)
	}
	spec.Hostname = n.Name
	if p := n.Platform; p != nil {
		gpus := 0
		var walk func([]fakesys.Device)
		walk = func(ds []fakesys.Device) {
			for i := range ds {
				if g := ds[i].GPU; g != nil {
					if g.Platform == nil {
						g.Platform = &fakesys.GPUPlatform{}
					}
					g.Platform.ChassisSerial, g.Platform.Slot, g.Platform.Tray = p.ChassisSerial, p.Slot, p.Tray
					gpus++
				}
				walk(ds[i].Children)
			}
		}
		for i := range spec.PCI {
			walk(spec.PCI[i].Devices)
		}
		if gpus == 0 {
			t.Fatalf("node %s: platform given, but %s has no GPU", n.Name, n.Machine)
		}
	}
	if err := fakesys.Build(spec, dir); err != nil {
		t.Fatalf("node %s: %v", n.Name, err)
	}
}

// gcpMachineType is what the fake GCE metadata server answers for
// instance/machine-type: the fixture's a3-ultragpu-8g.
const gcpMachineType = "a3-ultragpu-8g"

// metadataServer serves node's cloud placement as the cloud's metadata
// service documents it: GCE's instance/attributes/physical_host and
// instance/machine-type (text, Metadata-Flavor: Google required) and OCI IMDS v2's
// host/rdmaTopologyData (JSON, Authorization: Bearer Oracle required).
// Requests without the header are refused, as the real services refuse
// them.
func metadataServer(t *testing.T, n fleetNode) string {
	t.Helper()
	mux := http.NewServeMux()
	switch {
	case n.PhysicalHost != "":
		mux.HandleFunc("GET "+placement.GCPPhysicalHostPath, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Metadata-Flavor") != "Google" {
				http.Error(w, "Missing Metadata-Flavor:Google header", http.StatusForbidden)
				return
			}
			w.Header().Set("Metadata-Flavor", "Google")
			w.Header().Set("Content-Type", "application/text")
			io.WriteString(w, n.PhysicalHost)
		})
		mux.HandleFunc("GET "+placement.GCPMachineTypePath, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Metadata-Flavor") != "Google" {
				http.Error(w, "Missing Metadata-Flavor:Google header", http.StatusForbidden)
				return
			}
			w.Header().Set("Metadata-Flavor", "Google")
			io.WriteString(w, "projects/123456789012/machineTypes/"+gcpMachineType)
		})
	case n.OCI != nil:
		mux.HandleFunc("GET "+placement.OCIRDMATopologyPath, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer Oracle" {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{
				"customerHPCIslandId":  n.OCI.HPCIsland,
				"customerNetworkBlock": n.OCI.NetworkBlock,
				"customerLocalBlock":   n.OCI.LocalBlock,
				"customerHostId":       n.OCI.Host,
			})
		})
	default:
		return ""
	}
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

// startFleetAgent runs the agent in this process on node's root,
// serving addr; it stops when the test ends, or when stop is called.
func startFleetAgent(t *testing.T, n fleetNode, root, addr string) (stop func()) {
	t.Helper()
	pl := agent.PlacementOptions{Cloud: agent.PlacementAuto, BaseURL: metadataServer(t, n), Timeout: 5 * time.Second, Switches: n.Switches}
	if n.PhysicalHost == "" && n.OCI == nil {
		pl.Cloud, pl.BaseURL = agent.PlacementOff, ""
	}
	a, err := agent.New(agent.Options{
		Root:            root,
		ListenAddresses: []string{addr},
		Placement:       pl,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("agent %s: %v", n.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("agent %s: %v", n.Name, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestFleet is the fleet view end to end: eleven agents on loopback, each
// on its own fixture (testdata/fleet/fleet.yaml: two GB200 NVL72 racks on
// a site's InfiniBand tree, a GCP block layout read from a fake GCE
// metadata server, an OCI layout from a fake IMDS, one drifted node),
// scraped by a real Prometheus that gives each target the node label the
// shipped ServiceMonitor gives it (here as static target labels, as a
// file_sd file would); every `gpuaffinity fleet` output is compared with
// the hand-written file of testdata/fleet, and a real slurmctld runs
// with the generated tree. Then, with the defaults: a node whose agent
// is down for two scrapes keeps its place and its labels (--apply sends
// no delete for it and never touches another component's label), and a
// twelfth agent that claims gb200-a1's host name is refused.
//
// Every command evaluates at one time T chosen when Prometheus held what
// the phase needs (--time), so a scrape that fails on a loaded machine
// after T changes nothing the test reads.
func TestFleet(t *testing.T) {
	promtest.Binary(t)
	fx := loadFleetFixture(t)
	dir := t.TempDir()
	targets := make([]promtest.Target, len(fx.Nodes))
	for i, n := range fx.Nodes {
		targets[i] = promtest.Target{Addr: promtest.FreeAddr(t), Labels: map[string]string{"node": n.Name}}
	}
	// The impostor: gb200-a1's fixture and host name, another target.
	impostor := fleetNode{Name: "gb200-a1", Machine: "gb200-nvl72-tray", Switches: []string{"ib-leaf-09", "ib-spine-09"}}
	impostorTarget := promtest.Target{Addr: promtest.FreeAddr(t), Labels: map[string]string{"node": "impostor-1"}}
	// Its port stays taken until its agent starts (phase 3), so that
	// nothing else started meanwhile (slurmctld) is handed it.
	reserved, err := net.Listen("tcp", impostorTarget.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer reserved.Close()
	// Prometheus first: it applies its targets up to 5 s after it starts.
	srv := promtest.StartTargets(t, "gpuaffinity", append(slices.Clone(targets), impostorTarget)...)
	var wg sync.WaitGroup
	for _, n := range append(slices.Clone(fx.Nodes), impostor) {
		root := n.Name
		if n.Name == impostor.Name && len(n.Switches) > 0 && n.Switches[0] == "ib-leaf-09" {
			root = "impostor-1"
		}
		wg.Add(1)
		go func() { defer wg.Done(); buildFleetNode(t, n, filepath.Join(dir, root)) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	stops := map[string]func(){}
	for i, n := range fx.Nodes {
		stops[n.Name] = startFleetAgent(t, n, filepath.Join(dir, n.Name), targets[i].Addr)
	}
	names := make([]string, len(fx.Nodes))
	for i, n := range fx.Nodes {
		names[i] = n.Name
	}
	at := waitFleetAt(t, srv, names, nil)

	fleetRun := func(at time.Time, args ...string) (stdout, stderr string, err error) {
		return runErr(t, append(append([]string{"fleet"}, args...), "--prometheus", srv.URL, "--time", at.Format(time.RFC3339Nano))...)
	}
	check := func(name, got string) {
		t.Helper()
		want, err := os.ReadFile(filepath.Join("testdata", "fleet", name))
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s differs from testdata/fleet/%s:\n--- got\n%s--- want\n%s", name, name, got, want)
		}
	}
	// goldens checks every writer's output at at; the -o json patch
	// list lists no removals for a stale node (nothing is deleted because
	// a node's series are missing).
	goldens := func(at time.Time, phase string, stale []string, extra ...string) string {
		t.Helper()
		tree, stderr, err := fleetRun(at, append([]string{"slurm-tree"}, extra...)...)
		if err != nil {
			t.Fatalf("%s: slurm-tree: %v\n%s", phase, err, stderr)
		}
		check("topology-tree.conf", tree)
		out, stderr, err := fleetRun(at, append([]string{"slurm-block"}, extra...)...)
		if err != nil {
			t.Fatalf("%s: slurm-block: %v\n%s", phase, err, stderr)
		}
		check("topology-block.conf", out)
		if want := "7 nodes are in no NVLink domain and are left out of the blocks: gcp-u1, gcp-u2, gcp-u3, gcp-u4, gcp-u5, oci-h1, oci-h2"; !strings.Contains(stderr, want) {
			t.Errorf("%s: slurm-block stderr lacks %q:\n%s", phase, want, stderr)
		}
		out, stderr, err = fleetRun(at, append([]string{"slurm-yaml"}, extra...)...)
		if err != nil {
			t.Fatalf("%s: slurm-yaml: %v\n%s", phase, err, stderr)
		}
		check("topology.yaml", out)
		out, stderr, err = fleetRun(at, append([]string{"labels"}, extra...)...)
		if err != nil {
			t.Fatalf("%s: labels: %v\n%s", phase, err, stderr)
		}
		check("labels-cloud.sh", out)
		out, stderr, err = fleetRun(at, append([]string{"labels", "--scheme", "topograph", "-o", "json"}, extra...)...)
		if err != nil {
			t.Fatalf("%s: labels --scheme topograph: %v\n%s", phase, err, stderr)
		}
		if len(stale) == 0 {
			check("labels-topograph.json", out)
			return tree
		}
		want, err := os.ReadFile(filepath.Join("testdata", "fleet", "labels-topograph.json"))
		if err != nil {
			t.Fatal(err)
		}
		var got, wantList []fleet.Patch
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: labels -o json: %v", phase, err)
		}
		json.Unmarshal(want, &wantList)
		for i := range wantList {
			if slices.Contains(stale, wantList[i].Node) {
				wantList[i].Remove = nil
			}
		}
		if d := cmp.Diff(wantList, got, cmpopts.IgnoreUnexported(fleet.Patch{})); d != "" {
			t.Errorf("%s: labels -o json (-want +got):\n%s", phase, d)
		}
		return tree
	}

	tree := goldens(at, "all scraped", nil)
	_, stderr, _ := fleetRun(at, "slurm-tree")
	if stderr != "" {
		t.Errorf("slurm-tree with every node scraped warns:\n%s", stderr)
	}
	checkPreviousFile(t, fleetRun, at, tree)

	// The report names exactly the drifted node: exit status 1.
	out, _, err := fleetRun(at, "report")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != fleetExitDrift || !strings.Contains(err.Error(), "drifted: gcp-u4") {
		t.Errorf("report: err = %v, want exit %d naming gcp-u4", err, fleetExitDrift)
	}
	check("report.txt", digestRE.ReplaceAllString(out, "<digest>"))
	js, _, _ := fleetRun(at, "report", "-o", "json")
	var rep fleet.Report
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("report -o json: %v\n%s", err, js)
	}
	var drifted []string
	for _, g := range rep.Groups {
		for _, d := range g.Drifted {
			drifted = append(drifted, d.Node)
		}
	}
	if !slices.Equal(drifted, []string{"gcp-u4"}) {
		t.Errorf("report -o json: drifted %q, want [gcp-u4]", drifted)
	}

	checkFleetDigests(t, srv.URL, at, fx, dir)
	checkTreeInSlurm(t, tree, fx)

	// gb200-a2's agent stops (a restart, a rollout): two scrapes later
	// Prometheus has marked its series stale. Every file is the same,
	// the report lists it as stale and its clique whole, and --apply
	// deletes none of its labels.
	stops["gb200-a2"]()
	at2 := waitFleetAt(t, srv, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "gb200-a2" }), []string{"gb200-a2"})
	goldens(at2, "gb200-a2 down", []string{"gb200-a2"})
	out, _, err = fleetRun(at2, "report")
	if !errors.As(err, &ee) || ee.code != fleetExitDrift || !strings.Contains(err.Error(), "drifted: gcp-u4") || strings.Contains(err.Error(), "missing") {
		t.Errorf("report with gb200-a2 down: err = %v, want exit %d naming gcp-u4 alone", err, fleetExitDrift)
	}
	for _, want := range []string{
		"STALE gb200-a2: not scraped now",
		"CLIQUE 5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845.32766: 2 nodes, IMEX lists 2, 0 missing: gb200-a1 gb200-a2",
		"GROUP GB200 NVL / NVIDIA GB200: 3 nodes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report with gb200-a2 down lacks %q:\n%s", want, out)
		}
	}
	checkApply(t, fleetRun, at2)

	// The impostor's agent starts: its target is impostor-1, its agent
	// says it is gb200-a1. With the defaults nothing is written and the
	// refusal names it; with --skip-refused gb200-a1 keeps its own place.
	reserved.Close()
	startFleetAgent(t, impostor, filepath.Join(dir, "impostor-1"), impostorTarget.Addr)
	at3 := waitFleetAt(t, srv, append(slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "gb200-a2" }), "impostor-1"), nil)
	out, stderr, err = fleetRun(at3, "slurm-tree")
	if err == nil || out != "" || !strings.Contains(stderr, `(node "impostor-1"): its agent reports host name "gb200-a1": refused`) {
		t.Errorf("slurm-tree with an impostor: err %v, stdout %q, stderr:\n%s\nwant a refusal naming it and nothing written", err, out, stderr)
	}
	goldens(at3, "impostor", []string{"gb200-a2"}, "--skip-refused")
}

// checkPreviousFile: with -f, the file there is the previous one. The
// same fleet writes the same file; a run that sees only part of the
// fleet (a selector that leaves out the four GB200 trays) would drop 4
// of its 11 nodes, more than --max-drop's 1 %: it writes nothing, exits
// non-zero and names them; --max-drop 4 or --force writes.
func checkPreviousFile(t *testing.T, fleetRun func(time.Time, ...string) (string, string, error), at time.Time, tree string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "topology.conf")
	if _, stderr, err := fleetRun(at, "slurm-tree", "-f", file); err != nil {
		t.Fatalf("slurm-tree -f: %v\n%s", err, stderr)
	}
	if _, stderr, err := fleetRun(at, "slurm-tree", "-f", file); err != nil || stderr != "" {
		t.Errorf("slurm-tree -f over its own file: %v, stderr %q", err, stderr)
	}
	part := []string{"slurm-tree", "-f", file, "--selector", `{node!~"gb200-.*"}`}
	_, _, err := fleetRun(at, part...)
	if err == nil || !strings.Contains(err.Error(), "it drops 4 of the previous file's 11 nodes, more than --max-drop 1% allows (0): gb200-a1, gb200-a2, gb200-b1, gb200-b2") {
		t.Errorf("slurm-tree seeing part of the fleet: %v, want a refusal naming the GB200 trays", err)
	}
	if got, _ := os.ReadFile(file); string(got) != tree {
		t.Errorf("a refused run changed the file:\n%s", got)
	}
	if _, stderr, err := fleetRun(at, append(part, "--max-drop", "4")...); err != nil || !strings.Contains(stderr, "4 nodes of the previous file are not in the tree now") {
		t.Errorf("--max-drop 4: %v\n%s", err, stderr)
	}
	if got, _ := os.ReadFile(file); strings.Contains(string(got), "gb200") {
		t.Errorf("--max-drop 4 kept the trays:\n%s", got)
	}
}

// checkApply runs `labels --apply` against a fake API server whose nodes
// hold the labels testdata/fleet/labels-cloud.sh sets, with these
// differences: gb200-a1 holds a gpuaffinity.io/host-id an earlier run
// set (its annotation lists it) that no longer holds; gb200-a2 (its
// agent down) an earlier run's network.tier-2; gb200-b1 a GPU Feature
// Discovery clique other than its agent's; gcp-u1 lacks GKE's host key;
// login-1 is no fleet node. The patches: gb200-a1 deletes host-id;
// gcp-u1 sets the host key and records it; nothing else is patched, no
// patch deletes a label of gb200-a2, none touches gb200-b1's clique.
func checkApply(t *testing.T, fleetRun func(time.Time, ...string) (string, string, error), at time.Time) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", "fleet", "labels-cloud.sh"))
	if err != nil {
		t.Fatal(err)
	}
	type knode struct {
		labels, annotations map[string]string
	}
	nodes := map[string]*knode{"login-1": {labels: map[string]string{"kubernetes.io/os": "linux"}}}
	for _, line := range strings.Split(strings.TrimSpace(string(script)), "\n") {
		f := strings.Fields(line) // kubectl label node NAME --overwrite K=V...
		n := &knode{labels: map[string]string{"kubernetes.io/os": "linux"}, annotations: map[string]string{}}
		var own []string
		for _, kv := range f[5:] {
			k, v, _ := strings.Cut(kv, "=")
			n.labels[k] = v
			if fleet.ForeignOwner(k) == "" {
				own = append(own, k)
			}
		}
		if len(own) > 0 {
			n.annotations[fleet.OwnedAnnotation] = strings.Join(own, ",")
		}
		nodes[f[3]] = n
	}
	nodes["gb200-a1"].labels["gpuaffinity.io/host-id"] = "old-host"
	nodes["gb200-a1"].annotations[fleet.OwnedAnnotation] += ",gpuaffinity.io/host-id"
	nodes["gb200-a2"].labels["gpuaffinity.io/network.tier-2"] = "old-core"
	nodes["gb200-a2"].annotations[fleet.OwnedAnnotation] += ",gpuaffinity.io/network.tier-2"
	nodes["gb200-b1"].labels["nvidia.com/gpu.clique"] = "feedface.3"
	delete(nodes["gcp-u1"].labels, "cloud.google.com/gce-topology-host")

	var mu sync.Mutex
	patches := map[string]string{}
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fleet-token" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes":
			var items []any
			for name, n := range nodes {
				items = append(items, map[string]any{"metadata": map[string]any{"name": name, "resourceVersion": "7", "labels": n.labels, "annotations": n.annotations}})
			}
			json.NewEncoder(w).Encode(map[string]any{"kind": "PartialObjectMetadataList", "metadata": map[string]any{}, "items": items})
		case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/api/v1/nodes/"):
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			patches[strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/")] = string(b)
			mu.Unlock()
			io.WriteString(w, "{}")
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	sa := t.TempDir()
	os.WriteFile(filepath.Join(sa, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}), 0o644)
	os.WriteFile(filepath.Join(sa, "token"), []byte("fleet-token\n"), 0o600)
	old := inCluster
	inCluster = func() (*kube.Client, error) { return kube.New(api.URL, sa) }
	defer func() { inCluster = old }()

	out, stderr, err := fleetRun(at, "labels", "--apply")
	if err != nil {
		t.Fatalf("labels --apply: %v\n%s", err, stderr)
	}
	want := map[string]string{
		"gb200-a1": `{"metadata":{"annotations":{"gpuaffinity.io/fleet-labels":"gpuaffinity.io/network.tier-0,gpuaffinity.io/network.tier-1"},"labels":{"gpuaffinity.io/host-id":null},"resourceVersion":"7"}}`,
		"gcp-u1":   `{"metadata":{"annotations":{"gpuaffinity.io/fleet-labels":"cloud.google.com/gce-topology-host"},"labels":{"cloud.google.com/gce-topology-host":"0a1b2c3d4e5f6071"},"resourceVersion":"7"}}`,
	}
	if d := cmp.Diff(want, patches); d != "" {
		t.Errorf("patches (-want +got):\n%s\nstdout:\n%s\nstderr:\n%s", d, out, stderr)
	}
	for _, w := range []string{`node "gb200-b1": label nvidia.com/gpu.clique="feedface.3" is GPU Feature Discovery's; left as it is`} {
		if !strings.Contains(stderr, w) {
			t.Errorf("labels --apply stderr lacks %q:\n%s", w, stderr)
		}
	}
	if !strings.Contains(out, "2 nodes patched, 9 unchanged, 0 failed; 1 Kubernetes nodes without agent series left as they are") {
		t.Errorf("labels --apply summary:\n%s", out)
	}
}

// waitFleetAt waits until Prometheus holds, at one moment T, the
// placement and layout series of every node of live and of no node of
// down, down's targets down for the last two scrapes at least, and
// returns T: the commands then evaluate at T.
func waitFleetAt(t *testing.T, srv *promtest.Server, live, down []string) time.Time {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	re := func(ns []string) string { return strconv.Quote(strings.Join(ns, "|")) }
	var last string
	for {
		at := time.Now().Add(-time.Second)
		ok := true
		for _, fam := range []string{"gpuaffinity_node_placement_info", "gpuaffinity_node_layout_info"} {
			got, err := srv.QueryAt("count("+fam+"{node=~"+re(live)+"})", at)
			ok = ok && err == nil && len(got) == 1 && got[0].Value == float64(len(live))
			last = fmt.Sprintf("%s: %v %v", fam, got, err)
			if len(down) > 0 {
				got, err = srv.QueryAt(fam+"{node=~"+re(down)+"}", at)
				ok = ok && err == nil && len(got) == 0
			}
		}
		if len(down) > 0 {
			got, err := srv.QueryAt("count_over_time(up{node=~"+re(down)+"}[5s]) >= 2 and max_over_time(up{node=~"+re(down)+"}[5s]) == 0", at)
			ok = ok && err == nil && len(got) == len(down)
			last += fmt.Sprintf("; down: %v %v", got, err)
		}
		if ok {
			return at
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s Prometheus has not held live %q and down %q at one time (last: %s); its log:\n%s", live, down, last, srv.Logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// digestRE is a layout or firmware digest (nodeview.Digest): the report's
// expectation holds <digest> in its place, since checkFleetDigests
// checks the digests themselves.
var digestRE = regexp.MustCompile(`\b[0-9a-f]{16}\b`)

// waitFleetSeries waits until Prometheus has every agent's layout
// series: the agents export it after their first discovery round.
func waitFleetSeries(t *testing.T, srv *promtest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := srv.Query("gpuaffinity_node_layout_info")
		if err == nil && len(got) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s Prometheus has %d gpuaffinity_node_layout_info series (err %v), want %d; its log:\n%s", len(got), err, n, srv.Logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkFleetDigests checks the digests two ways: the layout and firmware
// digests each agent exports equal nodeview.Digest of the facts the fleet
// reader rebuilt from the other series, and equal the digests of the
// facts discovery gives on the node's root here; nodes built alike share
// them and the drifted node does not.
func checkFleetDigests(t *testing.T, url string, at time.Time, fx fleetFixture, dir string) {
	t.Helper()
	fl, err := prom.Read(context.Background(), prom.Options{URL: url, Time: at, Report: true})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]fleet.Node{}
	withFacts := 0
	for _, n := range fl.Nodes {
		byName[n.Name] = n
		if n.Facts != nil {
			withFacts++
		}
	}
	// One node of each variant carries the facts: GB200 (one layout for
	// both racks), GCP's four alike and gcp-u4, OCI.
	if withFacts != 4 {
		t.Errorf("%d nodes carry facts, want one per variant (4)", withFacts)
	}
	for _, fn := range fx.Nodes {
		n, ok := byName[fn.Name]
		if !ok {
			t.Errorf("fleet reader lacks node %s", fn.Name)
			continue
		}
		tn, err := discover.Discover(discover.Options{Root: filepath.Join(dir, fn.Name)})
		if err != nil {
			t.Fatalf("%s: discover: %v", fn.Name, err)
		}
		l, f := nodeview.NodeFacts(&tn)
		if nodeview.Digest(l) != n.Layout || nodeview.Digest(f) != n.Firmware {
			t.Errorf("%s: digests of discovery's facts %s/%s, exported %s/%s", fn.Name, nodeview.Digest(l), nodeview.Digest(f), n.Layout, n.Firmware)
		}
		if n.Facts == nil {
			continue
		}
		var layout, firmware []fleet.Fact
		for _, f := range n.Facts {
			if strings.HasSuffix(f.Key, ".firmware") {
				firmware = append(firmware, f)
			} else {
				layout = append(layout, f)
			}
		}
		if got := nodeview.Digest(layout); got != n.Layout {
			t.Errorf("%s: layout label %s, digest of the facts read back %s (facts %v)", n.Name, n.Layout, got, layout)
		}
		if got := nodeview.Digest(firmware); got != n.Firmware {
			t.Errorf("%s: firmware label %s, digest of the facts read back %s", n.Name, n.Firmware, got)
		}
	}
	for _, peer := range []string{"gcp-u2", "gcp-u3", "gcp-u5"} {
		if byName[peer].Layout != byName["gcp-u1"].Layout {
			t.Errorf("%s and gcp-u1 are built alike, but their layouts differ: %s, %s", peer, byName[peer].Layout, byName["gcp-u1"].Layout)
		}
	}
	if byName["gcp-u4"].Layout == byName["gcp-u1"].Layout {
		t.Errorf("gcp-u4 lost a NIC, but its layout digest is its peers'")
	}
}

// checkTreeInSlurm runs Debian's slurmctld with the generated tree and
// the fleet's nodes listed so that consecutive nodes sit on different
// fabrics (gb200-a1, gcp-u1, oci-h1, gb200-b1, …): topology/none takes
// the first free nodes in that order, so a scheduler that ignored the
// tree would give a 2-node job nodes with no switch in common (the
// slurmtest package's own test shows that order at work). With the tree,
// every multi-node job lands under one switch.
func checkTreeInSlurm(t *testing.T, tree string, fx fleetFixture) {
	t.Helper()
	order := []string{"gb200-a1", "gcp-u1", "oci-h1", "gb200-b1", "gcp-u3", "oci-h2", "gb200-a2", "gcp-u2", "gb200-b2", "gcp-u4", "gcp-u5"}
	// above is every node's switches, leaf first, from the fixture.
	above := map[string][]string{}
	for _, n := range fx.Nodes {
		switch {
		case len(n.Switches) > 0:
			above[n.Name] = n.Switches
		case n.PhysicalHost != "":
			p := strings.Split(n.PhysicalHost, "/") // "", block, subblock, host
			above[n.Name] = []string{p[2], p[1]}
		case n.OCI != nil:
			above[n.Name] = []string{n.OCI.LocalBlock, n.OCI.NetworkBlock, n.OCI.HPCIsland}
		}
	}
	if len(order) != len(above) {
		t.Fatalf("the Slurm order lists %d nodes, the fixture has %d with switches", len(order), len(above))
	}
	c := slurmtest.Start(t, slurmtest.Config{Nodes: order, TopologyPlugin: "topology/tree", Topology: tree})
	topo := c.Run(t, "scontrol", "show", "topology")
	for _, sw := range []string{"ib-leaf-01", "ib-leaf-02", "ib-spine-01", "c1a2f3e4d5b6a7c8", "ocid1.hpcisland.oc1.iad.isl1"} {
		if !strings.Contains(topo, "SwitchName="+sw+" ") {
			t.Errorf("scontrol show topology lacks switch %s:\n%s", sw, topo)
		}
	}
	for _, n := range []int{2, 4} {
		got := c.Allocate(t, n)
		common := map[string]int{}
		for _, node := range got {
			for _, sw := range above[node] {
				common[sw]++
			}
		}
		under := ""
		for sw, k := range common {
			if k == n && (under == "" || sw < under) {
				under = sw
			}
		}
		if len(got) != n || under == "" {
			t.Errorf("slurmctld with the generated tree gave a %d-node job %q: want nodes under one switch", n, got)
		} else {
			t.Logf("slurmctld placed a %d-node job on %q, under %s", n, got, under)
		}
	}
}

// A report that cannot read the fleet exits 2, never 1 (drifted) or 0:
// an unreachable Prometheus is "could not check".
func TestFleetReportUnreachable(t *testing.T) {
	_, _, err := runErr(t, "fleet", "report", "--prometheus", "http://127.0.0.1:1", "--timeout", "2s")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != fleetExitCannotRead || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("report against nothing: %v, want exit %d naming the server", err, fleetExitCannotRead)
	}
}

// The fleet commands collect as Go's defaults have it: commandGC's
// off-below-64-MiB setting made a 50,000-node read collect back to back
// past its limit. GOGC and GOMEMLIMIT, where set, still win.
func TestFleetGC(t *testing.T) {
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	os.Unsetenv("GOMEMLIMIT")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	commandGC()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("commandGC left GOGC %d, want off", got)
	}
	commandGC()
	fleetGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("fleet commands collect with GOGC %d, want 100", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("fleet commands' memory limit %d, want none", got)
	}
}
