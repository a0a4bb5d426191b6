package fleet

import (
	"encoding/json"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/fleet/nodeview"
	"io"
	"slices"
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
	// Stale are the nodes not scraped now whose placement the fleet
	// reader kept from its lookback window, sorted: not compared, and
	// counted as their cliques' members.
	Stale []string `json:"stale"`
	// Refused are the targets the fleet reader refused (two targets
	// naming one node, an agent naming another host), one line each:
	// the report fails while there are any.
	Refused []string `json:"refused"`
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
// holds (a fact no value of which more than half hold is left out).
// Nodes with the same digests have the same facts, so a variant's facts
// are read from whichever of its nodes has them (the fleet reader gives
// them to one); a variant none of whose nodes has facts differs by
// digest only. A group with no majority digest names no node. A node
// with neither digest (its agent exports no gpuaffinity_node_layout_info)
// is not compared and is named in a warning; a stale node (not scraped
// now) is listed, not compared, and still counts as its clique's member.
// The work is linear in the nodes and in their facts.
func Consistency(nodes []Node) Report {
	r := Report{Nodes: len(nodes), Groups: []GroupReport{}, Cliques: []CliqueReport{}, Stale: []string{}, Refused: []string{}, Warnings: []string{}}
	groups := make(map[string][]*Node)
	names := make(map[string]string, len(nodes)) // name -> target, for duplicates
	for i := range nodes {
		n := &nodes[i]
		if t, ok := names[n.Name]; ok {
			r.Warnings = append(r.Warnings, fmt.Sprintf("node %q: reported by two targets, %q and %q; the second is not compared", n.Name, t, n.Target))
			continue
		}
		names[n.Name] = n.Target
		switch {
		case n.Stale:
			r.Stale = append(r.Stale, n.Name)
		case n.Layout == "" && n.Firmware == "":
			r.Warnings = append(r.Warnings, fmt.Sprintf("node %q (%s): no layout or firmware digest; not compared", n.Name, n.Group()))
		default:
			groups[n.Group()] = append(groups[n.Group()], n)
		}
	}
	sort.Strings(r.Stale)
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

// groupVariant is one (layout, firmware) pair of a group: the nodes that
// hold it and, where one of them has them, their facts.
type groupVariant struct {
	layout, firmware string
	nodes            []string
	facts            []Fact // sorted by key; nil unknown
}

// held is a fact's majority value and how many nodes hold it.
type held struct {
	key, value string
	count      int
}

// compareGroup is Consistency for the nodes of one group.
func compareGroup(group string, nodes []*Node) GroupReport {
	slices.SortStableFunc(nodes, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	g := GroupReport{Group: group, Drifted: []Drift{}}
	var vs []*groupVariant
	index := make(map[[2]string]*groupVariant)
	layouts, firmwares := make(map[string]int), make(map[string]int)
	for _, n := range nodes {
		g.Nodes = append(g.Nodes, n.Name)
		layouts[n.Layout]++
		firmwares[n.Firmware]++
		k := [2]string{n.Layout, n.Firmware}
		v := index[k]
		if v == nil {
			v = &groupVariant{layout: n.Layout, firmware: n.Firmware}
			index[k] = v
			vs = append(vs, v)
		}
		v.nodes = append(v.nodes, n.Name)
		if v.facts == nil && n.Facts != nil {
			v.facts = nodeview.SortFacts(slices.Clone(n.Facts))
		}
	}
	layout, layoutN := majorityOf(layouts, len(nodes))
	firmware, firmwareN := majorityOf(firmwares, len(nodes))
	g.Layout, g.Firmware = layout, firmware
	if layoutN == 0 || firmwareN == 0 {
		g.NoMajority = true
		g.Variants = variants(vs)
		return g
	}
	majorities := factMajorities(vs, len(nodes))
	for _, v := range vs {
		if v.layout == layout && v.firmware == firmware {
			continue
		}
		var diffs []Difference
		if v.facts != nil {
			diffs = factDifferences(v.facts, majorities, len(nodes))
		}
		if len(diffs) == 0 {
			if v.layout != layout {
				diffs = append(diffs, Difference{Key: KeyLayoutDigest, Value: v.layout, Majority: layout, Count: layoutN, Of: len(nodes)})
			}
			if v.firmware != firmware {
				diffs = append(diffs, Difference{Key: KeyFirmwareDigest, Value: v.firmware, Majority: firmware, Count: firmwareN, Of: len(nodes)})
			}
		}
		for _, name := range v.nodes {
			g.Drifted = append(g.Drifted, Drift{Node: name, Differences: diffs})
		}
	}
	sort.SliceStable(g.Drifted, func(i, j int) bool { return g.Drifted[i].Node < g.Drifted[j].Node })
	return g
}

// majorityOf returns the value more than half of total hold and how
// many hold it; "", 0 where none does.
func majorityOf(counts map[string]int, total int) (string, int) {
	for v, c := range counts {
		if 2*c > total {
			return v, c
		}
	}
	return "", 0
}

// factMajorities returns, sorted by key, every fact key's value more than
// half of the group's total nodes hold, counting each variant with facts
// once per node; a variant with facts but without a key holds "" for it.
// Variants without facts do not vote.
func factMajorities(vs []*groupVariant, total int) []held {
	counts := make(map[string]map[string]int)
	voters := 0
	for _, v := range vs {
		if v.facts == nil {
			continue
		}
		voters += len(v.nodes)
		for _, f := range v.facts {
			if counts[f.Key] == nil {
				counts[f.Key] = make(map[string]int)
			}
			counts[f.Key][f.Value] += len(v.nodes)
		}
	}
	out := make([]held, 0, len(counts))
	for k, byValue := range counts {
		with := 0
		for _, c := range byValue {
			with += c
		}
		if without := voters - with; without > 0 {
			byValue[""] += without
		}
		if v, c := majorityOf(byValue, total); c > 0 {
			out = append(out, held{k, v, c})
		}
	}
	slices.SortFunc(out, func(a, b held) int { return strings.Compare(a.key, b.key) })
	return out
}

// factDifferences are the keys in which facts (sorted by key) differ from
// the majorities (sorted by key): one merge of the two lists.
func factDifferences(facts []Fact, majorities []held, total int) []Difference {
	var out []Difference
	i := 0
	for _, m := range majorities {
		for i < len(facts) && facts[i].Key < m.key {
			i++ // a key with no majority value: left out
		}
		v := ""
		if i < len(facts) && facts[i].Key == m.key {
			v = facts[i].Value
		}
		if v != m.value {
			out = append(out, Difference{Key: m.key, Value: v, Majority: m.value, Count: m.count, Of: total})
		}
	}
	return out
}

// variants returns the group's variants, most nodes first, then by
// digests.
func variants(vs []*groupVariant) []Variant {
	out := make([]Variant, 0, len(vs))
	for _, v := range vs {
		out = append(out, Variant{Layout: v.layout, Firmware: v.firmware, Nodes: v.nodes})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if len(out[i].Nodes) != len(out[j].Nodes) {
			return len(out[i].Nodes) > len(out[j].Nodes)
		}
		if out[i].Layout != out[j].Layout {
			return out[i].Layout < out[j].Layout
		}
		return out[i].Firmware < out[j].Firmware
	})
	return out
}

// cliqueReports returns the cliques of nodes, sorted, and warns where
// the members disagree about the IMEX node count or outnumber it.
func cliqueReports(nodes []Node, warns []string) ([]CliqueReport, []string) {
	members := make(map[string][]*Node)
	for i := range nodes {
		if n := &nodes[i]; n.Clique != "" {
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
// lacks a majority, no clique misses a member and no target was refused.
func (r Report) OK() bool {
	if len(r.Refused) > 0 {
		return false
	}
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

// ReportFormats are the forms Write writes: "text" (WriteText) and
// "json" (the Report, indented).
var ReportFormats = []string{"text", "json"}

// CheckReportFormat refuses a format Write does not write.
func CheckReportFormat(format string) error {
	if !slices.Contains(ReportFormats, format) {
		return fmt.Errorf("%q: want text or json", format)
	}
	return nil
}

// Write writes the report in format (ReportFormats): the text of
// WriteText, or the Report as indented JSON.
func (r Report) Write(w io.Writer, format string) error {
	if err := CheckReportFormat(format); err != nil {
		return err
	}
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.WriteText(w)
}

// WriteText writes the report as plain text, one finding a line, each
// line starting with its kind so that grep finds them:
//
//	GROUP <group>: <n> nodes, layout <digest>, firmware <digest>, <k> drifted
//	DRIFT <node> (<group>, <k> of <n> nodes differ): <key> = "<value>", majority "<value>" (<count> of <n>)
//	NOMAJORITY <group> (<n> nodes): layout <digest>, firmware <digest>: <node> <node>...
//	CLIQUE <clique>: <n> nodes, IMEX lists <m>, <k> missing: <node> <node>...
//	STALE <node>: not scraped now; placement kept from the lookback, not compared
//	REFUSED <text>
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
	for _, n := range r.Stale {
		fmt.Fprintf(&b, "STALE %s: not scraped now; placement kept from the lookback, not compared\n", reportWord(n, false))
	}
	for _, x := range r.Refused {
		fmt.Fprintf(&b, "REFUSED %s\n", reportText(x))
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(&b, "WARNING %s\n", reportText(x))
	}
	verdict := "OK"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "%s: %d nodes, %d groups, %d cliques; %d drifted, %d groups without a majority, %d cliques missing nodes, %d stale, %d refused\n",
		verdict, r.Nodes, len(r.Groups), len(r.Cliques), drifted, split, missing, len(r.Stale), len(r.Refused))
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

// reportText returns a line of free text as it is where it is
// printable ASCII (no byte of it can end the line or move the terminal),
// else quoted.
func reportText(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return fmt.Sprintf("%q", s)
		}
	}
	return s
}

// reportWords is reportWord of each of names, space-separated.
func reportWords(names []string) string {
	ws := make([]string, len(names))
	for i, n := range names {
		ws[i] = reportWord(n, false)
	}
	return strings.Join(ws, " ")
}

// Summary is the report's findings in one line: the drifted nodes, the
// cliques missing members, the groups without a majority and how many
// targets were refused; "" where there are none.
func (r Report) Summary() string {
	var drifted, missing, nomaj []string
	for _, g := range r.Groups {
		for _, d := range g.Drifted {
			drifted = append(drifted, d.Node)
		}
		if g.NoMajority {
			nomaj = append(nomaj, g.Group)
		}
	}
	for _, c := range r.Cliques {
		if c.Missing > 0 {
			missing = append(missing, c.Clique)
		}
	}
	var parts []string
	if len(drifted) > 0 {
		parts = append(parts, "drifted: "+nameList(drifted))
	}
	if len(missing) > 0 {
		parts = append(parts, "cliques missing members: "+nameList(missing))
	}
	if len(nomaj) > 0 {
		parts = append(parts, "no majority in: "+nameList(nomaj))
	}
	if len(r.Refused) > 0 {
		parts = append(parts, fmt.Sprintf("%d targets refused", len(r.Refused)))
	}
	return strings.Join(parts, "; ")
}
