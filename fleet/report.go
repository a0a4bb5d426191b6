package fleet

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Report is the fleet's consistency report: within each group of nodes of
// one system and GPU model (Node.Group), the nodes whose layout or NIC
// firmware differs from what most of the group has, each with the facts
// that differ, and the NVLink cliques that miss members. It is the
// "make the nodes identical" advice NCCL's maintainers give, checked by
// a tool.
type Report struct {
	// Nodes is how many nodes the report covers.
	Nodes int `json:"nodes"`
	// Groups are the groups, sorted by name.
	Groups []GroupReport `json:"groups"`
	// Cliques are the NVLink cliques, sorted.
	Cliques []CliqueReport `json:"cliques"`
	// Warnings name nodes the report could not compare as given.
	Warnings []string `json:"warnings"`
}

// GroupReport is one group's comparison.
type GroupReport struct {
	// Group is Node.Group of its nodes.
	Group string `json:"group"`
	// Nodes are the group's nodes compared, sorted.
	Nodes []string `json:"nodes"`
	// Layout and Firmware are the digests held by more than half of
	// Nodes; "" where no digest is.
	Layout   string `json:"layout"`
	Firmware string `json:"firmware"`
	// NoMajority is set when Layout or Firmware is "": the group splits
	// with no side in the majority (2 against 2), so no node can be named
	// the odd one out. Variants says how it splits.
	NoMajority bool `json:"no_majority"`
	// Variants are the group's distinct (layout, firmware) pairs and the
	// nodes holding each, most nodes first; only where NoMajority.
	Variants []Variant `json:"variants,omitempty"`
	// Drifted are the nodes whose layout or firmware differs from the
	// majority's, sorted; none where NoMajority.
	Drifted []Drift `json:"drifted"`
}

// Variant is one (layout, firmware) pair of a group that has no
// majority, and the nodes that hold it.
type Variant struct {
	Layout   string   `json:"layout"`
	Firmware string   `json:"firmware"`
	Nodes    []string `json:"nodes"`
}

// Drift is one node that differs from its group's majority.
type Drift struct {
	Node        string       `json:"node"`
	Differences []Difference `json:"differences"`
}

// Difference is one fact in which a drifted node differs from its group:
// the node's Value, and the Majority value Count of the Of nodes of the
// group hold. "" is a fact the node (or the majority) does not have. Key
// is a Fact key, or "layout digest" or "firmware digest" where a digest
// differs but no itemized fact does.
type Difference struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Majority string `json:"majority"`
	Count    int    `json:"count"`
	Of       int    `json:"of"`
}

// CliqueReport is one NVLink clique (Node.Clique) and its members.
type CliqueReport struct {
	Clique string `json:"clique"`
	// Nodes are the nodes that report the clique, sorted.
	Nodes []string `json:"nodes"`
	// IMEXNodes is the most nodes any member's IMEX configuration lists;
	// 0 where none has one.
	IMEXNodes int `json:"imex_nodes"`
	// Missing is IMEXNodes less len(Nodes), where that is positive: nodes
	// the domain was configured with that report no clique (down, not
	// scraped, or out of the NVLink fabric).
	Missing int `json:"missing"`
}

// Digest keys of a Difference where no itemized fact differs.
const (
	KeyLayoutDigest   = "layout digest"
	KeyFirmwareDigest = "firmware digest"
)

// Consistency compares every node with the other nodes of its group
// (Node.Group). A group's majority layout is the digest more than half
// of its nodes hold, its majority firmware likewise; a node whose layout
// or firmware is not the majority's is drifted, and its Differences are
// the facts in which it differs from what more than half of the group
// holds (a fact no value of which more than half hold is left out). A
// group with no majority digest names no node. A node with neither
// digest (its agent exports no gpuaffinity_node_layout_info) is not
// compared and is named in a warning.
func Consistency(nodes []Node) Report {
	r := Report{Nodes: len(nodes), Groups: []GroupReport{}, Cliques: []CliqueReport{}, Warnings: []string{}}
	groups := make(map[string][]Node)
	names := make(map[string]string) // name -> target, for duplicates
	for _, n := range nodes {
		if t, ok := names[n.Name]; ok {
			r.Warnings = append(r.Warnings, fmt.Sprintf("node %q: reported by two targets, %q and %q; the second is not compared", n.Name, t, n.Target))
			continue
		} else {
			names[n.Name] = n.Target
		}
		if n.Layout == "" && n.Firmware == "" {
			r.Warnings = append(r.Warnings, fmt.Sprintf("node %q (%s): no layout or firmware digest; not compared", n.Name, n.Group()))
			continue
		}
		groups[n.Group()] = append(groups[n.Group()], n)
	}
	keys := make([]string, 0, len(groups))
	for g := range groups {
		keys = append(keys, g)
	}
	sort.Strings(keys)
	for _, g := range keys {
		r.Groups = append(r.Groups, compareGroup(g, groups[g]))
	}
	r.Cliques, r.Warnings = cliqueReports(nodes, r.Warnings)
	return r
}

// compareGroup is Consistency for the nodes of one group.
func compareGroup(group string, nodes []Node) GroupReport {
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	g := GroupReport{Group: group, Drifted: []Drift{}}
	for _, n := range nodes {
		g.Nodes = append(g.Nodes, n.Name)
	}
	layout, layoutN := majority(nodes, func(n Node) string { return n.Layout })
	firmware, firmwareN := majority(nodes, func(n Node) string { return n.Firmware })
	g.Layout, g.Firmware = layout, firmware
	if layoutN == 0 || firmwareN == 0 {
		g.NoMajority = true
		g.Layout, g.Firmware = "", ""
		if layoutN > 0 {
			g.Layout = layout
		}
		if firmwareN > 0 {
			g.Firmware = firmware
		}
		g.Variants = variants(nodes)
		return g
	}
	// The majority value of every fact key any node of the group has.
	factKeys := make(map[string]bool)
	for _, n := range nodes {
		for _, f := range n.Facts {
			factKeys[f.Key] = true
		}
	}
	sortedKeys := make([]string, 0, len(factKeys))
	for k := range factKeys {
		sortedKeys = append(sortedKeys, k)
	}
	sort.Strings(sortedKeys)
	type held struct {
		value string
		count int
	}
	majorities := make(map[string]held, len(sortedKeys))
	for _, k := range sortedKeys {
		v, c := majority(nodes, func(n Node) string { v, _ := n.Fact(k); return v })
		if c > 0 {
			majorities[k] = held{v, c}
		}
	}
	for _, n := range nodes {
		if n.Layout == layout && n.Firmware == firmware {
			continue
		}
		d := Drift{Node: n.Name}
		for _, k := range sortedKeys {
			m, ok := majorities[k]
			if !ok {
				continue
			}
			if v, _ := n.Fact(k); v != m.value {
				d.Differences = append(d.Differences, Difference{Key: k, Value: v, Majority: m.value, Count: m.count, Of: len(nodes)})
			}
		}
		if len(d.Differences) == 0 {
			if n.Layout != layout {
				d.Differences = append(d.Differences, Difference{Key: KeyLayoutDigest, Value: n.Layout, Majority: layout, Count: layoutN, Of: len(nodes)})
			}
			if n.Firmware != firmware {
				d.Differences = append(d.Differences, Difference{Key: KeyFirmwareDigest, Value: n.Firmware, Majority: firmware, Count: firmwareN, Of: len(nodes)})
			}
		}
		g.Drifted = append(g.Drifted, d)
	}
	return g
}

// majority returns the value of key that more than half of nodes hold
// and how many hold it; "", 0 where no value does.
func majority(nodes []Node, key func(Node) string) (string, int) {
	counts := make(map[string]int)
	for _, n := range nodes {
		counts[key(n)]++
	}
	for v, c := range counts {
		if 2*c > len(nodes) {
			return v, c
		}
	}
	return "", 0
}

// variants returns the distinct (layout, firmware) pairs of nodes, most
// nodes first, then by digests.
func variants(nodes []Node) []Variant {
	var vs []Variant
	index := make(map[[2]string]int)
	for _, n := range nodes {
		k := [2]string{n.Layout, n.Firmware}
		i, ok := index[k]
		if !ok {
			i = len(vs)
			index[k] = i
			vs = append(vs, Variant{Layout: n.Layout, Firmware: n.Firmware})
		}
		vs[i].Nodes = append(vs[i].Nodes, n.Name)
	}
	sort.SliceStable(vs, func(i, j int) bool {
		if len(vs[i].Nodes) != len(vs[j].Nodes) {
			return len(vs[i].Nodes) > len(vs[j].Nodes)
		}
		if vs[i].Layout != vs[j].Layout {
			return vs[i].Layout < vs[j].Layout
		}
		return vs[i].Firmware < vs[j].Firmware
	})
	return vs
}

// cliqueReports returns the cliques of nodes, sorted, and warns where
// the members disagree about the IMEX node count or outnumber it.
func cliqueReports(nodes []Node, warns []string) ([]CliqueReport, []string) {
	members := make(map[string][]Node)
	for _, n := range nodes {
		if n.Clique != "" {
			members[n.Clique] = append(members[n.Clique], n)
		}
	}
	cliques := make([]string, 0, len(members))
	for c := range members {
		cliques = append(cliques, c)
	}
	sort.Strings(cliques)
	out := []CliqueReport{}
	for _, c := range cliques {
		cr := CliqueReport{Clique: c}
		counts := make(map[int]bool)
		for _, n := range members[c] {
			cr.Nodes = append(cr.Nodes, n.Name)
			if n.IMEXNodes > 0 {
				counts[n.IMEXNodes] = true
			}
			cr.IMEXNodes = max(cr.IMEXNodes, n.IMEXNodes)
		}
		sort.Strings(cr.Nodes)
		if len(counts) > 1 {
			var cs []string
			for _, n := range members[c] {
				if n.IMEXNodes > 0 {
					cs = append(cs, fmt.Sprintf("%q %d", n.Name, n.IMEXNodes))
				}
			}
			sort.Strings(cs)
			warns = append(warns, fmt.Sprintf("clique %q: members' IMEX configurations list different node counts (%s)", c, strings.Join(cs, ", ")))
		}
		if cr.IMEXNodes > 0 && len(cr.Nodes) > cr.IMEXNodes {
			warns = append(warns, fmt.Sprintf("clique %q: %d nodes report it, more than the %d its IMEX configuration lists", c, len(cr.Nodes), cr.IMEXNodes))
		}
		cr.Missing = max(0, cr.IMEXNodes-len(cr.Nodes))
		out = append(out, cr)
	}
	return out, warns
}

// OK reports whether the fleet is consistent: no node drifts, no group
// lacks a majority and no clique misses a member.
func (r Report) OK() bool {
	for _, g := range r.Groups {
		if g.NoMajority || len(g.Drifted) > 0 {
			return false
		}
	}
	for _, c := range r.Cliques {
		if c.Missing > 0 {
			return false
		}
	}
	return true
}

// WriteText writes the report as plain text, one finding a line, each
// line starting with its kind so that grep finds them:
//
//	GROUP <group>: <n> nodes, layout <digest>, firmware <digest>, <k> drifted
//	DRIFT <node> (<group>, <k> of <n> nodes differ): <key> = "<value>", majority "<value>" (<count> of <n>)
//	NOMAJORITY <group> (<n> nodes): layout <digest>, firmware <digest>: <node> <node>...
//	CLIQUE <clique>: <n> nodes, IMEX lists <m>, <k> missing: <node> <node>...
//	WARNING <text>
//	OK|FAIL: <summary>
//
// A drifted node has one DRIFT line per difference; a group without a
// majority one NOMAJORITY line per variant. Fact values are always
// quoted (%q), and names, keys and digests are quoted unless they are
// plain words, so a hostile value cannot start a line of its own.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	drifted, split, missing := 0, 0, 0
	for _, g := range r.Groups {
		group := reportWord(g.Group, true)
		if g.NoMajority {
			split++
			fmt.Fprintf(&b, "GROUP %s: %d nodes, no majority\n", group, len(g.Nodes))
			for _, v := range g.Variants {
				fmt.Fprintf(&b, "NOMAJORITY %s (%d nodes): layout %s, firmware %s: %s\n",
					group, len(g.Nodes), reportWord(v.Layout, false), reportWord(v.Firmware, false), reportWords(v.Nodes))
			}
			continue
		}
		fmt.Fprintf(&b, "GROUP %s: %d nodes, layout %s, firmware %s, %d drifted\n",
			group, len(g.Nodes), reportWord(g.Layout, false), reportWord(g.Firmware, false), len(g.Drifted))
		for _, d := range g.Drifted {
			drifted++
			for _, x := range d.Differences {
				fmt.Fprintf(&b, "DRIFT %s (%s, %d of %d nodes differ): %s = %q, majority %q (%d of %d)\n",
					reportWord(d.Node, false), group, len(g.Drifted), len(g.Nodes),
					reportWord(x.Key, false), x.Value, x.Majority, x.Count, x.Of)
			}
		}
	}
	for _, c := range r.Cliques {
		if c.Missing > 0 {
			missing++
		}
		imex := "no IMEX configuration"
		if c.IMEXNodes > 0 {
			imex = fmt.Sprintf("IMEX lists %d", c.IMEXNodes)
		}
		fmt.Fprintf(&b, "CLIQUE %s: %d nodes, %s, %d missing: %s\n",
			reportWord(c.Clique, false), len(c.Nodes), imex, c.Missing, reportWords(c.Nodes))
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(&b, "WARNING %s\n", reportWord(x, true))
	}
	verdict := "OK"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "%s: %d nodes, %d groups, %d cliques; %d drifted, %d groups without a majority, %d cliques missing nodes\n",
		verdict, r.Nodes, len(r.Groups), len(r.Cliques), drifted, split, missing)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing consistency report: %w", err)
	}
	return nil
}

// reportWord returns s as it is when it is a plain word (letters,
// digits and ._-/+@, and spaces where spaces is set), else quoted.
func reportWord(s string, spaces bool) string {
	plain := s != "" && s[0] != ' ' && s[len(s)-1] != ' '
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("._-/+@", r) || spaces && r == ' ') {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return fmt.Sprintf("%q", s)
}

// reportWords is reportWord of each of names, space-separated.
func reportWords(names []string) string {
	ws := make([]string, len(names))
	for i, n := range names {
		ws[i] = reportWord(n, false)
	}
	return strings.Join(ws, " ")
}
