package fleet

import (
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
)

// Switch is one switch of Slurm's topology/tree: a network switch, or the
// cloud's group of them (a GCP sub-block or block, an OCI local block,
// network block or HPC island), with the nodes (a leaf) or the switches
// under it.
type Switch struct {
	// Name is the switch's name in topology.conf: its ID where that is a
	// valid Slurm name (SlurmName) no other switch has, else a name made
	// unique from its ID and the IDs above it (SwitchName, then a hash).
	Name string `json:"name"`
	// ID is the switch's name as the nodes' tiers give it.
	ID string `json:"id"`
	// Tier is 0 for a leaf, one more for each level above.
	Tier int `json:"tier"`
	// Nodes are a leaf's nodes, sorted; Switches an upper switch's
	// children, sorted by name.
	Nodes    []string `json:"nodes,omitempty"`
	Switches []string `json:"switches,omitempty"`
}

// TreeOptions shape Tree.
type TreeOptions struct {
	// Root, when set, is a switch put over every top-level switch, so
	// that a job may span them (Slurm places a job only within one
	// switch's subtree). "" leaves the top-level switches apart.
	Root string
	// Previous is the tree an earlier run wrote, as slurmconf reads it
	// back; nil where there is none. A node whose tiers are empty, or
	// fewer than that file gave it (an agent restarted before its
	// metadata service answered), keeps the switches the file put it
	// under; the plan's Change compares the two.
	Previous *slurmconf.Tree
	// Keep are nodes the fleet reader could not place without doubt
	// (prom.Fleet.Unresolved): each keeps the switches Previous gave it.
	Keep []string
}

// TreePlan is the topology/tree a run writes: its switches, how they
// differ from the previous file's, and the warnings.
type TreePlan struct {
	Switches []Switch
	Change   Change
	Warnings []string
}

// Tree returns Slurm's topology/tree for the nodes from their network
// tiers (Node.Tiers, tier 0 the leaf): a switch per distinct tier ID and
// what is above it, so that a sub-block ID two blocks both use stays two
// switches. Switches are sorted leaves first, then by tier and name.
// Every name is unique by construction (SwitchName's, else one made from
// the ID and its parents' and checked against every name taken), so no
// node's tiers can make two lines of one name. Warnings name the nodes
// left out: without tiers, with a name Slurm cannot take, a second node
// of one name, or tiers that end at a switch other nodes have switches
// under. It fails only on an invalid Root.
func Tree(nodes []Node, o TreeOptions) (TreePlan, error) {
	var plan TreePlan
	if o.Root != "" && !SlurmName(o.Root) {
		return plan, fmt.Errorf("tree root %q: not a valid Slurm switch name (1 to 64 of A-Z a-z 0-9 . _ -)", o.Root)
	}
	prev := previousPaths(o.Previous, o.Root)
	type sw struct {
		Switch
		children map[string]bool // keys
	}
	byKey := make(map[string]*sw)
	var untiered []string
	for _, n := range slurmNodes(withKept(nodes, o.Keep, func(n string) bool { _, ok := prev[n]; return ok }), &plan.Warnings) {
		tiers := n.Tiers
		if p, ok := prev[n.Name]; ok && partialTiers(tiers, p) {
			tiers = p
			plan.Change.Kept = append(plan.Change.Kept, n.Name)
		}
		if len(tiers) == 0 {
			untiered = append(untiered, n.Name)
			continue
		}
		if slices.Contains(tiers, "") {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("node %q: an empty network tier in %q; left out of the tree", n.Name, tiers))
			continue
		}
		// A switch is its ID and the IDs above it.
		keys := make([]string, len(tiers))
		for i := range tiers {
			keys[i] = strings.Join(tiers[i:], "\x00")
		}
		for i, k := range keys {
			s := byKey[k]
			if s == nil {
				s = &sw{Switch: Switch{ID: tiers[i], Tier: i}, children: make(map[string]bool)}
				byKey[k] = s
			}
			s.Tier = max(s.Tier, i)
			if i == 0 {
				s.Nodes = append(s.Nodes, n.Name)
			} else {
				s.children[keys[i-1]] = true
			}
		}
	}
	if len(plan.Change.Kept) > 0 {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("%d nodes report no network tiers now (or fewer than before) and keep the switches of the previous file: %s",
			len(plan.Change.Kept), nameList(plan.Change.Kept)))
	}
	if len(untiered) > 0 {
		sort.Strings(untiered)
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("%d nodes have no network tiers and are left out of the tree (Slurm wants every node under a switch; see the agent's --placement flags): %s",
			len(untiered), nameList(untiered)))
	}
	if len(byKey) > 0 {
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		names, warns := switchNames(keys, func(k string) string { return byKey[k].ID }, o.Root)
		plan.Warnings = append(plan.Warnings, warns...)
		var tops []string
		for _, k := range keys {
			s := byKey[k]
			s.Name = names[k]
			for c := range s.children {
				s.Switches = append(s.Switches, names[c])
			}
			sort.Strings(s.Switches)
			sort.Strings(s.Nodes)
			if len(s.Nodes) > 0 && len(s.Switches) > 0 {
				// Nodes whose tiers end where other nodes' go on: their
				// leaf is not known, and a switch with both nodes and
				// switches under it is not one topology.conf line.
				plan.Warnings = append(plan.Warnings, fmt.Sprintf("switch %q has switches under it, but nodes %s name it as their leaf (fewer tiers than their peers): those nodes are left out of the tree",
					s.ID, nameList(s.Nodes)))
				s.Nodes = nil
			}
			if !strings.Contains(k, "\x00") {
				tops = append(tops, s.Name)
			}
			plan.Switches = append(plan.Switches, s.Switch)
		}
		if o.Root != "" {
			sort.Strings(tops)
			top := 0
			for _, s := range plan.Switches {
				top = max(top, s.Tier)
			}
			plan.Switches = append(plan.Switches, Switch{Name: o.Root, ID: o.Root, Tier: top + 1, Switches: tops})
		}
		sort.Slice(plan.Switches, func(i, j int) bool {
			a, b := plan.Switches[i], plan.Switches[j]
			if a.Tier != b.Tier {
				return a.Tier < b.Tier
			}
			return a.Name < b.Name
		})
	}
	plan.Change.compare(previousLeaves(o.Previous), leavesOf(plan.Switches))
	plan.Warnings = append(plan.Warnings, plan.Change.warnings("tree", "leaf")...)
	return plan, nil
}

// switchNames names the switches keys give (a switch's ID, then the IDs
// above it, NUL-separated; id returns its ID): SwitchName(ID) where no
// other switch and not the root would have that name; else a name made
// from it and the hash of the key, checked against every name given,
// longer hash and then a counter where taken. Names are unique by
// construction: no ID a node reports can make two switches one name.
func switchNames(keys []string, id func(string) string, root string) (map[string]string, []string) {
	names := make(map[string]string, len(keys))
	taken := make(map[string]bool, len(keys)+1)
	if root != "" {
		taken[root] = true
	}
	count := make(map[string]int, len(keys))
	for _, k := range keys {
		count[SwitchName(id(k))]++
	}
	var clash []string
	for _, k := range keys {
		if n := SwitchName(id(k)); count[n] == 1 && !taken[n] {
			names[k] = n
			taken[n] = true
		} else {
			clash = append(clash, k)
		}
	}
	var warns []string
	for _, k := range clash {
		base, h := SwitchName(id(k)), fnvHex(k)
		n := fmt.Sprintf("%.55s-%s", base, h[:8])
		if taken[n] {
			n = fmt.Sprintf("%.47s-%s", base, h)
		}
		for i := 2; taken[n]; i++ {
			n = fmt.Sprintf("%.40s-%s-%d", base, h, i)
		}
		names[k] = n
		taken[n] = true
		warns = append(warns, fmt.Sprintf("switch %q is named twice (under different parents, as the root, or as another switch's made name); this one, under %q, is %s",
			id(k), strings.Join(strings.Split(k, "\x00")[1:], " / "), n))
	}
	return names, warns
}

// withKept is nodes and, for every name of keep none of them has that
// the previous file holds (inPrev), a node of that name with an empty
// placement, which keeps what that file gave it.
func withKept(nodes []Node, keep []string, inPrev func(string) bool) []Node {
	if len(keep) == 0 {
		return nodes
	}
	have := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		have[n.Name] = true
	}
	out := slices.Clone(nodes)
	for _, k := range keep {
		if !have[k] && inPrev(k) {
			out = append(out, Node{Name: k})
			have[k] = true
		}
	}
	return out
}

// partialTiers reports whether cur says less than prev, what an earlier
// run gave the node: nothing, or a part of it (its first or last
// tiers), as a placement read half way gives.
func partialTiers(cur, prev []string) bool {
	if len(cur) == 0 {
		return true
	}
	if len(cur) >= len(prev) {
		return false
	}
	return slices.Equal(cur, prev[:len(cur)]) || slices.Equal(cur, prev[len(prev)-len(cur):])
}

// previousPaths maps every node of a previous tree to the IDs of the
// switches above it, leaf first (a switch's ID from the comment above it
// where its name is a made one), without root.
func previousPaths(prev *slurmconf.Tree, root string) map[string][]string {
	if prev == nil {
		return nil
	}
	parent := make(map[string]string)
	ids := make(map[string]string)
	for _, s := range prev.Switches {
		ids[s.Name] = idFromComment(s.Name, s.Comment)
		for _, c := range s.Switches {
			parent[c] = s.Name
		}
	}
	out := make(map[string][]string)
	for _, s := range prev.Switches {
		if len(s.Nodes) == 0 {
			continue
		}
		var path []string
		for at, ok := s.Name, true; ok && len(path) <= len(prev.Switches); at, ok = parent[at] {
			path = append(path, ids[at])
		}
		if root != "" && len(path) > 1 && path[len(path)-1] == root {
			path = path[:len(path)-1]
		}
		for _, n := range s.Nodes {
			out[n] = path
		}
	}
	return out
}

// idFromComment is the ID a switch stands for: what the comment WriteTree
// puts above a switch whose name is not its ID says ("<name>: <ID>", the
// ID quoted where it is not printable), else its name.
func idFromComment(name, comment string) string {
	rest, ok := strings.CutPrefix(comment, name+": ")
	if !ok || rest == "" {
		return name
	}
	if strings.HasPrefix(rest, `"`) {
		if s, err := strconv.Unquote(rest); err == nil {
			return s
		}
	}
	return rest
}

// previousLeaves maps every node of a previous tree to its leaf's name.
func previousLeaves(prev *slurmconf.Tree) map[string]string {
	if prev == nil {
		return nil
	}
	out := make(map[string]string)
	for _, s := range prev.Switches {
		for _, n := range s.Nodes {
			out[n] = s.Name
		}
	}
	return out
}

// leavesOf maps every node of switches to its leaf's name.
func leavesOf(switches []Switch) map[string]string {
	out := make(map[string]string)
	for _, s := range switches {
		for _, n := range s.Nodes {
			out[n] = s.Name
		}
	}
	return out
}

// SwitchName returns id as a Slurm switch or block name: id itself where
// SlurmName takes it, else "x" and the hex of its FNV-64a hash (the form
// Labels gives values Kubernetes would refuse), so that an OCID over 64
// characters still names one switch, the same on every run.
func SwitchName(id string) string {
	if SlurmName(id) {
		return id
	}
	return "x" + fnvHex(id)
}

func fnvHex(s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("%016x", h.Sum64())
}

// slurmNodes returns the nodes Slurm can name, sorted by name, warning
// about the others: a name Slurm's parsers would split or misread, and a
// second node of one name.
func slurmNodes(nodes []Node, warns *[]string) []Node {
	out := make([]Node, 0, len(nodes))
	seen := make(map[string]string)
	for _, n := range nodes {
		switch t, dup := seen[n.Name]; {
		case !SlurmName(n.Name):
			*warns = append(*warns, fmt.Sprintf("node %.80q (target %.80q): not a name Slurm takes (1 to 64 of A-Z a-z 0-9 . _ -); left out", n.Name, n.Target))
		case dup:
			*warns = append(*warns, fmt.Sprintf("node %q: reported by two targets, %q and %q; the second is left out", n.Name, t, n.Target))
		default:
			seen[n.Name] = n.Target
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// nameList is names for a message: all of them up to 20, then a count.
func nameList(names []string) string {
	if len(names) <= 20 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:20], ", ") + fmt.Sprintf(" and %d more", len(names)-20)
}

// comment returns s for a configuration file's comment: itself where it
// is printable ASCII, else quoted, so that no ID can end the comment's
// line and start a setting of its own.
func comment(s string) string {
	for _, r := range s {
		if r < ' ' || r > '~' {
			return strconv.Quote(s)
		}
	}
	return s
}

// WriteTree writes switches as topology.conf for topology/tree
// (topology.conf(5)): one SwitchName line per switch, Nodes= for a leaf,
// Switches= for the others, each a hostlist expression, in the order
// given; a switch whose name is not its ID is preceded by a comment
// naming the ID (what a later run reads back). The file is parsed back
// with Slurm's rules (slurmconf.ParseTree) before anything is written:
// a file slurmctld would refuse is an error here, not a fatal there.
func WriteTree(w io.Writer, switches []Switch) error {
	var b strings.Builder
	b.WriteString("# Slurm topology.conf for TopologyPlugin=topology/tree, written by gpuaffinity fleet slurm-tree\n")
	for _, s := range switches {
		if s.Name != s.ID {
			fmt.Fprintf(&b, "# %s: %s\n", s.Name, comment(s.ID))
		}
		switch {
		case len(s.Nodes) > 0:
			fmt.Fprintf(&b, "SwitchName=%s Nodes=%s\n", s.Name, Hostlist(s.Nodes))
		case len(s.Switches) > 0:
			fmt.Fprintf(&b, "SwitchName=%s Switches=%s\n", s.Name, Hostlist(s.Switches))
		default:
			return fmt.Errorf("switch %q: neither nodes nor switches", s.Name)
		}
	}
	if _, err := slurmconf.ParseTree([]byte(b.String())); err != nil {
		return fmt.Errorf("refusing to write a topology.conf slurmctld would not load: %w", err)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing topology.conf: %w", err)
	}
	return nil
}
