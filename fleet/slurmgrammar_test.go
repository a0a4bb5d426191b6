package fleet

// The files fleet writes for Slurm, read back by package fleet/slurmconf:
// a parser and checker written from the man pages' grammar and Slurm's
// sources, not from fleet's code (it has its own hostlist expander and
// never calls Hostlist or SlurmName), for topology.conf(5) with
// topology/tree and topology/block and for topology.yaml(5).
//
// The check exists because the Slurm a test machine can install does not
// read all of these files: Debian's slurmctld (22.05) has topology/tree
// but no topology/block plugin and no topology.yaml, both newer (block
// 23.11, yaml 25.05). So fleet/slurmconf's own tests show the checker
// rejects hand-written broken files, and this one that it accepts what
// WriteTree, WriteBlocks and WriteTopologyYAML write for a generated
// fleet, with the nodes the fleet has.

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
)

// TestGrammarHostlistRoundTrip: slurmconf's expander reads Hostlist's
// expressions back as the names given.
func TestGrammarHostlistRoundTrip(t *testing.T) {
	for _, names := range [][]string{
		{"a1", "a2", "a4"},
		{"n9", "n10", "n11", "n8"},
		{"n008", "n009", "n010", "n100"},
		{"alpha", "beta", "b1", "b01", "b001"},
		{"r1-t01", "r1-t02", "r2-t01", "r2-t03", "x"},
	} {
		expr := Hostlist(names)
		got, err := slurmconf.ExpandHostlist(expr)
		if err != nil {
			t.Errorf("Hostlist(%q) = %q: %v", names, expr, err)
			continue
		}
		want := append([]string(nil), names...)
		sort.Strings(want)
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Hostlist(%q) = %q, expands to %q", names, expr, got)
		}
	}
}

// grammarFleet: 3 NVLink cliques of 18 (gb200-r<r>-t<nn>) under a
// two-tier site tree; 4 OCI nodes in one GPU memory fabric under three
// tiers of long OCIDs; 4 GCP nodes in no NVLink domain, whose sub-block
// sb-1 is used under two blocks.
func grammarFleet() (nodes, cliqued, tiered []string, fleet []Node) {
	for r := 1; r <= 3; r++ {
		for tr := 1; tr <= 18; tr++ {
			name := fmt.Sprintf("gb200-r%d-t%02d", r, tr)
			fleet = append(fleet, Node{
				Name: name, Target: "agent/" + name, Cloud: "baremetal",
				Tiers:  []string{fmt.Sprintf("leaf-r%d", r), "spine-1"},
				Clique: fmt.Sprintf("9f1e4a2c-0000-4000-8000-00000000000%d.%d", r, r),
			})
			cliqued = append(cliqued, name)
		}
	}
	for i := 1; i <= 4; i++ {
		fleet = append(fleet, Node{
			Name: fmt.Sprintf("bm-gpu-gb200-%d", i), Cloud: "oci",
			Tiers:           []string{ociLocalBlock, ociNetworkBlock, ociHPCIsland},
			GPUMemoryFabric: "ocid1.computegpumemoryfabric.oc1.iad.anuwcljrp7h4xoycdddddddddddddddddddddddddddddddddddddddddddddddddd4",
		})
		cliqued = append(cliqued, fmt.Sprintf("bm-gpu-gb200-%d", i))
	}
	fleet = append(fleet, gcpNodes()...)
	for _, n := range fleet {
		nodes = append(nodes, n.Name)
	}
	return nodes, cliqued, nodes, fleet
}

func grammarSet(names []string) map[string]bool {
	m := make(map[string]bool)
	for _, n := range names {
		m[n] = true
	}
	return m
}

// grammarTreeNodes and grammarBlockNodes are the nodes of a parsed tree or block
// topology.
func grammarTreeNodes(tr slurmconf.Tree) map[string]bool {
	var names []string
	for _, s := range tr.Switches {
		names = append(names, s.Nodes...)
	}
	return grammarSet(names)
}

func grammarBlockNodes(bl slurmconf.Blocks) map[string]bool {
	var names []string
	for _, b := range bl.Blocks {
		names = append(names, b.Nodes...)
	}
	return grammarSet(names)
}

func sameSet(t *testing.T, what string, got map[string]bool, want []string) {
	t.Helper()
	w := grammarSet(want)
	for n := range w {
		if !got[n] {
			t.Errorf("%s: node %q missing", what, n)
		}
	}
	for n := range got {
		if !w[n] {
			t.Errorf("%s: node %q not in the fleet", what, n)
		}
	}
}

// TestGrammarAcceptsFleetOutput feeds slurmconf what fleet writes.
func TestGrammarAcceptsFleetOutput(t *testing.T) {
	_, cliqued, tiered, fleet := grammarFleet()
	for _, root := range []string{"", "cluster"} {
		t.Run("root "+root, func(t *testing.T) {
			tp, err := Tree(fleet, TreeOptions{Root: root})
			if err != nil {
				t.Fatalf("Tree: %v", err)
			}
			bp, err := Blocks(fleet, BlockOptions{})
			if err != nil {
				t.Fatalf("Blocks: %v", err)
			}
			switches, blocks, sizes := tp.Switches, bp.Blocks, bp.Sizes
			// Which cliques make blocks is Blocks' business (TestBlocks);
			// here the file must hold the blocks' nodes, all of them
			// from the fleet's cliques.
			var blocked []string
			for _, b := range blocks {
				blocked = append(blocked, b.Nodes...)
			}
			if len(blocks) == 0 {
				t.Fatalf("Blocks = no blocks, want some of the fleet's cliques")
			}
			for _, n := range blocked {
				if !slices.Contains(cliqued, n) {
					t.Errorf("Blocks put %q in a block; it is in no clique", n)
				}
			}

			var tb, bb, yb bytes.Buffer
			if err := WriteTree(&tb, switches); err != nil {
				t.Fatal(err)
			}
			if err := WriteBlocks(&bb, blocks, sizes); err != nil {
				t.Fatal(err)
			}
			if err := WriteTopologyYAML(&yb, switches, blocks, sizes); err != nil {
				t.Fatal(err)
			}

			tree, err := slurmconf.ParseTree(tb.Bytes())
			if err != nil {
				t.Fatalf("ParseTree: %v\n%s", err, tb.String())
			}
			sameSet(t, "tree", grammarTreeNodes(tree), tiered)
			for _, want := range []string{"SwitchName=leaf-r1 Nodes=gb200-r1-t[01-18]", "SwitchName=" + ociLocalBlockName + " "} {
				if !strings.Contains(tb.String(), want) {
					t.Errorf("topology.conf lacks %q:\n%s", want, tb.String())
				}
			}
			// The comment above a hashed name gives the ID it stands for.
			for _, s := range tree.Switches {
				if s.Name == ociLocalBlockName && !strings.Contains(s.Comment, ociLocalBlock) {
					t.Errorf("switch %s: Comment %q, want the ID %s", s.Name, s.Comment, ociLocalBlock)
				}
			}
			if root != "" {
				// One root: a job may span the whole tree.
				if !strings.Contains(tb.String(), "\nSwitchName=cluster Switches=") {
					t.Errorf("topology.conf has no root:\n%s", tb.String())
				}
			}

			bl, err := slurmconf.ParseBlocks(bb.Bytes())
			if err != nil {
				t.Fatalf("ParseBlocks: %v\n%s", err, bb.String())
			}
			sameSet(t, "blocks", grammarBlockNodes(bl), blocked)
			if intList(bl.Sizes) != intList(sizes) {
				t.Errorf("ParseBlocks sizes = %v, want %v", bl.Sizes, sizes)
			}

			topos, err := slurmconf.ParseYAML(yb.Bytes())
			if err != nil {
				t.Fatalf("ParseYAML: %v\n%s", err, yb.String())
			}
			if len(topos) != 2 || topos[0].Block == nil || !topos[0].ClusterDefault || topos[1].Tree == nil || topos[1].ClusterDefault {
				t.Fatalf("topology.yaml topologies = %+v, want a default block and a tree", topos)
			}
			sameSet(t, "yaml block", grammarBlockNodes(*topos[0].Block), blocked)
			sameSet(t, "yaml tree", grammarTreeNodes(*topos[1].Tree), tiered)
		})
	}
	t.Run("yaml tree only", func(t *testing.T) {
		tp, err := Tree(fleet, TreeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var yb bytes.Buffer
		if err := WriteTopologyYAML(&yb, tp.Switches, nil, nil); err != nil {
			t.Fatal(err)
		}
		topos, err := slurmconf.ParseYAML(yb.Bytes())
		if err != nil {
			t.Fatalf("ParseYAML: %v\n%s", err, yb.String())
		}
		if len(topos) != 1 || topos[0].Tree == nil || !topos[0].ClusterDefault {
			t.Errorf("topologies = %+v, want one default tree", topos)
		}
	})
}
