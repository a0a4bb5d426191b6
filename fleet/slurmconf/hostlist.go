package slurmconf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNames bounds how many names one file may expand to in all (every
// hostlist of its Nodes=, Switches=, nodes: and children: together), so
// that a hostile or broken file like "Nodes=n[0-999999999]" is an error
// found before any name is made, not an exhausted memory. With names of
// at most MaxNameLen bytes it bounds a parse to a few hundred MiB. No
// cluster Slurm runs comes near: 4,000,000.
const MaxNames = 4_000_000

// MaxNameLen is the longest switch, block or node name, in bytes:
// topology.conf(5) says SwitchName "cannot be longer than 64
// characters"; slurmctld refuses a longer one ("SwitchName (%s) must be
// shorter than %d chars", HOST_NAME_MAX, in
// src/plugins/topology/tree/switch_record.c), and Slurm's hostlist code
// keeps host names to MAXHOSTNAMELEN, also 64 on Linux.
const MaxNameLen = 64

// maxDigits is the longest number a hostlist range may hold here: nine
// digits fit an int everywhere and are more than any cluster numbers.
const maxDigits = 9

// errOverLimit is expand's answer when the expression makes more names
// than its limit; callers say which limit.
var errOverLimit = errors.New("over the limit")

// ExpandHostlist expands a Slurm hostlist expression (the form
// topology.conf's Nodes= and Switches= and topology.yaml's nodes: and
// children: take) into its names, in the order written, duplicates kept:
// comma-separated items outside brackets, each "name", "prefix[ranges]"
// or "prefix[ranges]suffix", ranges comma-separated "n" or "lo-hi" of at
// most nine digits, each number padded with zeros to lo's width
// ("n[08-10]" is n08 n09 n10, "n[8-10]" n8 n9 n10). One bracket group per
// item. Every name must be a valid name (ValidName), and the expression
// may make at most MaxNames names; both are checked before any name is
// made. It does no I/O.
func ExpandHostlist(expr string) ([]string, error) {
	names, err := expand(expr, MaxNames)
	if errors.Is(err, errOverLimit) {
		return nil, fmt.Errorf("hostlist %q: more than MaxNames (%d) names", clip(expr), MaxNames)
	}
	return names, err
}

// ExpandHostlistLimit is ExpandHostlist with at most limit names (say,
// what is left of a budget for a whole file) instead of MaxNames: an
// expression that makes more is an error naming the limit, found before
// any name is made.
func ExpandHostlistLimit(expr string, limit int) ([]string, error) {
	names, err := expand(expr, limit)
	if errors.Is(err, errOverLimit) {
		return nil, fmt.Errorf("hostlist %q: more than the limit of %d names", clip(expr), limit)
	}
	return names, err
}

// ValidName checks a switch, block, topology or node name as
// topology.conf(5) and topology.yaml(5) take it: 1 to MaxNameLen bytes,
// valid UTF-8, and none of whitespace, control characters, '#' (a
// comment), '=' (a parameter), ',' '[' ']' (hostlist syntax). kind (say
// "switch") starts the error.
func ValidName(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%s: empty name", kind)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%s %q: %d characters, over %d", kind, clip(s), len(s), MaxNameLen)
	}
	if r, bad := badRune(s); bad {
		return fmt.Errorf("%s %q: %q is not allowed in a name (Slurm's parsers give it a meaning)", kind, s, r)
	}
	return nil
}

// badRune returns the first rune of s a name may not hold.
func badRune(s string) (rune, bool) {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return r, true
			}
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("#=,[]", r) {
			return r, true
		}
	}
	return 0, false
}

// hostRange is one item of a hostlist: a plain name, or prefix, the
// numbers lo to hi padded to width, and suffix.
type hostRange struct {
	prefix, suffix string
	lo, hi, width  int
	plain          bool
}

// expand parses expr into ranges, counts their names against limit
// (errOverLimit past it), and only then makes the names.
func expand(expr string, limit int) ([]string, error) {
	if expr == "" {
		return nil, errors.New("empty hostlist")
	}
	items, err := splitItems(expr)
	if err != nil {
		return nil, err
	}
	var ranges []hostRange
	total := 0
	for _, it := range items {
		rs, err := parseItem(expr, it)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if r.plain {
				total++
			} else {
				total += r.hi - r.lo + 1
			}
			if total > limit {
				return nil, errOverLimit
			}
		}
		ranges = append(ranges, rs...)
	}
	out := make([]string, 0, total)
	var buf []byte
	for _, r := range ranges {
		if r.plain {
			out = append(out, r.prefix)
			continue
		}
		for v := r.lo; v <= r.hi; v++ {
			num := strconv.Itoa(v)
			buf = append(buf[:0], r.prefix...)
			for i := len(num); i < r.width; i++ {
				buf = append(buf, '0')
			}
			buf = append(buf, num...)
			buf = append(buf, r.suffix...)
			out = append(out, string(buf))
		}
	}
	return out, nil
}

// splitItems splits expr at the commas outside brackets, checking the
// brackets pair and do not nest.
func splitItems(expr string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch expr[i] {
		case '[':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("hostlist %q: nested '['", clip(expr))
			}
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("hostlist %q: ']' without '['", clip(expr))
			}
		case ',':
			if depth == 0 {
				items = append(items, expr[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("hostlist %q: unclosed '['", clip(expr))
	}
	return append(items, expr[start:]), nil
}

// parseItem parses one item of expr: a plain name, or one bracket group
// of ranges, each checked to make valid names.
func parseItem(expr, it string) ([]hostRange, error) {
	if it == "" {
		return nil, fmt.Errorf("hostlist %q: empty item", clip(expr))
	}
	open := strings.IndexByte(it, '[')
	if open < 0 {
		// splitItems let no ']' outside a bracket group through.
		if err := ValidName("name", it); err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", clip(expr), err)
		}
		return []hostRange{{prefix: it, plain: true}}, nil
	}
	end := strings.IndexByte(it, ']')
	prefix, body, suffix := it[:open], it[open+1:end], it[end+1:]
	if strings.ContainsAny(suffix, "[]") {
		return nil, fmt.Errorf("hostlist %q: more than one bracket group in %q (one is taken)", clip(expr), clip(it))
	}
	if r, bad := badRune(prefix + suffix); bad {
		return nil, fmt.Errorf("hostlist %q: %q is not allowed in a name (Slurm's parsers give it a meaning)", clip(expr), r)
	}
	var out []hostRange
	for _, rg := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(rg, "-")
		if !isRange {
			hi = lo
		}
		if !digits(lo) || !digits(hi) {
			return nil, fmt.Errorf("hostlist %q: range %q is not one or two numbers of 1 to %d digits", clip(expr), clip(rg), maxDigits)
		}
		a, _ := strconv.Atoi(lo)
		b, _ := strconv.Atoi(hi)
		if a > b {
			return nil, fmt.Errorf("hostlist %q: range %q runs backwards", clip(expr), rg)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		if n := len(prefix) + len(suffix) + max(width, len(strconv.Itoa(b))); n > MaxNameLen {
			return nil, fmt.Errorf("hostlist %q: %q makes names of up to %d characters, over %d", clip(expr), clip(it), n, MaxNameLen)
		}
		out = append(out, hostRange{prefix: prefix, suffix: suffix, lo: a, hi: b, width: width})
	}
	return out, nil
}

// digits reports whether s is 1 to maxDigits ASCII digits.
func digits(s string) bool {
	if s == "" || len(s) > maxDigits {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// clip shortens s for an error message: a hostile file's line may be
// megabytes long.
func clip(s string) string {
	const most = 80
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}
