package slurmtest

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The nodes are listed interleaved across the two leaf switches of
// twoLeaves: the first two in slurm.conf order, n1 and n2, sit under
// different leaves, so that topology/none (first free nodes in order) and
// topology/tree (one leaf when it can) place a two-node job differently.
var interleaved = []string{"n1", "n2", "n3", "n4"}

const twoLeaves = `SwitchName=leaf1 Nodes=n[1,3]
SwitchName=leaf2 Nodes=n[2,4]
SwitchName=spine Switches=leaf[1-2]
`

// With topology/tree, slurmctld puts a two-node job under one leaf
// switch, though the first two nodes in order span both, and does so
// again on a second Allocate (the nodes are free again in between); its
// scontrol show topology lists the switches of topology.conf.
func TestTreeKeepsJobUnderOneLeaf(t *testing.T) {
	t.Parallel()
	c := Start(t, Config{Nodes: interleaved, TopologyPlugin: "topology/tree", Topology: twoLeaves})

	for range 2 {
		got := c.Allocate(t, 2)
		slices.Sort(got)
		if !slices.Equal(got, []string{"n1", "n3"}) && !slices.Equal(got, []string{"n2", "n4"}) {
			t.Errorf("topology/tree: Allocate(2) = %v, want the nodes of one leaf: [n1 n3] or [n2 n4]", got)
		}
	}
	// All four nodes span the spine.
	if got := c.Allocate(t, 4); len(got) != 4 {
		t.Errorf("Allocate(4) = %v", got)
	}

	topo := c.Run(t, "scontrol", "show", "topology")
	for _, want := range []string{
		"SwitchName=leaf1 Level=0 ",
		"SwitchName=leaf2 Level=0 ",
		"SwitchName=spine Level=1 ",
		"Nodes=n[1,3]",
		"Nodes=n[2,4]",
		"Switches=leaf[1-2]",
	} {
		if !strings.Contains(topo, want) {
			t.Errorf("scontrol show topology lacks %q:\n%s", want, topo)
		}
	}
}

// Without the topology, the same request takes the first two nodes in
// slurm.conf order, across both leaves: the tree test above would fail
// without topology/tree.
func TestNoneTakesNodesInOrder(t *testing.T) {
	t.Parallel()
	c := Start(t, Config{Nodes: interleaved})
	if got := c.Allocate(t, 2); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("topology/none: Allocate(2) = %v, want [n1 n2]", got)
	}
	if out := c.Run(t, "scontrol", "show", "config"); !strings.Contains(out, "TopologyPlugin          = topology/none") {
		t.Errorf("scontrol show config has no TopologyPlugin = topology/none:\n%s", out)
	}
}

// Slurm 22.05's slurmctld refuses to start on a malformed topology.conf:
// it logs "fatal: ..." and exits (status 1) for an unknown key and for a
// switch naming a child switch that does not exist.
func TestMalformedTopologyStopsSlurmctld(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, topology, log string
	}{
		{"unknown key", "SwitchName=leaf1 Nodes=n[1,3]\nBogusKey=1\n",
			"Parsing error at unrecognized key: BogusKey"},
		{"unknown child switch", "SwitchName=leaf1 Nodes=n[1,3]\nSwitchName=spine Switches=leaf[1-3]\n",
			"fatal: Switch configuration spine has invalid child (leaf3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := start(t, Config{Nodes: interleaved, TopologyPlugin: "topology/tree", Topology: tc.topology})
			if err == nil {
				t.Fatalf("slurmctld started on topology.conf:\n%s\nits log:\n%s", tc.topology, c.Log())
			}
			if !errors.Is(err, errExited) {
				t.Fatalf("slurmctld did not exit: %v", err)
			}
			if !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), tc.log) || !strings.Contains(err.Error(), "fatal: ") {
				t.Errorf("want slurmctld to exit 1 with a fatal line and %q in its log; got: %v", tc.log, err)
			}
		})
	}
}
