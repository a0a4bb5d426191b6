package fleet

import (
	"sort"
	"strconv"
	"strings"
)

// Hostlist returns names as one Slurm hostlist expression, the form
// topology.conf's Nodes= and Switches= take (topology.conf(5): "Slurm's
// hostlist expression parser is used"): names that differ only in a
// trailing number of one width are folded into prefix[ranges], e.g.
// gb200-a1, gb200-a2, gb200-a4 → "gb200-a[1-2,4]", and the groups are
// joined by commas. Numbers keep their digits as written: n01 and n02
// fold into n[01-02], n9 and n10 (two widths) stay apart, which any
// hostlist parser reads back as written. Duplicates are dropped; the
// result is sorted and so deterministic. Names must be valid Slurm names
// (SlurmName); Hostlist does not check.
func Hostlist(names []string) string {
	type group struct {
		prefix string
		width  int
		nums   []int
	}
	groups := make(map[string]*group)
	var plain []string
	seen := make(map[string]bool)
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		digits := n[i:]
		v, err := strconv.Atoi(digits)
		if digits == "" || len(digits) > 9 || err != nil {
			plain = append(plain, n)
			continue
		}
		key := n[:i] + "\x00" + strconv.Itoa(len(digits))
		g := groups[key]
		if g == nil {
			g = &group{prefix: n[:i], width: len(digits)}
			groups[key] = g
		}
		g.nums = append(g.nums, v)
	}
	type part struct {
		sortKey string
		text    string
	}
	var parts []part
	for _, n := range plain {
		parts = append(parts, part{n, n})
	}
	for _, g := range groups {
		sort.Ints(g.nums)
		num := func(v int) string {
			s := strconv.Itoa(v)
			return strings.Repeat("0", g.width-len(s)) + s
		}
		first := g.prefix + num(g.nums[0])
		if len(g.nums) == 1 {
			parts = append(parts, part{first, first})
			continue
		}
		var ranges []string
		for i := 0; i < len(g.nums); {
			j := i
			for j+1 < len(g.nums) && g.nums[j+1] == g.nums[j]+1 {
				j++
			}
			if j == i {
				ranges = append(ranges, num(g.nums[i]))
			} else {
				ranges = append(ranges, num(g.nums[i])+"-"+num(g.nums[j]))
			}
			i = j + 1
		}
		parts = append(parts, part{first, g.prefix + "[" + strings.Join(ranges, ",") + "]"})
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].sortKey < parts[j].sortKey })
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p.text
	}
	return strings.Join(out, ",")
}

// slurmNameMax is the longest switch name Slurm takes (topology.conf(5),
// SwitchName: "cannot be longer than 64 characters").
const slurmNameMax = 64

// SlurmName reports whether s can stand as a node, switch or block name
// in Slurm's configuration files as written: 1 to 64 of [A-Za-z0-9._-],
// not starting with '-' or '.'. That leaves out everything Slurm's
// parsers give a meaning (whitespace, '=', '#', ',', the hostlist
// brackets) and everything a shell or a YAML reader would.
func SlurmName(s string) bool {
	if s == "" || len(s) > slurmNameMax || s[0] == '-' || s[0] == '.' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
