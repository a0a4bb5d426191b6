//go:build !omit_agent

package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaffinity/gpuaffinity/agent"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/fleet/prom"
	"github.com/gpuaffinity/gpuaffinity/internal/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/promtest"
	"github.com/gpuaffinity/gpuaffinity/internal/slurmtest"
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
// its faults (an `extends` spec, as internal/fakesys FORMAT.md writes
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
// serving addr; it stops when the test ends.
func startFleetAgent(t *testing.T, n fleetNode, root, addr string) {
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
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("agent %s: %v", n.Name, err)
		}
	})
}

// TestFleet is the fleet view end to end: eleven agents on loopback, each
// on its own fixture (testdata/fleet/fleet.yaml: two GB200 NVL72 racks on
// a site's InfiniBand tree, a GCP block layout read from a fake GCE
// metadata server, an OCI layout from a fake IMDS, one drifted node),
// scraped by a real Prometheus; every `gpuaffinity fleet` output is
// compared with the hand-written file of testdata/fleet, and a real
// slurmctld runs with the generated tree.
func TestFleet(t *testing.T) {
	promtest.Binary(t)
	fx := loadFleetFixture(t)
	dir := t.TempDir()
	addrs := make([]string, len(fx.Nodes))
	for i := range fx.Nodes {
		addrs[i] = promtest.FreeAddr(t)
	}
	// Prometheus first: it applies its targets up to 5 s after it starts.
	srv := promtest.Start(t, "gpuaffinity", addrs...)
	var wg sync.WaitGroup
	for _, n := range fx.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); buildFleetNode(t, n, filepath.Join(dir, n.Name)) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, n := range fx.Nodes {
		startFleetAgent(t, n, filepath.Join(dir, n.Name), addrs[i])
	}
	srv.WaitScrapes(t, 1, 60*time.Second)
	waitFleetSeries(t, srv, len(fx.Nodes))

	p := []string{"--prometheus", srv.URL}
	fleetRun := func(args ...string) (stdout, stderr string, err error) {
		return runErr(t, append(append([]string{"fleet"}, args...), p...)...)
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

	tree, stderr, err := fleetRun("slurm-tree")
	if err != nil || stderr != "" {
		t.Fatalf("slurm-tree: %v, stderr %q", err, stderr)
	}
	check("topology-tree.conf", tree)

	out, stderr, err := fleetRun("slurm-block")
	if err != nil {
		t.Fatalf("slurm-block: %v\n%s", err, stderr)
	}
	check("topology-block.conf", out)
	if want := "7 nodes are in no NVLink domain and are left out of the blocks: gcp-u1, gcp-u2, gcp-u3, gcp-u4, gcp-u5, oci-h1, oci-h2"; !strings.Contains(stderr, want) {
		t.Errorf("slurm-block stderr lacks %q:\n%s", want, stderr)
	}
	out, _, err = fleetRun("slurm-yaml")
	if err != nil {
		t.Fatalf("slurm-yaml: %v", err)
	}
	check("topology.yaml", out)

	out, stderr, err = fleetRun("labels")
	if err != nil || stderr != "" {
		t.Fatalf("labels: %v, stderr %q", err, stderr)
	}
	check("labels-cloud.sh", out)
	out, _, err = fleetRun("labels", "--scheme", "topograph", "-o", "json")
	if err != nil {
		t.Fatalf("labels --scheme topograph: %v", err)
	}
	check("labels-topograph.json", out)

	// The report names exactly the drifted node: exit status 1.
	out, _, err = fleetRun("report")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != fleetExitDrift || !strings.Contains(err.Error(), "drifted: gcp-u4") {
		t.Errorf("report: err = %v, want exit %d naming gcp-u4", err, fleetExitDrift)
	}
	check("report.txt", digestRE.ReplaceAllString(out, "<digest>"))
	js, _, _ := fleetRun("report", "-o", "json")
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

	checkFleetDigests(t, srv.URL, fx, dir)
	checkTreeInSlurm(t, tree, fx)
}

// digestRE is a layout or firmware digest (fleet.Digest): the report's
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
// digests each agent exports equal fleet.Digest of the facts the fleet
// reader rebuilt from the other series, and equal the digests of the
// facts discovery gives on the node's root here; nodes built alike share
// them and the drifted node does not.
func checkFleetDigests(t *testing.T, url string, fx fleetFixture, dir string) {
	t.Helper()
	nodes, _, err := prom.Read(context.Background(), prom.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]fleet.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, fn := range fx.Nodes {
		n, ok := byName[fn.Name]
		if !ok {
			t.Errorf("fleet reader lacks node %s", fn.Name)
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
		if got := fleet.Digest(layout); got != n.Layout {
			t.Errorf("%s: layout label %s, digest of the facts read back %s (facts %v)", n.Name, n.Layout, got, layout)
		}
		if got := fleet.Digest(firmware); got != n.Firmware {
			t.Errorf("%s: firmware label %s, digest of the facts read back %s", n.Name, n.Firmware, got)
		}
		tn, err := discover.Discover(discover.Options{Root: filepath.Join(dir, fn.Name)})
		if err != nil {
			t.Fatalf("%s: discover: %v", fn.Name, err)
		}
		l, f := fleet.NodeFacts(&tn)
		if fleet.Digest(l) != n.Layout || fleet.Digest(f) != n.Firmware {
			t.Errorf("%s: digests of discovery's facts %s/%s, exported %s/%s", fn.Name, fleet.Digest(l), fleet.Digest(f), n.Layout, n.Firmware)
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
