package slurmconf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ParseTree parses and validates topology.conf for
// TopologyPlugin=topology/tree (topology.conf(5)): lines of key=value
// tokens separated by blanks, '#' a comment to the end of the line,
// parameter names case-insensitive, each setting line
// "SwitchName=<name>" first, then "Nodes=<hostlist>" or
// "Switches=<hostlist>" and optionally "LinkSpeed=<n>". The tree's rules
// are checkTree's: names valid and unique, exactly one of Nodes and
// Switches, every child defined and under one parent, no cycle, no node
// under two leaves. Errors name the line ("topology.conf line 7: switch
// "L" defined twice (first on line 3)"). It does no I/O and runs in time
// linear in the file and the names it expands to (at most MaxNames).
func ParseTree(data []byte) (Tree, error) {
	settings, err := parseConf(data, "SwitchName", "Nodes", "Switches", "LinkSpeed")
	if err != nil {
		return Tree{}, err
	}
	if len(settings) == 0 {
		return Tree{}, errors.New("topology.conf: no SwitchName lines")
	}
	raws := make([]rawSwitch, 0, len(settings))
	for _, s := range settings {
		if s.keys[0] != "SwitchName" {
			return Tree{}, fmt.Errorf("topology.conf line %d: the line starts with %s, not SwitchName", s.line, s.keys[0])
		}
		if ls, ok := s.values["LinkSpeed"]; ok && !digits(ls) {
			// _parse_switches reads it as S_P_UINT32.
			return Tree{}, fmt.Errorf("topology.conf line %d: switch %q: LinkSpeed %q is not a number", s.line, s.values["SwitchName"], clip(ls))
		}
		r := rawSwitch{name: s.values["SwitchName"], line: s.line, comment: s.comment}
		r.nodes, r.hasNodes = s.values["Nodes"]
		r.children, r.hasChildren = s.values["Switches"]
		raws = append(raws, r)
	}
	return checkTree(raws, confForm, &budget{left: MaxNames})
}

// ParseBlocks parses and validates topology.conf for
// TopologyPlugin=topology/block (topology.conf(5)): the syntax of
// ParseTree, setting lines "BlockName=<name> Nodes=<hostlist>" and,
// optionally, "BlockSizes=<n>[,<n>...]" alone on the last setting line.
// The rules are checkBlocks': names valid and unique, no node in two
// blocks, BlockSizes each at least 1 and each a power of two times the
// one before, and every block at least BlockSizes' first nodes. Errors
// name the line. It does no I/O and runs in time linear in the file and
// the names it expands to (at most MaxNames).
func ParseBlocks(data []byte) (Blocks, error) {
	settings, err := parseConf(data, "BlockName", "Nodes", "BlockSizes")
	if err != nil {
		return Blocks{}, err
	}
	var raws []rawBlock
	var sizes []int
	sizesLine := 0
	for i, s := range settings {
		if bs, ok := s.values["BlockSizes"]; ok {
			if len(s.keys) != 1 {
				return Blocks{}, fmt.Errorf("topology.conf line %d: BlockSizes shares its line with other parameters", s.line)
			}
			if i != len(settings)-1 {
				return Blocks{}, fmt.Errorf("topology.conf line %d: BlockSizes is not the last setting (line %d follows)", s.line, settings[i+1].line)
			}
			for _, f := range strings.Split(bs, ",") {
				if !digits(f) {
					return Blocks{}, fmt.Errorf("topology.conf line %d: BlockSizes %q: %q is not a number", s.line, clip(bs), clip(f))
				}
				v, _ := strconv.Atoi(f)
				sizes = append(sizes, v)
			}
			sizesLine = s.line
			continue
		}
		if s.keys[0] != "BlockName" {
			return Blocks{}, fmt.Errorf("topology.conf line %d: the line starts with %s, not BlockName or BlockSizes", s.line, s.keys[0])
		}
		r := rawBlock{name: s.values["BlockName"], line: s.line, comment: s.comment}
		r.nodes, r.hasNodes = s.values["Nodes"]
		raws = append(raws, r)
	}
	if len(raws) == 0 {
		return Blocks{}, errors.New("topology.conf: no BlockName lines")
	}
	return checkBlocks(raws, sizes, sizesLine, confForm, &budget{left: MaxNames})
}

// confForm names topology.conf's parts in errors.
var confForm = form{
	at:          func(line int) string { return fmt.Sprintf("topology.conf line %d", line) },
	nodesKey:    "Nodes",
	childrenKey: "Switches",
	sizesKey:    "BlockSizes",
}

// setting is one setting line of topology.conf.
type setting struct {
	line    int
	comment string
	// keys are the line's parameters in order, values their values, both
	// by the names parseConf was given (however the file spells them).
	keys   []string
	values map[string]string
}

// parseConf splits topology.conf into setting lines of key=value tokens,
// with the comment line directly above each; keys are the parameters
// allowed, any other is an error, and so is one twice on a line. Blank
// and comment lines are no settings.
func parseConf(data []byte, keys ...string) ([]setting, error) {
	canon := make(map[string]string, len(keys))
	for _, k := range keys {
		canon[strings.ToLower(k)] = k
	}
	var out []setting
	comment := ""
	for i, raw := range strings.Split(string(data), "\n") {
		line := i + 1
		text := strings.TrimSpace(raw)
		if text == "" {
			comment = ""
			continue
		}
		if c, ok := strings.CutPrefix(text, "#"); ok {
			comment = strings.TrimSpace(c)
			continue
		}
		text, _, _ = strings.Cut(text, "#")
		s := setting{line: line, comment: comment, values: make(map[string]string)}
		comment = ""
		for _, tok := range strings.Fields(text) {
			k, v, ok := strings.Cut(tok, "=")
			if !ok || k == "" || v == "" {
				return nil, fmt.Errorf("topology.conf line %d: %q is not key=value", line, clip(tok))
			}
			name, ok := canon[strings.ToLower(k)]
			if !ok {
				return nil, fmt.Errorf("topology.conf line %d: unknown parameter %q (want one of %s)", line, clip(k), strings.Join(keys, ", "))
			}
			if _, dup := s.values[name]; dup {
				return nil, fmt.Errorf("topology.conf line %d: %s twice", line, name)
			}
			s.keys = append(s.keys, name)
			s.values[name] = v
		}
		out = append(out, s)
	}
	return out, nil
}

// budget is what is left of MaxNames for one file.
type budget struct {
	left int
}

// expand expands expr within the budget and takes its names from it.
func (b *budget) expand(expr string) ([]string, error) {
	names, err := expand(expr, b.left)
	if errors.Is(err, errOverLimit) {
		return nil, fmt.Errorf("hostlist %q: the file's hostlists make more than MaxNames (%d) names", clip(expr), MaxNames)
	}
	if err != nil {
		return nil, err
	}
	b.left -= len(names)
	return names, nil
}
