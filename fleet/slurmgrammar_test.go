package fleet

// An independent checker of the three files fleet writes for Slurm,
// written from the man pages' grammar and not from fleet's code (it has
// its own hostlist expander; it never calls Hostlist or SlurmName):
//
//   - topology.conf(5), topology/tree: "SwitchName=<name> Nodes=<hostlist>"
//     or "SwitchName=<name> Switches=<hostlist>" (optional LinkSpeed=),
//     parameter names case-insensitive, '#' a comment to the end of the
//     line, SwitchName at most 64 characters, every node under a switch.
//   - topology.conf(5), topology/block: "BlockName=<name> Nodes=<hostlist>"
//     lines and "BlockSizes=<n>[,<n>...]": "Each block must have at least
//     the planning base block size count of nodes. Successive BlockSizes
//     must be a power of two larger than the prior values."
//   - topology.yaml(5) (Slurm 25.05 and newer): a list of topologies, each
//     with "topology" (a unique name, the first attribute), optional
//     "cluster_default", and exactly one of "block" {block_sizes, blocks:
//     [{block, nodes}]}, "flat: true" or "tree" {switches: [{switch,
//     children, nodes}]}.
//
// The check exists because the Slurm a test machine can install does not
// read these files: Debian's slurmctld (22.05) has topology/tree but no
// topology/block plugin and no topology.yaml, both newer (block 23.11,
// yaml 25.05). So the test shows the checker rejects hand-written broken
// files, then that it accepts what WriteTree, WriteBlocks and
// WriteTopologyYAML write for a generated fleet.

import (
	"bytes"
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// grammarNameMax is topology.conf(5)'s "cannot be longer than 64
// characters".
const grammarNameMax = 64

// expandHostlist expands a Slurm hostlist expression: comma-separated
// items outside brackets, each "prefix", "prefix[ranges]" or
// "prefix[ranges]suffix", ranges comma-separated "n" or "lo-hi", a range
// padded to lo's width where lo has a leading zero.
func expandHostlist(expr string) ([]string, error) {
	if expr == "" {
		return nil, fmt.Errorf("empty hostlist")
	}
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch expr[i] {
		case '[':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("hostlist %q: nested '['", expr)
			}
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("hostlist %q: ']' without '['", expr)
			}
		case ',':
			if depth == 0 {
				items = append(items, expr[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("hostlist %q: unclosed '['", expr)
	}
	items = append(items, expr[start:])
	var out []string
	for _, it := range items {
		if it == "" {
			return nil, fmt.Errorf("hostlist %q: empty item", expr)
		}
		open := strings.IndexByte(it, '[')
		if open < 0 {
			if strings.ContainsAny(it, "]") {
				return nil, fmt.Errorf("hostlist %q: stray ']'", expr)
			}
			out = append(out, it)
			continue
		}
		end := strings.IndexByte(it, ']')
		prefix, body, suffix := it[:open], it[open+1:end], it[end+1:]
		if strings.ContainsAny(suffix, "[]") {
			return nil, fmt.Errorf("hostlist %q: more than one bracket group in %q (this checker takes one)", expr, it)
		}
		for _, r := range strings.Split(body, ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			if !grammarDigits(lo) || !grammarDigits(hi) {
				return nil, fmt.Errorf("hostlist %q: range %q is not digits", expr, r)
			}
			a, _ := strconv.Atoi(lo)
			b, _ := strconv.Atoi(hi)
			if a > b {
				return nil, fmt.Errorf("hostlist %q: range %q runs backwards", expr, r)
			}
			width := 0
			if len(lo) > 1 && lo[0] == '0' {
				width = len(lo)
			}
			for v := a; v <= b; v++ {
				out = append(out, fmt.Sprintf("%s%0*d%s", prefix, width, v, suffix))
			}
		}
	}
	return out, nil
}

func grammarDigits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// grammarName checks a switch or block name as topology.conf(5) and
// topology.yaml(5) take it: 1 to 64 characters, none that would split the
// line or the hostlist.
func grammarName(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%s: empty name", kind)
	}
	if len(s) > grammarNameMax {
		return fmt.Errorf("%s %q: %d characters, over %d", kind, s, len(s), grammarNameMax)
	}
	if strings.ContainsAny(s, " \t\r\n#=,[]") {
		return fmt.Errorf("%s %q: a character Slurm's parsers give a meaning", kind, s)
	}
	return nil
}

// confLine is one setting line of topology.conf: keys lowercased.
type confLine map[string]string

// parseConf splits topology.conf into lines of key=value tokens, dropping
// comments and blank lines. keys are the parameter names the line form
// allows (lowercase); any other is an error.
func parseConf(text string, keys ...string) ([]confLine, error) {
	allowed := make(map[string]bool)
	for _, k := range keys {
		allowed[k] = true
	}
	var out []confLine
	for i, raw := range strings.Split(text, "\n") {
		line, _, _ := strings.Cut(raw, "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		cl := make(confLine)
		for _, f := range fields {
			k, v, ok := strings.Cut(f, "=")
			if !ok || k == "" || v == "" {
				return nil, fmt.Errorf("line %d: %q is not key=value", i+1, f)
			}
			k = strings.ToLower(k)
			if !allowed[k] {
				return nil, fmt.Errorf("line %d: unknown parameter %q", i+1, k)
			}
			if _, dup := cl[k]; dup {
				return nil, fmt.Errorf("line %d: %q twice", i+1, k)
			}
			cl[k] = v
		}
		out = append(out, cl)
	}
	return out, nil
}

// gSwitch and gBlock are the file forms' common shape.
type gSwitch struct {
	name, nodes, children string
}

type gBlock struct {
	name, nodes string
}

// checkTreeConf checks topology.conf for topology/tree and returns its
// nodes.
func checkTreeConf(text string) (map[string]bool, error) {
	lines, err := parseConf(text, "switchname", "nodes", "switches", "linkspeed")
	if err != nil {
		return nil, err
	}
	var sws []gSwitch
	for i, l := range lines {
		name, ok := l["switchname"]
		if !ok {
			return nil, fmt.Errorf("setting line %d: no SwitchName", i+1)
		}
		if ls, ok := l["linkspeed"]; ok && !grammarDigits(ls) {
			return nil, fmt.Errorf("switch %q: LinkSpeed %q not a number", name, ls)
		}
		sws = append(sws, gSwitch{name: name, nodes: l["nodes"], children: l["switches"]})
	}
	return checkTree(sws)
}

// checkTree: names valid and unique, each switch a leaf (nodes) or not
// (children), children exist and have one parent, no cycle, each node
// under exactly one leaf.
func checkTree(sws []gSwitch) (map[string]bool, error) {
	if len(sws) == 0 {
		return nil, fmt.Errorf("no switches")
	}
	byName := make(map[string]gSwitch)
	for _, s := range sws {
		if err := grammarName("switch", s.name); err != nil {
			return nil, err
		}
		if _, dup := byName[s.name]; dup {
			return nil, fmt.Errorf("switch %q defined twice", s.name)
		}
		if (s.nodes == "") == (s.children == "") {
			return nil, fmt.Errorf("switch %q: want exactly one of Nodes and Switches", s.name)
		}
		byName[s.name] = s
	}
	nodes := make(map[string]bool)
	parent := make(map[string]string)
	kids := make(map[string][]string)
	for _, s := range sws {
		if s.nodes != "" {
			ns, err := expandHostlist(s.nodes)
			if err != nil {
				return nil, fmt.Errorf("switch %q: %w", s.name, err)
			}
			for _, n := range ns {
				if nodes[n] {
					return nil, fmt.Errorf("node %q under two leaves", n)
				}
				nodes[n] = true
			}
			continue
		}
		cs, err := expandHostlist(s.children)
		if err != nil {
			return nil, fmt.Errorf("switch %q: %w", s.name, err)
		}
		for _, c := range cs {
			if _, ok := byName[c]; !ok {
				return nil, fmt.Errorf("switch %q: child %q not defined", s.name, c)
			}
			if p, ok := parent[c]; ok {
				return nil, fmt.Errorf("switch %q under both %q and %q", c, p, s.name)
			}
			parent[c] = s.name
			kids[s.name] = append(kids[s.name], c)
		}
	}
	// No cycle: every switch reaches a root by its parents within
	// len(sws) steps.
	for _, s := range sws {
		at := s.name
		for steps := 0; ; steps++ {
			p, ok := parent[at]
			if !ok {
				break
			}
			if steps > len(sws) {
				return nil, fmt.Errorf("switch %q: a cycle", s.name)
			}
			at = p
		}
	}
	return nodes, nil
}

// checkBlockConf checks topology.conf for topology/block and returns its
// nodes.
func checkBlockConf(text string) (map[string]bool, error) {
	lines, err := parseConf(text, "blockname", "nodes", "blocksizes")
	if err != nil {
		return nil, err
	}
	var blocks []gBlock
	var sizes []int
	for i, l := range lines {
		if bs, ok := l["blocksizes"]; ok {
			if len(l) != 1 {
				return nil, fmt.Errorf("setting line %d: BlockSizes with other parameters", i+1)
			}
			if i != len(lines)-1 {
				return nil, fmt.Errorf("setting line %d: BlockSizes not last", i+1)
			}
			for _, f := range strings.Split(bs, ",") {
				v, err := strconv.Atoi(f)
				if err != nil {
					return nil, fmt.Errorf("BlockSizes %q: %v", bs, err)
				}
				sizes = append(sizes, v)
			}
			continue
		}
		name, ok := l["blockname"]
		if !ok {
			return nil, fmt.Errorf("setting line %d: no BlockName", i+1)
		}
		blocks = append(blocks, gBlock{name: name, nodes: l["nodes"]})
	}
	return checkBlocks(blocks, sizes)
}

// checkBlocks: names valid and unique, each with nodes, a node in at most
// one block, and BlockSizes' rules where sizes are given.
func checkBlocks(blocks []gBlock, sizes []int) (map[string]bool, error) {
	if len(blocks) == 0 {
		return nil, fmt.Errorf("no blocks")
	}
	names := make(map[string]bool)
	nodes := make(map[string]bool)
	smallest := -1
	for _, b := range blocks {
		if err := grammarName("block", b.name); err != nil {
			return nil, err
		}
		if names[b.name] {
			return nil, fmt.Errorf("block %q defined twice", b.name)
		}
		names[b.name] = true
		if b.nodes == "" {
			return nil, fmt.Errorf("block %q: no Nodes", b.name)
		}
		ns, err := expandHostlist(b.nodes)
		if err != nil {
			return nil, fmt.Errorf("block %q: %w", b.name, err)
		}
		for _, n := range ns {
			if nodes[n] {
				return nil, fmt.Errorf("node %q in two blocks", n)
			}
			nodes[n] = true
		}
		if smallest < 0 || len(ns) < smallest {
			smallest = len(ns)
		}
	}
	for i, s := range sizes {
		if s < 1 {
			return nil, fmt.Errorf("BlockSizes %v: %d under 1", sizes, s)
		}
		if i > 0 {
			prev := sizes[i-1]
			if s <= prev || s%prev != 0 || bits.OnesCount(uint(s/prev)) != 1 {
				return nil, fmt.Errorf("BlockSizes %v: %d is not a power of two larger than %d", sizes, s, prev)
			}
		}
	}
	if len(sizes) > 0 && smallest < sizes[0] {
		return nil, fmt.Errorf("BlockSizes %v: a block of %d nodes, under the base size", sizes, smallest)
	}
	return nodes, nil
}

// yamlTopo is what checkTopologyYAML found of one topology.
type yamlTopo struct {
	name, kind string
	dflt       bool
	nodes      map[string]bool
}

// checkTopologyYAML checks topology.yaml and returns its topologies.
func checkTopologyYAML(text string) ([]yamlTopo, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("not a YAML list")
	}
	var out []yamlTopo
	seen := make(map[string]bool)
	defaults := 0
	for i, t := range doc.Content[0].Content {
		m, err := yamlMap(t, "topology", "cluster_default", "block", "flat", "tree")
		if err != nil {
			return nil, fmt.Errorf("topology %d: %w", i+1, err)
		}
		if t.Content[0].Value != "topology" {
			return nil, fmt.Errorf("topology %d: first attribute %q, not topology", i+1, t.Content[0].Value)
		}
		name, err := yamlString(m["topology"])
		if err != nil || name == "" {
			return nil, fmt.Errorf("topology %d: topology must be a non-empty string", i+1)
		}
		if seen[name] {
			return nil, fmt.Errorf("topology %q twice", name)
		}
		seen[name] = true
		yt := yamlTopo{name: name}
		if d, ok := m["cluster_default"]; ok {
			if d.Kind != yaml.ScalarNode || d.Tag != "!!bool" {
				return nil, fmt.Errorf("topology %q: cluster_default not a bool", name)
			}
			yt.dflt = d.Value == "true"
			if yt.dflt {
				defaults++
			}
		}
		var kinds []string
		for _, k := range []string{"block", "flat", "tree"} {
			if _, ok := m[k]; ok {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) != 1 {
			return nil, fmt.Errorf("topology %q: types %v, want exactly one of block, flat, tree", name, kinds)
		}
		yt.kind = kinds[0]
		switch yt.kind {
		case "flat":
			if f := m["flat"]; f.Kind != yaml.ScalarNode || f.Tag != "!!bool" || f.Value != "true" {
				return nil, fmt.Errorf("topology %q: flat must be true", name)
			}
		case "block":
			yt.nodes, err = yamlBlocks(m["block"])
		case "tree":
			yt.nodes, err = yamlSwitches(m["tree"])
		}
		if err != nil {
			return nil, fmt.Errorf("topology %q: %w", name, err)
		}
		out = append(out, yt)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no topologies")
	}
	if defaults > 1 {
		return nil, fmt.Errorf("%d topologies are cluster_default", defaults)
	}
	return out, nil
}

// yamlMap returns a mapping's values by key; keys outside allowed, or
// twice, are errors.
func yamlMap(n *yaml.Node, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return nil, fmt.Errorf("not a non-empty mapping")
	}
	m := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return nil, fmt.Errorf("unknown attribute %q", k)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("attribute %q twice", k)
		}
		m[k] = n.Content[i+1]
	}
	return m, nil
}

func yamlString(n *yaml.Node) (string, error) {
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", fmt.Errorf("not a string")
	}
	return n.Value, nil
}

func yamlSeq(n *yaml.Node) ([]*yaml.Node, error) {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("not a list")
	}
	return n.Content, nil
}

func yamlBlocks(n *yaml.Node) (map[string]bool, error) {
	m, err := yamlMap(n, "block_sizes", "blocks")
	if err != nil {
		return nil, fmt.Errorf("block: %w", err)
	}
	var sizes []int
	if bs, ok := m["block_sizes"]; ok {
		items, err := yamlSeq(bs)
		if err != nil {
			return nil, fmt.Errorf("block_sizes: %w", err)
		}
		for _, it := range items {
			if it.Kind != yaml.ScalarNode || it.Tag != "!!int" {
				return nil, fmt.Errorf("block_sizes: %q not an int", it.Value)
			}
			v, _ := strconv.Atoi(it.Value)
			sizes = append(sizes, v)
		}
	}
	items, err := yamlSeq(m["blocks"])
	if err != nil {
		return nil, fmt.Errorf("blocks: %w", err)
	}
	var blocks []gBlock
	for _, it := range items {
		bm, err := yamlMap(it, "block", "nodes")
		if err != nil {
			return nil, fmt.Errorf("blocks: %w", err)
		}
		name, err1 := yamlString(bm["block"])
		nodes, err2 := yamlString(bm["nodes"])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("blocks: block and nodes must be strings")
		}
		blocks = append(blocks, gBlock{name: name, nodes: nodes})
	}
	return checkBlocks(blocks, sizes)
}

func yamlSwitches(n *yaml.Node) (map[string]bool, error) {
	m, err := yamlMap(n, "switches")
	if err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	items, err := yamlSeq(m["switches"])
	if err != nil {
		return nil, fmt.Errorf("switches: %w", err)
	}
	var sws []gSwitch
	for _, it := range items {
		sm, err := yamlMap(it, "switch", "children", "nodes")
		if err != nil {
			return nil, fmt.Errorf("switches: %w", err)
		}
		s := gSwitch{}
		var errs [3]error
		s.name, errs[0] = yamlString(sm["switch"])
		if c, ok := sm["children"]; ok {
			s.children, errs[1] = yamlString(c)
		}
		if c, ok := sm["nodes"]; ok {
			s.nodes, errs[2] = yamlString(c)
		}
		for _, e := range errs {
			if e != nil {
				return nil, fmt.Errorf("switches: switch, children and nodes must be strings")
			}
		}
		sws = append(sws, s)
	}
	return checkTree(sws)
}

func TestGrammarExpandHostlist(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"tux[0-3,12,18-20]", []string{"tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20"}},
		{"node[01-04]", []string{"node01", "node02", "node03", "node04"}},
		{"n[08-10]", []string{"n08", "n09", "n10"}},
		{"n[8-10]", []string{"n8", "n9", "n10"}},
		{"a,b[1-2],c", []string{"a", "b1", "b2", "c"}},
		{"r[1-2]-t", []string{"r1-t", "r2-t"}},
		{"solo", []string{"solo"}},
	}
	for _, tt := range tests {
		got, err := expandHostlist(tt.expr)
		if err != nil {
			t.Errorf("expandHostlist(%q): %v", tt.expr, err)
			continue
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("expandHostlist(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
	for _, bad := range []string{"", "n[1-", "n1]", "n[3-1]", "n[a-b]", "a,,b", "n[[1]]", "n[1][2]", "n[]"} {
		if got, err := expandHostlist(bad); err == nil {
			t.Errorf("expandHostlist(%q) = %q, want an error", bad, got)
		}
	}
}

// TestGrammarHostlistRoundTrip: the checker's expander reads Hostlist's
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
		got, err := expandHostlist(expr)
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

// TestGrammarRejects shows the checker works: hand-written files, good
// ones accepted, broken ones refused.
func TestGrammarRejects(t *testing.T) {
	long := strings.Repeat("s", 65)
	tree := []struct {
		name, text string
		ok         bool
	}{
		{"good, keys any case, comments", "# a comment\nswitchname=leaf1 nodes=n[1-2] LinkSpeed=100 # trailing\n\nSWITCHNAME=leaf2 NODES=n3\nSwitchName=top Switches=leaf[1-2]\n", true},
		{"64-character switch", "SwitchName=" + strings.Repeat("s", 64) + " Nodes=n1\n", true},
		{"65-character switch", "SwitchName=" + long + " Nodes=n1\n", false},
		{"65-character child", "SwitchName=top Switches=" + long + "\nSwitchName=" + long + " Nodes=n1\n", false},
		{"switch twice", "SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", false},
		{"missing child", "SwitchName=a Nodes=n1\nSwitchName=top Switches=a,b\n", false},
		{"cycle", "SwitchName=l Nodes=n1\nSwitchName=a Switches=b,l\nSwitchName=b Switches=a\n", false},
		{"node under two leaves", "SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n2\n", false},
		{"switch under two parents", "SwitchName=l Nodes=n1\nSwitchName=a Switches=l\nSwitchName=b Switches=l\n", false},
		{"unknown key", "SwitchName=a Nodes=n1 Foo=bar\n", false},
		{"block key in a tree", "SwitchName=a Nodes=n1\nBlockSizes=1\n", false},
		{"no SwitchName", "Nodes=n1\n", false},
		{"neither nodes nor switches", "SwitchName=a\n", false},
		{"both nodes and switches", "SwitchName=l Nodes=n1\nSwitchName=a Nodes=n2 Switches=l\n", false},
		{"not key=value", "SwitchName=a Nodes=n1 extra\n", false},
		{"bad hostlist", "SwitchName=a Nodes=n[1-\n", false},
		{"empty", "# nothing\n", false},
	}
	for _, tt := range tree {
		_, err := checkTreeConf(tt.text)
		if (err == nil) != tt.ok {
			t.Errorf("tree %s: checkTreeConf = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	block := []struct {
		name, text string
		ok         bool
	}{
		{"good", "# c\nBlockName=b1 Nodes=n[01-04]\nblockname=b2 nodes=n[05-08]\nBlockSizes=4,8\n", true},
		{"good, no BlockSizes", "BlockName=b1 Nodes=n[1-3]\n", true},
		{"sizes 3,12", "BlockName=b1 Nodes=n[1-3]\nBlockSizes=3,12\n", true},
		{"node in two blocks", "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[4-7]\nBlockSizes=4\n", false},
		{"BlockSizes 4,12", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,12\n", false},
		{"BlockSizes 4,4", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,4\n", false},
		{"BlockSizes 8,4", "BlockName=b1 Nodes=n[1-8]\nBlockSizes=8,4\n", false},
		{"BlockSizes 0", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=0\n", false},
		{"BlockSizes not a number", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,x\n", false},
		{"block under base size", "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-7]\nBlockSizes=4\n", false},
		{"BlockSizes not last", "BlockSizes=4\nBlockName=b1 Nodes=n[1-4]\n", false},
		{"BlockSizes twice", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4\nBlockSizes=4\n", false},
		{"block twice", "BlockName=b1 Nodes=n[1-4]\nBlockName=b1 Nodes=n[5-8]\n", false},
		{"65-character block", "BlockName=" + strings.Repeat("b", 65) + " Nodes=n1\n", false},
		{"block without nodes", "BlockName=b1\n", false},
		{"switch key in blocks", "SwitchName=a Nodes=n1\n", false},
	}
	for _, tt := range block {
		_, err := checkBlockConf(tt.text)
		if (err == nil) != tt.ok {
			t.Errorf("block %s: checkBlockConf = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	const goodTree = "  tree:\n    switches:\n      - switch: l1\n        nodes: n[1-2]\n      - switch: top\n        children: l1\n"
	yml := []struct {
		name, text string
		ok         bool
	}{
		{"good tree", "- topology: net\n  cluster_default: true\n" + goodTree, true},
		{"good flat and block",
			"- topology: f\n  flat: true\n- topology: b\n  block:\n    block_sizes: [2, 4]\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n", true},
		{"cluster_default before topology", "- cluster_default: true\n  topology: net\n" + goodTree, false},
		{"tree before topology", "- tree:\n    switches:\n      - switch: l1\n        nodes: n1\n  topology: net\n", false},
		{"no topology", "- cluster_default: true\n" + goodTree, false},
		{"two types", "- topology: x\n  flat: true\n" + goodTree, false},
		{"no type", "- topology: x\n  cluster_default: true\n", false},
		{"flat false", "- topology: x\n  flat: false\n", false},
		{"topology twice", "- topology: x\n  flat: true\n- topology: x\n  flat: true\n", false},
		{"two defaults", "- topology: x\n  cluster_default: true\n  flat: true\n- topology: y\n  cluster_default: true\n  flat: true\n", false},
		{"unknown attribute", "- topology: x\n  flat: true\n  colour: red\n", false},
		{"65-character switch", "- topology: x\n  tree:\n    switches:\n      - switch: " + long + "\n        nodes: n1\n", false},
		{"block sizes 4,12", "- topology: b\n  block:\n    block_sizes: [4, 12]\n    blocks:\n      - block: b1\n        nodes: n[1-4]\n", false},
		{"node in two blocks", "- topology: b\n  block:\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n      - block: b2\n        nodes: n2\n", false},
		{"numeric switch name unquoted", "- topology: x\n  tree:\n    switches:\n      - switch: 123\n        nodes: n1\n", false},
		{"not a list", "topology: x\nflat: true\n", false},
		{"empty list", "[]\n", false},
	}
	for _, tt := range yml {
		_, err := checkTopologyYAML(tt.text)
		if (err == nil) != tt.ok {
			t.Errorf("yaml %s: checkTopologyYAML = %v, want ok %v", tt.name, err, tt.ok)
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

// TestGrammarAcceptsFleetOutput feeds the checker what fleet writes.
func TestGrammarAcceptsFleetOutput(t *testing.T) {
	_, cliqued, tiered, fleet := grammarFleet()
	for _, root := range []string{"", "cluster"} {
		t.Run("root "+root, func(t *testing.T) {
			switches, _, err := Tree(fleet, TreeOptions{Root: root})
			if err != nil {
				t.Fatalf("Tree: %v", err)
			}
			blocks, sizes, _, err := Blocks(fleet, BlockOptions{})
			if err != nil {
				t.Fatalf("Blocks: %v", err)
			}
			// 4 blocks, the smallest of 4: [4, 8, 16].
			if len(blocks) != 4 || intList(sizes) != "4,8,16" {
				t.Errorf("Blocks = %d blocks, sizes %v; want 4 and [4 8 16]", len(blocks), sizes)
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

			got, err := checkTreeConf(tb.String())
			if err != nil {
				t.Fatalf("checkTreeConf: %v\n%s", err, tb.String())
			}
			sameSet(t, "tree", got, tiered)
			for _, want := range []string{"SwitchName=leaf-r1 Nodes=gb200-r1-t[01-18]", "SwitchName=" + ociLocalBlockName + " "} {
				if !strings.Contains(tb.String(), want) {
					t.Errorf("topology.conf lacks %q:\n%s", want, tb.String())
				}
			}
			if root != "" {
				// One root: a job may span the whole tree.
				if !strings.Contains(tb.String(), "\nSwitchName=cluster Switches=") {
					t.Errorf("topology.conf has no root:\n%s", tb.String())
				}
			}

			got, err = checkBlockConf(bb.String())
			if err != nil {
				t.Fatalf("checkBlockConf: %v\n%s", err, bb.String())
			}
			sameSet(t, "blocks", got, cliqued)

			topos, err := checkTopologyYAML(yb.String())
			if err != nil {
				t.Fatalf("checkTopologyYAML: %v\n%s", err, yb.String())
			}
			if len(topos) != 2 || topos[0].kind != "block" || !topos[0].dflt || topos[1].kind != "tree" || topos[1].dflt {
				t.Fatalf("topology.yaml topologies = %+v, want a default block and a tree", topos)
			}
			sameSet(t, "yaml block", topos[0].nodes, cliqued)
			sameSet(t, "yaml tree", topos[1].nodes, tiered)
		})
	}
	t.Run("yaml tree only", func(t *testing.T) {
		switches, _, err := Tree(fleet, TreeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var yb bytes.Buffer
		if err := WriteTopologyYAML(&yb, switches, nil, nil); err != nil {
			t.Fatal(err)
		}
		topos, err := checkTopologyYAML(yb.String())
		if err != nil {
			t.Fatalf("checkTopologyYAML: %v\n%s", err, yb.String())
		}
		if len(topos) != 1 || topos[0].kind != "tree" || !topos[0].dflt {
			t.Errorf("topologies = %+v, want one default tree", topos)
		}
	})
}
