package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/fleet/nodeview"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/placement"
)

// TestGenerate checks a fleet of 100: its composition, unique identities,
// and digests that match the node's own series as the fleet reader
// rebuilds facts from them.
func TestGenerate(t *testing.T) {
	nodes, c := generate(100, defaultSeed)
	want := composition{racks: 2, gb200: 36, dgx: 30, aws: 10, gcp: 10, oci: 14, drifted: 2, gapped: 1}
	if c != want {
		t.Errorf("composition %+v, want %+v", c, want)
	}
	if len(nodes) != 100 {
		t.Fatalf("%d nodes, want 100", len(nodes))
	}
	seen := map[string]bool{}
	unique := func(what, v string) {
		if seen[v] {
			t.Errorf("%s %q twice", what, v)
		}
		seen[v] = true
	}
	count := map[*machine]int{}
	usual := map[*machine]string{} // an undrifted node's digests
	drifted, gapped := 0, 0
	for _, nd := range nodes {
		unique("name", nd.name)
		unique("instance", nd.instance)
		for _, u := range nd.uuids {
			unique("GPU UUID", u)
		}
		count[nd.m]++
		if nd.drift != "" {
			drifted++
		}
		if nd.gapped {
			gapped++
			if nd.drift != "" {
				t.Errorf("%s: both drifted and gapped", nd.name)
			}
		}
		layout, firmware := fleetFacts(nd)
		if got := nodeview.Digest(layout); got != nd.layout {
			t.Errorf("%s: layout %s, its series give %s", nd.name, nd.layout, got)
		}
		if got := nodeview.Digest(firmware); got != nd.fwDigest {
			t.Errorf("%s: firmware %s, its series give %s", nd.name, nd.fwDigest, got)
		}
		if nd.drift == "" {
			if u, ok := usual[nd.m]; ok && u != nd.layout+nd.fwDigest {
				t.Errorf("%s: digests differ from its undrifted peers'", nd.name)
			}
			usual[nd.m] = nd.layout + nd.fwDigest
		}
		for _, s := range nd.series("gpuaffinity_node_placement_info") {
			if got := get(s, "hostname"); got != nd.name || get(s, "node") != nd.name {
				t.Errorf("%s: hostname %q, node %q", nd.name, got, get(s, "node"))
			}
			if nd.m == ociH100 && len(get(s, "tier2")) <= 64 {
				t.Errorf("%s: OCI tier2 %q: want an OCID of over 64 characters", nd.name, get(s, "tier2"))
			}
		}
	}
	for _, nd := range nodes {
		if nd.drift != "" && usual[nd.m] == nd.layout+nd.fwDigest {
			t.Errorf("%s: drifted (%s) with its peers' digests", nd.name, nd.drift)
		}
	}
	if got := (composition{racks: 2, gb200: count[gb200], dgx: count[dgxH100], aws: count[awsP5], gcp: count[gcpA3Ultra],
		oci: count[ociH100], drifted: drifted, gapped: gapped}); got != want {
		t.Errorf("nodes made %+v, want %+v", got, want)
	}
	again, _ := generate(100, defaultSeed)
	if again[42].uuids[0] != nodes[42].uuids[0] || again[99].layout != nodes[99].layout {
		t.Error("two fleets of one seed and size differ")
	}
}

// TestOpenMetrics checks the text promtool reads: families together,
// each series' samples in time order, # EOF last, and the gapped nodes'
// series ending before the gap while their up turns 0.
func TestOpenMetrics(t *testing.T) {
	nodes, _ := generate(100, defaultSeed)
	var buf bytes.Buffer
	nseries, nsamples, err := writeOpenMetrics(&buf, nodes, defaultSampling)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte("\n# EOF\n")) {
		t.Fatal("no # EOF line at the end")
	}
	gappedNode := map[string]bool{}
	for _, nd := range nodes {
		if nd.gapped {
			gappedNode[nd.name] = true
		}
	}
	gap := evalTime.Add(-gapBefore).Unix()
	var done []string // families finished
	family := ""
	last := map[string]int64{} // series → its last timestamp
	series, samples := 0, 0
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			if slices.Contains(done, name) {
				t.Fatalf("family %s twice", name)
			}
			done, family = append(done, name), name
			continue
		}
		if line == "# EOF" {
			continue
		}
		i := strings.LastIndexByte(line, '}')
		head, rest := line[:i+1], strings.Fields(line[i+1:])
		if !strings.HasPrefix(head, family+"{") || len(rest) != 2 {
			t.Fatalf("line %q: not a sample of family %s with a timestamp", line, family)
		}
		ts, err := strconv.ParseInt(rest[1], 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		prev, ok := last[head]
		if ok && ts <= prev {
			t.Fatalf("line %q: timestamp not after the series' last, %d", line, prev)
		}
		if !ok {
			series++
		}
		last[head] = ts
		samples++
		if ts >= evalTime.Unix() || ts < evalTime.Add(-time.Hour).Unix() {
			t.Fatalf("line %q: outside the hour before T", line)
		}
		node := head[strings.Index(head, `,node="`)+7:]
		node = node[:strings.IndexByte(node, '"')]
		if gappedNode[node] && ts >= gap && (family != "up" || rest[0] != "0") {
			t.Errorf("line %q: a gapped node's sample after the gap", line)
		}
		if !gappedNode[node] && family == "up" && rest[0] != "1" {
			t.Errorf("line %q: up not 1", line)
		}
	}
	if len(done) != len(families) || series != nseries || samples != nsamples {
		t.Errorf("%d families, %d series, %d samples; writeOpenMetrics says %d series, %d samples", len(done), series, samples, nseries, nsamples)
	}
}

// TestMachinesMatchExamples discovers each machine's example in memory
// and checks that an undrifted node of it has the facts, labels and
// digests the agent would export.
func TestMachinesMatchExamples(t *testing.T) {
	nodes, _ := generate(100, defaultSeed)
	for _, m := range machines {
		t.Run(m.demo, func(t *testing.T) {
			root, lib, err := fakesys.BuildMachineMemory(m.demo)
			if err != nil {
				t.Fatal(err)
			}
			opts := discover.Options{FS: root}
			if lib != nil {
				opts.NVML, opts.NVMLSource = lib, nvml.SourceReplay
			}
			n, err := discover.Discover(opts)
			if err != nil {
				t.Fatal(err)
			}
			var pl *placement.Placement
			if m == gcpA3Ultra {
				pl = &placement.Placement{InstanceType: m.model} // GCP's DMI names no type: the metadata's machine type
			}
			d := nodeview.Describe(&n, pl, "x")
			var nd *node
			for _, x := range nodes {
				if x.m == m && x.drift == "" {
					nd = x
					break
				}
			}
			layout, firmware := nd.facts()
			if diff := cmp.Diff(d.Facts, sorted(append(layout, firmware...))); diff != "" {
				t.Errorf("facts (-example +generated):\n%s", diff)
			}
			if d.Layout != nd.layout || d.Firmware != nd.fwDigest {
				t.Errorf("digests %s %s, the example's %s %s", nd.layout, nd.fwDigest, d.Layout, d.Firmware)
			}
			if d.Model != m.model || d.GPUModel != m.gpuModel || d.Cloud != m.cloud || d.IMEXNodes != m.imex {
				t.Errorf("model %q, GPU model %q, cloud %q, IMEX nodes %d; the example's %q, %q, %q, %d",
					m.model, m.gpuModel, m.cloud, m.imex, d.Model, d.GPUModel, d.Cloud, d.IMEXNodes)
			}
			var gpus []gpuSlot
			for _, g := range n.GPUs {
				s := gpuSlot{bus: g.BusID, numa: -1}
				if g.Locality.Node != nil {
					s.numa = *g.Locality.Node
				}
				for _, p := range n.Pairs {
					if p.GPU == g.Index {
						s.nics = p.NICs
					}
				}
				gpus = append(gpus, s)
			}
			if diff := cmp.Diff(gpus, m.gpus, cmp.AllowUnexported(gpuSlot{})); diff != "" {
				t.Errorf("GPUs (-example +generated):\n%s", diff)
			}
			var nics []nicSpec
			for _, c := range n.NICs {
				if c.RDMADevice == "" {
					continue
				}
				s := nicSpec{dev: c.RDMADevice, bus: c.BusID, fabric: string(c.Fabric), role: string(c.Role), firmware: c.FirmwareVersion}
				if len(c.Netdevs) > 0 {
					s.netdev = c.Netdevs[0]
				}
				if len(c.Ports) > 0 {
					s.linkLayer = c.Ports[0].LinkLayer
					if c.Ports[0].Netdev != "" {
						s.netdev = c.Ports[0].Netdev
					}
				}
				nics = append(nics, s)
			}
			if diff := cmp.Diff(nics, m.nics, cmp.AllowUnexported(nicSpec{})); diff != "" {
				t.Errorf("RDMA devices (-example +generated):\n%s", diff)
			}
		})
	}
}

// TestGOMEMLIMIT checks that -gomemlimit defaults to the fleet CronJob's.
func TestGOMEMLIMIT(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "kubernetes", "fleet", "cronjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "- name: GOMEMLIMIT")
	if !ok {
		t.Fatal("cronjob.yaml sets no GOMEMLIMIT")
	}
	_, rest, _ = strings.Cut(rest, "value:")
	value, _, _ := strings.Cut(strings.TrimSpace(rest), "\n")
	if value = strings.Trim(strings.TrimSpace(value), `"`); value != cronJobGOMEMLIMIT {
		t.Errorf("cronjob.yaml's GOMEMLIMIT is %q, -gomemlimit's default %q", value, cronJobGOMEMLIMIT)
	}
}

// fleetFacts rebuilds a node's facts from its series as the fleet reader
// (fleet/prom) does: what the layout and firmware digests must match.
func fleetFacts(nd *node) (layout, firmware []fleet.Fact) {
	layout = []fleet.Fact{{Key: nodeview.KeyGPUs, Value: strconv.Itoa(len(nd.series("gpuaffinity_gpu_info")))}}
	nics := map[string][]string{}
	class := map[string]string{}
	for _, s := range nd.series("gpuaffinity_topology_pair_info") {
		g := get(s, "gpu")
		nics[g] = append(nics[g], get(s, "nic"))
		class[g] = get(s, "class")
	}
	for _, s := range nd.series("gpuaffinity_gpu_info") {
		g := get(s, "gpu")
		layout = append(layout, fleet.Fact{Key: nodeview.GPUKey(g, "model"), Value: get(s, "model")},
			fleet.Fact{Key: nodeview.GPUKey(g, "nics"), Value: nodeview.PairFact(nics[g], class[g])})
	}
	for _, s := range nd.series("gpuaffinity_rdma_info") {
		dev := get(s, "device")
		layout = append(layout, fleet.Fact{Key: nodeview.NICKey(dev, "role"), Value: get(s, "role")},
			fleet.Fact{Key: nodeview.NICKey(dev, "fabric"), Value: get(s, "fabric")})
		firmware = append(firmware, fleet.Fact{Key: nodeview.NICKey(dev, "firmware"), Value: get(s, "firmware")})
	}
	return layout, firmware
}

func get(s series, name string) string {
	for _, l := range s.labels {
		if l.name == name {
			return l.value
		}
	}
	return ""
}

func sorted(facts []fleet.Fact) []fleet.Fact {
	slices.SortFunc(facts, func(a, b fleet.Fact) int { return strings.Compare(a.Key, b.Key) })
	return facts
}
