package fleet

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/slurmtest"
)

// hostileTierNodes are a fleet where one node's tiers aim at the name an
// earlier version made for a switch under two parents: leaf L is under
// spines S1 and S2, so the two L switches need made names, and the
// earlier version named the one under S1 "L-" + the first 8 hex of
// FNV-64a("L\x00S1") = L-caae9fb6 without checking it against the names
// taken; node h1 reports a leaf of exactly that name, under a switch L.
func hostileTierNodes() []Node {
	return []Node{
		{Name: "a1", Tiers: []string{"L", "S1"}},
		{Name: "a2", Tiers: []string{"L", "S1"}},
		{Name: "b1", Tiers: []string{"L", "S2"}},
		{Name: "b2", Tiers: []string{"L", "S2"}},
		{Name: "h1", Tiers: []string{"L-caae9fb6", "L"}},
	}
}

// The collision through a real slurmctld: the file the earlier version
// wrote for hostileTierNodes (two SwitchName=L-caae9fb6 lines) stops
// slurmctld with "fatal: Switch ... has already been defined"; the file
// Tree and WriteTree write now has every name once, and slurmctld runs
// with it and places jobs under one switch.
func TestHostileTiersInSlurmctld(t *testing.T) {
	nodes := []string{"a1", "b1", "h1", "a2", "b2"}
	// What the earlier version (611d9fc) wrote for these nodes.
	old := "# Slurm topology.conf for TopologyPlugin=topology/tree, written by gpuaffinity fleet slurm-tree\n" +
		"# L-caae9cb6: L\n" +
		"SwitchName=L-caae9cb6 Nodes=b[1-2]\n" +
		"# L-caae9fb6: L\n" +
		"SwitchName=L-caae9fb6 Nodes=a[1-2]\n" +
		"SwitchName=L-caae9fb6 Nodes=h1\n" +
		"# L-af64014c: L\n" +
		"SwitchName=L-af64014c Switches=L-caae9fb6\n" +
		"SwitchName=S1 Switches=L-caae9fb6\n" +
		"SwitchName=S2 Switches=L-caae9cb6\n"
	if _, err := slurmconf.ParseTree([]byte(old)); err == nil || !strings.Contains(err.Error(), `switch "L-caae9fb6" defined twice`) {
		t.Errorf("the checker takes the old file: %v", err)
	}
	c, err := slurmtest.TryStart(t, slurmtest.Config{Nodes: nodes, TopologyPlugin: "topology/tree", Topology: old})
	if err == nil || !strings.Contains(err.Error(), "has already been defined") {
		t.Fatalf("slurmctld with two switches of one name: %v, want it to stop with \"has already been defined\"", err)
	}
	_ = c

	plan, err := Tree(hostileTierNodes(), TreeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTree(&b, plan.Switches); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range plan.Switches {
		if seen[s.Name] {
			t.Errorf("switch name %s twice:\n%s", s.Name, b.String())
		}
		seen[s.Name] = true
	}
	cl := slurmtest.Start(t, slurmtest.Config{Nodes: nodes, TopologyPlugin: "topology/tree", Topology: b.String()})
	topo := cl.Run(t, "scontrol", "show", "topology")
	for name := range seen {
		if !strings.Contains(topo, "SwitchName="+name+" ") {
			t.Errorf("scontrol show topology lacks %s:\n%s", name, topo)
		}
	}
	// a1 and a2 share a leaf; with the tree a 2-node job lands under one
	// switch (topology/none would take a1 and b1, the first in order).
	got := cl.Allocate(t, 2)
	under := map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b", "h1": "h"}
	if len(got) != 2 || under[got[0]] != under[got[1]] {
		t.Errorf("a 2-node job got %q, want two nodes of one leaf", got)
	}
	t.Logf("topology.conf:\n%s", b.String())
}
