package slurmconf

import "fmt"

// Switch is one switch of a topology/tree topology: a SwitchName line of
// topology.conf or an item of a tree's switches in topology.yaml.
type Switch struct {
	// Name is SwitchName= (switch:), as written.
	Name string
	// Comment is the text of the comment line directly above the switch
	// ('#' and the space around it stripped), "" where there is none or a
	// blank line comes between. fleet's writers put the ID a hashed name
	// stands for there.
	Comment string
	// Nodes are a leaf's nodes, Nodes= (nodes:) expanded, in file order;
	// nil for an upper switch.
	Nodes []string
	// Switches are an upper switch's children, Switches= (children:)
	// expanded, in file order; nil for a leaf.
	Switches []string
	// Line is the 1-based line of the switch in its file.
	Line int
}

// Tree is a topology/tree topology: its switches in file order.
type Tree struct {
	Switches []Switch
}

// treePasses is how many passes over the switches slurmctld makes to
// give each upper switch its level, and it needs a pass for each upper
// switch written above a child it has not resolved yet: in
// switch_record_validate (src/plugins/topology/tree/switch_record.c) a
// pass after the 21st that leaves a switch unresolved is fatal ("Switch
// configuration is not a tree"). Files written leaves first resolve in
// one pass.
const treePasses = 21

// form is how a file names its parts in errors: at gives the place of a
// line ("topology.conf line 7"), the keys the parameters a switch or
// block is made of.
type form struct {
	at                              func(line int) string
	nodesKey, childrenKey, sizesKey string
}

// rawSwitch is a switch as its file gives it, hostlists unexpanded.
type rawSwitch struct {
	name, nodes, children string
	hasNodes, hasChildren bool
	line                  int
	comment               string
}

// checkTree checks a tree's switches and expands them. The rules, with
// where Slurm has them:
//
//   - names valid (ValidName; topology.conf(5)) and unique
//     (switch_record_validate: "fatal: Switch (%s) has already been
//     defined");
//   - exactly one of nodes and children (_parse_switches: "switch %s has
//     both child switches and nodes", "... neither ...");
//   - every child defined (switch_record_validate: "Switch configuration
//     %s has invalid child (%s)"), no cycle ("Switch configuration is not
//     a tree"), resolvable in treePasses passes;
//   - a node under one leaf and a switch under one parent: Slurm only
//     warns of a node under two leaves ("Multiple leaf switches contain
//     nodes") and keeps the last parent it reads, but neither is a tree,
//     and a file fleet writes never has them.
//
// It runs in time linear in the switches and their names.
func checkTree(raws []rawSwitch, f form, b *budget) (Tree, error) {
	index := make(map[string]int, len(raws))
	for i, s := range raws {
		if err := ValidName("switch", s.name); err != nil {
			return Tree{}, fmt.Errorf("%s: %w", f.at(s.line), err)
		}
		if j, dup := index[s.name]; dup {
			return Tree{}, fmt.Errorf("%s: switch %q defined twice (first on line %d)", f.at(s.line), s.name, raws[j].line)
		}
		if s.hasNodes == s.hasChildren {
			return Tree{}, fmt.Errorf("%s: switch %q: want exactly one of %s and %s", f.at(s.line), s.name, f.nodesKey, f.childrenKey)
		}
		index[s.name] = i
	}
	out := Tree{Switches: make([]Switch, len(raws))}
	leafOf := make(map[string]int) // node → its leaf's index
	parent := make([]int, len(raws))
	for i := range parent {
		parent[i] = -1
	}
	for i, s := range raws {
		sw := Switch{Name: s.name, Comment: s.comment, Line: s.line}
		if s.hasNodes {
			nodes, err := b.expand(s.nodes)
			if err != nil {
				return Tree{}, fmt.Errorf("%s: switch %q: %s: %w", f.at(s.line), s.name, f.nodesKey, err)
			}
			for _, n := range nodes {
				if j, ok := leafOf[n]; ok {
					if j == i {
						return Tree{}, fmt.Errorf("%s: switch %q: node %q listed twice", f.at(s.line), s.name, n)
					}
					return Tree{}, fmt.Errorf("%s: switch %q: node %q is also under switch %q (line %d)", f.at(s.line), s.name, n, raws[j].name, raws[j].line)
				}
				leafOf[n] = i
			}
			sw.Nodes = nodes
		} else {
			kids, err := b.expand(s.children)
			if err != nil {
				return Tree{}, fmt.Errorf("%s: switch %q: %s: %w", f.at(s.line), s.name, f.childrenKey, err)
			}
			for _, c := range kids {
				j, ok := index[c]
				if !ok {
					return Tree{}, fmt.Errorf("%s: switch %q: child %q is not defined", f.at(s.line), s.name, c)
				}
				switch p := parent[j]; {
				case p == i:
					return Tree{}, fmt.Errorf("%s: switch %q: child %q listed twice", f.at(s.line), s.name, c)
				case p >= 0:
					return Tree{}, fmt.Errorf("%s: switch %q: child %q is also under switch %q (line %d)", f.at(s.line), s.name, c, raws[p].name, raws[p].line)
				}
				parent[j] = i
			}
			sw.Switches = kids
		}
		out.Switches[i] = sw
	}
	if err := checkAcyclic(raws, parent, f); err != nil {
		return Tree{}, err
	}
	if err := checkPasses(raws, out.Switches, parent, index, f); err != nil {
		return Tree{}, err
	}
	return out, nil
}

// checkAcyclic finds a cycle of parents. Each switch has at most one
// parent, so it walks up from each switch not seen yet, colouring the
// path, and stops at a switch already done: every switch is walked
// once.
func checkAcyclic(raws []rawSwitch, parent []int, f form) error {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]uint8, len(raws))
	var path []int
	for i := range raws {
		path = path[:0]
		j := i
		for j >= 0 && state[j] == unseen {
			state[j] = onPath
			path = append(path, j)
			j = parent[j]
		}
		if j >= 0 && state[j] == onPath {
			return fmt.Errorf("%s: switch %q is in a cycle of switches, each under the next (not a tree)", f.at(raws[j].line), raws[j].name)
		}
		for _, k := range path {
			state[k] = done
		}
	}
	return nil
}

// checkPasses works out the pass of slurmctld's level resolution in
// which each upper switch resolves (see treePasses): the first pass
// where every child is resolved, a child written below the switch
// resolving one pass late. Children come before parents in the reverse
// of a breadth-first order from the roots, so it is linear too. parent
// must be acyclic.
func checkPasses(raws []rawSwitch, sws []Switch, parent []int, index map[string]int, f form) error {
	order := make([]int, 0, len(raws))
	for i := range raws {
		if parent[i] < 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, c := range sws[order[k]].Switches {
			order = append(order, index[c])
		}
	}
	pass := make([]int, len(raws))
	worst := -1
	for k := len(order) - 1; k >= 0; k-- {
		i := order[k]
		if raws[i].hasNodes {
			continue // a leaf is resolved before the first pass
		}
		p := 1
		for _, c := range sws[i].Switches {
			j := index[c]
			if raws[j].hasNodes {
				continue
			}
			q := pass[j]
			if j > i {
				q++
			}
			p = max(p, q)
		}
		pass[i] = p
		if worst < 0 || p > pass[worst] {
			worst = i
		}
	}
	if worst >= 0 && pass[worst] > treePasses {
		return fmt.Errorf("%s: switch %q: slurmctld would need %d passes over the switches to resolve it and stops after %d (\"Switch configuration is not a tree\"); write switches below the switches above them",
			f.at(raws[worst].line), raws[worst].name, pass[worst], treePasses)
	}
	return nil
}
