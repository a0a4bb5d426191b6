package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
)

// The topologies of topology.yaml (topology.yaml(5)); field order is the
// file's ("topology" must be the first attribute).
type yamlTopology struct {
	Topology       string     `yaml:"topology"`
	ClusterDefault bool       `yaml:"cluster_default"`
	Block          *yamlBlock `yaml:"block,omitempty"`
	Tree           *yamlTree  `yaml:"tree,omitempty"`
}

type yamlBlock struct {
	BlockSizes []int           `yaml:"block_sizes"`
	Blocks     []yamlBlockItem `yaml:"blocks"`
}

type yamlBlockItem struct {
	Block string `yaml:"block"`
	Nodes string `yaml:"nodes"`
}

type yamlTree struct {
	Switches []yamlSwitch `yaml:"switches"`
}

type yamlSwitch struct {
	Switch   string `yaml:"switch"`
	Children string `yaml:"children,omitempty"`
	Nodes    string `yaml:"nodes,omitempty"`
}

// Names of the topologies WriteTopologyYAML writes, for partitions'
// Topology= to name.
const (
	TopologyNVLink  = "nvlink"
	TopologyNetwork = "network"
)

// PreviousYAML returns the tree and the block topology of a
// topology.yaml an earlier run wrote, as Tree and Blocks take them: the
// topologies named TopologyNetwork and TopologyNVLink, else the first
// of each kind; nil for one the file lacks.
func PreviousYAML(topos []slurmconf.Topology) (*slurmconf.Tree, *slurmconf.Blocks) {
	var tree *slurmconf.Tree
	var blocks *slurmconf.Blocks
	for _, t := range topos {
		if t.Tree != nil && (tree == nil || t.Name == TopologyNetwork) {
			tree = t.Tree
		}
		if t.Block != nil && (blocks == nil || t.Name == TopologyNVLink) {
			blocks = t.Block
		}
	}
	return tree, blocks
}

// WriteTopologyYAML writes topology.yaml (Slurm 25.05 and newer;
// topology.yaml(5)) with the block topology "nvlink" (blocks and sizes)
// and the tree topology "network" (switches), whichever is non-empty,
// each block and each switch whose name is not its ID under the comment
// WriteBlocks and WriteTree give it. "nvlink" is the cluster default
// where it is written, since an NVLink domain is the tighter unit;
// partitions name the other with Topology=network. The file is parsed
// back with Slurm's rules (slurmconf.ParseYAML) before anything is
// written.
func WriteTopologyYAML(w io.Writer, switches []Switch, blocks []Block, sizes []int) error {
	var topos []yamlTopology
	var comments [][]string // per topology, per item
	if len(blocks) > 0 {
		yb := &yamlBlock{BlockSizes: sizes}
		var cs []string
		for _, b := range blocks {
			yb.Blocks = append(yb.Blocks, yamlBlockItem{Block: b.Name, Nodes: Hostlist(b.Nodes)})
			cs = append(cs, b.Name+blockCommentPrefix+comment(b.Domain))
		}
		topos = append(topos, yamlTopology{Topology: TopologyNVLink, ClusterDefault: true, Block: yb})
		comments = append(comments, cs)
	}
	if len(switches) > 0 {
		yt := &yamlTree{}
		var cs []string
		for _, s := range switches {
			ys := yamlSwitch{Switch: s.Name}
			switch {
			case len(s.Nodes) > 0:
				ys.Nodes = Hostlist(s.Nodes)
			case len(s.Switches) > 0:
				ys.Children = Hostlist(s.Switches)
			default:
				return fmt.Errorf("switch %q: neither nodes nor switches", s.Name)
			}
			yt.Switches = append(yt.Switches, ys)
			c := ""
			if s.Name != s.ID {
				c = s.Name + ": " + comment(s.ID)
			}
			cs = append(cs, c)
		}
		topos = append(topos, yamlTopology{Topology: TopologyNetwork, ClusterDefault: len(blocks) == 0, Tree: yt})
		comments = append(comments, cs)
	}
	if len(topos) == 0 {
		return errors.New("writing topology.yaml: no switches and no blocks")
	}
	var doc yaml.Node
	if err := doc.Encode(topos); err != nil {
		return fmt.Errorf("encoding topology.yaml: %w", err)
	}
	// doc is the list; each topology a mapping whose last value (block
	// or tree) holds the list of items (blocks or switches) last.
	for i, t := range doc.Content {
		items := t.Content[len(t.Content)-1]
		items = items.Content[len(items.Content)-1]
		for j, c := range comments[i] {
			if c != "" {
				items.Content[j].HeadComment = "# " + c
			}
		}
	}
	var buf bytes.Buffer
	buf.WriteString("# Slurm topology.yaml, written by gpuaffinity fleet slurm-yaml\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encoding topology.yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encoding topology.yaml: %w", err)
	}
	if _, err := slurmconf.ParseYAML(buf.Bytes()); err != nil {
		return fmt.Errorf("refusing to write a topology.yaml slurmctld would not load: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing topology.yaml: %w", err)
	}
	return nil
}
