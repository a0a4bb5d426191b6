package slurmconf

import (
	"strings"
	"testing"
)

// The parsers read files a site may have edited by hand (the previous
// topology.conf or topology.yaml): whatever the bytes, they return a
// value or an error, never panic, and what they accept holds its own
// rules (every name valid, no node under two leaves or in two blocks).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"SwitchName=s1 Nodes=n[1-4]\nSwitchName=s2 Switches=s1\n",
		"# b1: NVLink domain, clique u.1\nBlockName=b1 Nodes=n[01-04]\nBlockSizes=4,8\n",
		"- topology: t\n  tree:\n    switches:\n      - switch: s\n        nodes: n[1-2]\n",
		"- topology: b\n  cluster_default: true\n  block:\n    block_sizes: [2]\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n",
		"SwitchName=a Nodes=n[0-999999999]\n",
		"SwitchName=a Switches=a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if tr, err := ParseTree(data); err == nil {
			seen := map[string]bool{}
			for _, s := range tr.Switches {
				if ValidName("switch", s.Name) != nil || seen[s.Name] {
					t.Fatalf("accepted switch %q", s.Name)
				}
				seen[s.Name] = true
			}
		}
		if b, err := ParseBlocks(data); err == nil {
			nodes := map[string]bool{}
			for _, bl := range b.Blocks {
				for _, n := range bl.Nodes {
					if nodes[n] {
						t.Fatalf("accepted node %q in two blocks", n)
					}
					nodes[n] = true
				}
				if len(b.Sizes) > 0 && len(bl.Nodes) < b.Sizes[0] {
					t.Fatalf("accepted block %q under the base size", bl.Name)
				}
			}
		}
		if topos, err := ParseYAML(data); err == nil {
			for _, tp := range topos {
				if strings.TrimSpace(tp.Name) == "" {
					t.Fatalf("accepted a topology without a name")
				}
			}
		}
	})
}
