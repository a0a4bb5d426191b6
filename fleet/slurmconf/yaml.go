package slurmconf

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Topology is one topology of topology.yaml: exactly one of Flat, Tree
// and Block is set.
type Topology struct {
	// Name is topology:, which partitions' Topology= names.
	Name string
	// ClusterDefault is cluster_default: (false where absent).
	ClusterDefault bool
	// Flat is flat: true.
	Flat bool
	// Tree is tree:, its switches' Comment the last line of the YAML
	// comment above each item.
	Tree *Tree
	// Block is block:, its blocks' Comment likewise.
	Block *Blocks
}

// ParseYAML parses and validates topology.yaml (Slurm 25.05 and newer;
// topology.yaml(5)): a list of topologies, each a mapping with
// "topology" (a valid name, unique in the file) its first attribute, an
// optional boolean "cluster_default" (at most one topology the
// default), and exactly one of "flat: true", "tree" {switches:
// [{switch, children | nodes}]} and "block" {block_sizes: [ints],
// blocks: [{block, nodes}]}. Names and hostlists must be YAML strings (an
// unquoted 123 is a number). A tree or a block topology has the rules of
// ParseTree and ParseBlocks; a tree's switch names are unique within
// their topology. Errors name the line, the topology and the switch or
// block. It does no I/O and runs in time linear in the file and the
// names it expands to (at most MaxNames in all).
func ParseYAML(data []byte) ([]Topology, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("topology.yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil, errors.New("topology.yaml: not a YAML list of topologies")
	}
	list := doc.Content[0]
	if len(list.Content) == 0 {
		return nil, fmt.Errorf("topology.yaml line %d: no topologies", list.Line)
	}
	b := &budget{left: MaxNames}
	seen := make(map[string]int) // name → line
	var out []Topology
	var dflt *yaml.Node
	for i, item := range list.Content {
		at := fmt.Sprintf("topology.yaml line %d: topology %d", item.Line, i+1)
		m, err := yamlMap(item, "topology", "cluster_default", "block", "flat", "tree")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if k := item.Content[0].Value; k != "topology" {
			// topology.yaml(5): "topology" must be the first attribute.
			return nil, fmt.Errorf("%s: first attribute %q, not topology", at, k)
		}
		name, err := yamlString(m["topology"])
		if err == nil {
			err = ValidName("topology", name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: topology: %w", at, err)
		}
		at = fmt.Sprintf("topology.yaml line %d: topology %q", item.Line, name)
		if first, dup := seen[name]; dup {
			return nil, fmt.Errorf("%s: defined twice (first on line %d)", at, first)
		}
		seen[name] = item.Line
		t := Topology{Name: name}
		if d, ok := m["cluster_default"]; ok {
			if t.ClusterDefault, err = yamlBool(d); err != nil {
				return nil, fmt.Errorf("%s: cluster_default: %w", at, err)
			}
			if t.ClusterDefault && dflt != nil {
				return nil, fmt.Errorf("%s: cluster_default, and so is the topology on line %d; at most one may be", at, dflt.Line)
			}
			if t.ClusterDefault {
				dflt = item
			}
		}
		var kinds []string
		for _, k := range []string{"block", "flat", "tree"} {
			if _, ok := m[k]; ok {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) != 1 {
			return nil, fmt.Errorf("%s: types %v, want exactly one of block, flat, tree", at, kinds)
		}
		switch kinds[0] {
		case "flat":
			if t.Flat, err = yamlBool(m["flat"]); err == nil && !t.Flat {
				err = errors.New("must be true")
			}
			if err != nil {
				return nil, fmt.Errorf("%s: flat: %w", at, err)
			}
		case "block":
			bl, err := yamlBlocks(m["block"], name, b)
			if err != nil {
				return nil, err
			}
			t.Block = &bl
		case "tree":
			tr, err := yamlTree(m["tree"], name, b)
			if err != nil {
				return nil, err
			}
			t.Tree = &tr
		}
		out = append(out, t)
	}
	return out, nil
}

// yamlForm names topology.yaml's parts in errors, within topology.
func yamlForm(topology string) form {
	return form{
		at:          func(line int) string { return fmt.Sprintf("topology.yaml line %d: topology %q", line, topology) },
		nodesKey:    "nodes",
		childrenKey: "children",
		sizesKey:    "block_sizes",
	}
}

// yamlTree reads and checks a tree: {switches: [{switch, children |
// nodes}]}.
func yamlTree(n *yaml.Node, topology string, b *budget) (Tree, error) {
	f := yamlForm(topology)
	m, err := yamlMap(n, "switches")
	if err != nil {
		return Tree{}, fmt.Errorf("%s: tree: %w", f.at(n.Line), err)
	}
	items, err := yamlSeq(m["switches"])
	if err != nil {
		return Tree{}, fmt.Errorf("%s: tree: switches: %w", f.at(n.Line), err)
	}
	if len(items) == 0 {
		return Tree{}, fmt.Errorf("%s: tree: no switches", f.at(n.Line))
	}
	raws := make([]rawSwitch, 0, len(items))
	for _, it := range items {
		sm, err := yamlMap(it, "switch", "children", "nodes")
		if err != nil {
			return Tree{}, fmt.Errorf("%s: switches: %w", f.at(it.Line), err)
		}
		r := rawSwitch{line: it.Line, comment: headComment(it)}
		if r.name, err = yamlString(sm["switch"]); err != nil {
			return Tree{}, fmt.Errorf("%s: switches: switch: %w", f.at(it.Line), err)
		}
		if c, ok := sm["children"]; ok {
			if r.children, err = yamlString(c); err != nil {
				return Tree{}, fmt.Errorf("%s: switch %q: children: %w", f.at(it.Line), r.name, err)
			}
			r.hasChildren = true
		}
		if c, ok := sm["nodes"]; ok {
			if r.nodes, err = yamlString(c); err != nil {
				return Tree{}, fmt.Errorf("%s: switch %q: nodes: %w", f.at(it.Line), r.name, err)
			}
			r.hasNodes = true
		}
		raws = append(raws, r)
	}
	return checkTree(raws, f, b)
}

// yamlBlocks reads and checks a block topology: {block_sizes: [ints],
// blocks: [{block, nodes}]}.
func yamlBlocks(n *yaml.Node, topology string, b *budget) (Blocks, error) {
	f := yamlForm(topology)
	m, err := yamlMap(n, "block_sizes", "blocks")
	if err != nil {
		return Blocks{}, fmt.Errorf("%s: block: %w", f.at(n.Line), err)
	}
	var sizes []int
	sizesLine := n.Line
	if bs, ok := m["block_sizes"]; ok {
		sizesLine = bs.Line
		items, err := yamlSeq(bs)
		if err != nil {
			return Blocks{}, fmt.Errorf("%s: block_sizes: %w", f.at(bs.Line), err)
		}
		for _, it := range items {
			var v int
			if it.Kind != yaml.ScalarNode || it.Tag != "!!int" || it.Decode(&v) != nil {
				return Blocks{}, fmt.Errorf("%s: block_sizes: %q is not an integer", f.at(it.Line), clip(it.Value))
			}
			sizes = append(sizes, v)
		}
	}
	bl, ok := m["blocks"]
	if !ok {
		return Blocks{}, fmt.Errorf("%s: block: no blocks", f.at(n.Line))
	}
	items, err := yamlSeq(bl)
	if err != nil {
		return Blocks{}, fmt.Errorf("%s: blocks: %w", f.at(bl.Line), err)
	}
	if len(items) == 0 {
		return Blocks{}, fmt.Errorf("%s: block: no blocks", f.at(bl.Line))
	}
	raws := make([]rawBlock, 0, len(items))
	for _, it := range items {
		bm, err := yamlMap(it, "block", "nodes")
		if err != nil {
			return Blocks{}, fmt.Errorf("%s: blocks: %w", f.at(it.Line), err)
		}
		r := rawBlock{line: it.Line, comment: headComment(it)}
		if r.name, err = yamlString(bm["block"]); err != nil {
			return Blocks{}, fmt.Errorf("%s: blocks: block: %w", f.at(it.Line), err)
		}
		if c, ok := bm["nodes"]; ok {
			if r.nodes, err = yamlString(c); err != nil {
				return Blocks{}, fmt.Errorf("%s: block %q: nodes: %w", f.at(it.Line), r.name, err)
			}
			r.hasNodes = true
		}
		raws = append(raws, r)
	}
	return checkBlocks(raws, sizes, sizesLine, f, b)
}

// headComment is the last line of the comment yaml.v3 puts above a list
// item (on the item's mapping, or on its first key where the comment
// follows the "- "), '#' and the space around it stripped; "" where
// there is none or its last line is blank.
func headComment(n *yaml.Node) string {
	h := n.HeadComment
	if h == "" && n.Kind == yaml.MappingNode && len(n.Content) > 0 {
		h = n.Content[0].HeadComment
	}
	if h == "" {
		return ""
	}
	last := strings.TrimSpace(h[strings.LastIndexByte(h, '\n')+1:])
	return strings.TrimSpace(strings.TrimPrefix(last, "#"))
}

// yamlMap returns a non-empty mapping's values by key; a key not in
// allowed, or twice, is an error.
func yamlMap(n *yaml.Node, allowed ...string) (map[string]*yaml.Node, error) {
	if n == nil || n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return nil, errors.New("not a non-empty mapping")
	}
	m := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ok := k.Kind == yaml.ScalarNode
		if ok {
			ok = false
			for _, a := range allowed {
				ok = ok || a == k.Value
			}
		}
		if !ok {
			return nil, fmt.Errorf("unknown attribute %q (want one of %s)", clip(k.Value), strings.Join(allowed, ", "))
		}
		if _, dup := m[k.Value]; dup {
			return nil, fmt.Errorf("attribute %q twice", k.Value)
		}
		m[k.Value] = n.Content[i+1]
	}
	return m, nil
}

// yamlString returns a string scalar's value.
func yamlString(n *yaml.Node) (string, error) {
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", errors.New("not a string")
	}
	return n.Value, nil
}

// yamlBool returns a boolean scalar's value.
func yamlBool(n *yaml.Node) (bool, error) {
	var v bool
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&v) != nil {
		return false, errors.New("not true or false")
	}
	return v, nil
}

// yamlSeq returns a list's items.
func yamlSeq(n *yaml.Node) ([]*yaml.Node, error) {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil, errors.New("not a list")
	}
	return n.Content, nil
}
