package slurmconf_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
)

// TestParseYAMLRejects: hand-written topology.yaml files, good ones
// accepted, broken ones refused; want, where set, is a part of the
// error.
func TestParseYAMLRejects(t *testing.T) {
	const goodTree = "  tree:\n    switches:\n      - switch: l1\n        nodes: n[1-2]\n      - switch: top\n        children: l1\n"
	tests := []struct {
		name, text string
		ok         bool
		want       string
	}{
		{"good tree", "- topology: net\n  cluster_default: true\n" + goodTree, true, ""},
		{"good flat and block",
			"- topology: f\n  flat: true\n- topology: b\n  block:\n    block_sizes: [2, 4]\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n", true, ""},
		{"cluster_default True", "- topology: net\n  cluster_default: True\n" + goodTree, true, ""},
		{"cluster_default before topology", "- cluster_default: true\n  topology: net\n" + goodTree, false, `first attribute "cluster_default", not topology`},
		{"tree before topology", "- tree:\n    switches:\n      - switch: l1\n        nodes: n1\n  topology: net\n", false, "not topology"},
		{"no topology", "- cluster_default: true\n" + goodTree, false, "not topology"},
		{"two types", "- topology: x\n  flat: true\n" + goodTree, false, "want exactly one of block, flat, tree"},
		{"no type", "- topology: x\n  cluster_default: true\n", false, "want exactly one of"},
		{"flat false", "- topology: x\n  flat: false\n", false, "flat: must be true"},
		{"flat a string", "- topology: x\n  flat: \"true\"\n", false, "flat: not true or false"},
		{"topology twice", "- topology: x\n  flat: true\n- topology: x\n  flat: true\n", false, `topology.yaml line 3: topology "x": defined twice (first on line 1)`},
		{"two defaults", "- topology: x\n  cluster_default: true\n  flat: true\n- topology: y\n  cluster_default: true\n  flat: true\n", false, "and so is the topology on line 1"},
		{"unknown attribute", "- topology: x\n  flat: true\n  colour: red\n", false, `unknown attribute "colour"`},
		{"attribute twice", "- topology: x\n  flat: true\n  flat: true\n", false, `attribute "flat" twice`},
		{"topology name with a space", "- topology: x y\n  flat: true\n", false, "not allowed"},
		{"topology name a number", "- topology: 7\n  flat: true\n", false, "not a string"},
		{"65-character switch", "- topology: x\n  tree:\n    switches:\n      - switch: " + long + "\n        nodes: n1\n", false, "over 64"},
		{"switch twice", "- topology: x\n  tree:\n    switches:\n      - switch: a\n        nodes: n1\n      - switch: a\n        nodes: n2\n", false, `topology.yaml line 6: topology "x": switch "a" defined twice (first on line 4)`},
		{"switch names per topology", "- topology: x\n  tree:\n    switches:\n      - switch: a\n        nodes: n1\n- topology: y\n  tree:\n    switches:\n      - switch: a\n        nodes: n1\n", true, ""},
		{"switch with both", "- topology: x\n  tree:\n    switches:\n      - switch: l\n        nodes: n1\n      - switch: a\n        nodes: n2\n        children: l\n", false, "exactly one of nodes and children"},
		{"switch with neither", "- topology: x\n  tree:\n    switches:\n      - switch: a\n", false, "exactly one of nodes and children"},
		{"tree cycle", "- topology: x\n  tree:\n    switches:\n      - switch: l\n        nodes: n1\n      - switch: a\n        children: b,l\n      - switch: b\n        children: a\n", false, "cycle"},
		{"no switches", "- topology: x\n  tree:\n    switches: []\n", false, "no switches"},
		{"block sizes 4,12", "- topology: b\n  block:\n    block_sizes: [4, 12]\n    blocks:\n      - block: b1\n        nodes: n[1-4]\n", false, "block_sizes [4 12]: 12 is not a power of two times 4"},
		{"block sizes a string", "- topology: b\n  block:\n    block_sizes: [\"4\"]\n    blocks:\n      - block: b1\n        nodes: n[1-4]\n", false, "not an integer"},
		{"block under base size", "- topology: b\n  block:\n    block_sizes: [2]\n    blocks:\n      - block: b1\n        nodes: n1\n", false, `topology.yaml line 5: topology "b": block "b1": 1 nodes, under the base block size 2`},
		{"node in two blocks", "- topology: b\n  block:\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n      - block: b2\n        nodes: n2\n", false, `node "n2" is also in block "b1" (line 4)`},
		{"block without nodes", "- topology: b\n  block:\n    blocks:\n      - block: b1\n", false, "no nodes"},
		{"no blocks", "- topology: b\n  block:\n    block_sizes: [2]\n", false, "no blocks"},
		{"numeric switch name unquoted", "- topology: x\n  tree:\n    switches:\n      - switch: 123\n        nodes: n1\n", false, "switch: not a string"},
		{"numeric switch name quoted", "- topology: x\n  tree:\n    switches:\n      - switch: \"123\"\n        nodes: n1\n", true, ""},
		{"over MaxNames", "- topology: x\n  tree:\n    switches:\n      - switch: a\n        nodes: n[0-999999999]\n", false, "MaxNames (4000000)"},
		{"MaxNames across topologies", "- topology: x\n  tree:\n    switches:\n      - switch: a\n        nodes: n[1-1000]\n- topology: y\n  block:\n    blocks:\n      - block: b\n        nodes: m[1-3999001]\n", false, "MaxNames"},
		{"not a list", "topology: x\nflat: true\n", false, "not a YAML list"},
		{"empty list", "[]\n", false, "no topologies"},
		{"empty file", "", false, "not a YAML list"},
		{"not YAML", "- topology: [\n", false, "topology.yaml: yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := slurmconf.ParseYAML([]byte(tt.text))
			checkErr(t, "ParseYAML", err, tt.ok, tt.want)
		})
	}
}

// TestParseYAML: the whole value, head comments and lines included.
func TestParseYAML(t *testing.T) {
	text := `# Slurm topology.yaml, written by gpuaffinity fleet slurm-yaml
- topology: nvlink
  cluster_default: true
  block:
    block_sizes: [2, 4]
    blocks:
      # b1: NVLink domain, clique-1
      - block: b1
        nodes: n[1-2]
      # an older line
      # b2: NVLink domain, clique-2
      - block: b2
        nodes: n[3-4]
- topology: network
  tree:
    switches:
      # xa1b2c3d4:   ocid1.localblock  
      - switch: xa1b2c3d4
        nodes: n[1-4]
      # not the root's: a blank line follows

      - switch: root
        children: xa1b2c3d4
- topology: none
  flat: true
`
	got, err := slurmconf.ParseYAML([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []slurmconf.Topology{
		{Name: "nvlink", ClusterDefault: true, Block: &slurmconf.Blocks{
			Blocks: []slurmconf.Block{
				{Name: "b1", Comment: "b1: NVLink domain, clique-1", Nodes: []string{"n1", "n2"}, Line: 8},
				{Name: "b2", Comment: "b2: NVLink domain, clique-2", Nodes: []string{"n3", "n4"}, Line: 12},
			},
			Sizes: []int{2, 4},
		}},
		{Name: "network", Tree: &slurmconf.Tree{Switches: []slurmconf.Switch{
			{Name: "xa1b2c3d4", Comment: "xa1b2c3d4:   ocid1.localblock", Nodes: []string{"n1", "n2", "n3", "n4"}, Line: 18},
			{Name: "root", Switches: []string{"xa1b2c3d4"}, Line: 22},
		}}},
		{Name: "none", Flat: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseYAML (-want +got):\n%s", d)
	}
}

// TestParseYAMLNoSizes: a block topology without block_sizes has nil
// Sizes.
func TestParseYAMLNoSizes(t *testing.T) {
	got, err := slurmconf.ParseYAML([]byte("- topology: b\n  block:\n    blocks:\n      - block: b1\n        nodes: n1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Block == nil || got[0].Block.Sizes != nil || got[0].Tree != nil || got[0].Flat {
		t.Errorf("ParseYAML = %+v, want one block topology with nil Sizes", got)
	}
	if !strings.Contains(strings.Join(got[0].Block.Blocks[0].Nodes, ","), "n1") {
		t.Errorf("ParseYAML blocks = %+v", got[0].Block.Blocks)
	}
}
