// Package cpuset is the CPU-set value type shared by the sources and the
// model: a sorted set of CPU (or NUMA node) numbers that parses and prints
// the kernel's two notations, the list form of local_cpulist and
// Cpus_allowed_list ("0-3,8-11") and the mask form of local_cpus and
// nodeN/cpumap ("ffffffff,0000ffff": comma-separated 32-bit hex words, most
// significant first).
//
// A Set is a plain value: it does no I/O, and the zero Set is empty.
package cpuset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxCPU bounds the CPU numbers a list may name, so that a garbage range
// such as "0-4294967295" cannot make a parser allocate without limit.
// Linux's NR_CPUS is at most 8192 on the configurations that ship.
const MaxCPU = 1 << 16

// ErrParse is wrapped by every parse error.
var ErrParse = errors.New("invalid cpu set")

// Set is a sorted set of non-negative integers without duplicates.
type Set struct {
	cpus []int
}

// Of returns the set of the given CPUs.
func Of(cpus ...int) Set {
	c := slices.Clone(cpus)
	slices.Sort(c)
	return Set{cpus: slices.Compact(c)}
}

// Range returns the set lo..hi inclusive; empty if hi < lo.
func Range(lo, hi int) Set {
	if hi < lo {
		return Set{}
	}
	c := make([]int, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		c = append(c, i)
	}
	return Set{cpus: c}
}

// Parse reads the list form: "0-3,8,10-11". Surrounding white space and a
// trailing newline are ignored; an empty string is the empty set.
func Parse(s string) (Set, error) {
	s = trimList(s)
	if s == "" {
		return Set{}, nil
	}
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseCPU(lo)
		if err != nil {
			return Set{}, fmt.Errorf("%w: %q: %w", ErrParse, s, err)
		}
		b := a
		if isRange {
			if b, err = parseCPU(hi); err != nil {
				return Set{}, fmt.Errorf("%w: %q: %w", ErrParse, s, err)
			}
			if b < a {
				return Set{}, fmt.Errorf("%w: %q: range %d-%d runs backwards", ErrParse, s, a, b)
			}
		}
		if out == nil {
			out = make([]int, 0, b-a+1)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	// The kernel writes lists in ascending order: such a list is the set
	// as it is; anything else is sorted and deduplicated.
	for i := 1; i < len(out); i++ {
		if out[i] <= out[i-1] {
			return Of(out...), nil
		}
	}
	return Set{cpus: out}, nil
}

func parseCPU(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	if n < 0 || n >= MaxCPU {
		return 0, fmt.Errorf("cpu %d out of range [0,%d)", n, MaxCPU)
	}
	return n, nil
}

// ParseMask reads the mask form: "00000000,0000ffff". Words are 32 bits,
// most significant first; an empty string is the empty set.
func ParseMask(s string) (Set, error) {
	s = trimList(s)
	if s == "" {
		return Set{}, nil
	}
	words := strings.Split(s, ",")
	if len(words)*32 > MaxCPU {
		return Set{}, fmt.Errorf("%w: mask of %d words is too wide", ErrParse, len(words))
	}
	var out []int
	for i, w := range words {
		if len(w) == 0 || len(w) > 8 {
			return Set{}, fmt.Errorf("%w: mask word %q in %q", ErrParse, w, s)
		}
		v, err := strconv.ParseUint(w, 16, 32)
		if err != nil {
			return Set{}, fmt.Errorf("%w: mask %q: %w", ErrParse, s, err)
		}
		base := (len(words) - 1 - i) * 32
		for bit := range 32 {
			if v&(1<<bit) != 0 {
				out = append(out, base+bit)
			}
		}
	}
	return Of(out...), nil
}

// CPUs returns the members in ascending order (a copy).
func (s Set) CPUs() []int { return slices.Clone(s.cpus) }

// Len is the number of members.
func (s Set) Len() int { return len(s.cpus) }

// IsEmpty reports whether the set has no member.
func (s Set) IsEmpty() bool { return len(s.cpus) == 0 }

// Contains reports whether cpu is a member.
func (s Set) Contains(cpu int) bool {
	_, ok := slices.BinarySearch(s.cpus, cpu)
	return ok
}

// Equal reports whether both sets have the same members.
func (s Set) Equal(o Set) bool { return slices.Equal(s.cpus, o.cpus) }

// Union returns the members of either set.
func (s Set) Union(o Set) Set { return Of(append(slices.Clone(s.cpus), o.cpus...)...) }

// Intersect returns the members of both sets.
func (s Set) Intersect(o Set) Set {
	n := overlap(s.cpus, o.cpus)
	switch n {
	case 0:
		return Set{}
	case len(s.cpus): // sets are never modified: the result may share
		return s
	case len(o.cpus):
		return o
	}
	out := make([]int, 0, n)
	for i, j := 0, 0; i < len(s.cpus) && j < len(o.cpus); {
		switch a, b := s.cpus[i], o.cpus[j]; {
		case a < b:
			i++
		case a > b:
			j++
		default:
			out = append(out, a)
			i++
			j++
		}
	}
	return Set{cpus: out}
}

// Intersects reports whether the sets have a member in common.
func (s Set) Intersects(o Set) bool { return overlap(s.cpus, o.cpus) > 0 }

// Difference returns the members of s that are not in o.
func (s Set) Difference(o Set) Set {
	n := overlap(s.cpus, o.cpus)
	if n == 0 {
		return s
	}
	out := make([]int, 0, len(s.cpus)-n)
	for i, j := 0, 0; i < len(s.cpus); {
		switch {
		case j == len(o.cpus) || s.cpus[i] < o.cpus[j]:
			out = append(out, s.cpus[i])
			i++
		case s.cpus[i] > o.cpus[j]:
			j++
		default:
			i++
			j++
		}
	}
	if len(out) == 0 {
		return Set{}
	}
	return Set{cpus: out}
}

// overlap counts the members two ascending lists share.
func overlap(a, b []int) int {
	n := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			n++
			i++
			j++
		}
	}
	return n
}

// String prints the canonical list form ("0-3,8-11"); "" for the empty set.
func (s Set) String() string {
	var b strings.Builder
	for i := 0; i < len(s.cpus); {
		j := i
		for j+1 < len(s.cpus) && s.cpus[j+1] == s.cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s.cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s.cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Mask prints the mask form with as many 32-bit words as width CPUs need
// (at least one): the format of local_cpus and nodeN/cpumap.
func (s Set) Mask(width int) string {
	if n := len(s.cpus); n > 0 && s.cpus[n-1]+1 > width {
		width = s.cpus[n-1] + 1
	}
	nwords := max(1, (width+31)/32)
	words := make([]uint32, nwords)
	for _, c := range s.cpus {
		words[c/32] |= 1 << (c % 32)
	}
	parts := make([]string, nwords)
	for i := range words {
		if nwords == 1 && width < 32 {
			// The kernel prints only the hex digits that nr_cpu_ids needs.
			digits := max(1, (width+3)/4)
			parts[0] = fmt.Sprintf("%0*x", digits, words[0])
			break
		}
		parts[nwords-1-i] = fmt.Sprintf("%08x", words[i])
	}
	return strings.Join(parts, ",")
}

// MarshalText writes the list form, which JSON encodes as a string (text,
// not MarshalJSON: the encoder then writes it without a second pass over
// the output, and a node has hundreds of sets).
func (s Set) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads the list form.
func (s *Set) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// UnmarshalJSON reads the list form from a JSON string.
func (s *Set) UnmarshalJSON(b []byte) error {
	// The list form has no characters JSON escapes: a plain quoted
	// string is taken as it is, anything else through the decoder.
	var str string
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && !bytes.ContainsAny(b[1:len(b)-1], "\\\"") {
		str = string(b[1 : len(b)-1])
	} else if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	v, err := Parse(str)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// trimList drops the space around a list or mask and NUL bytes at its
// end: the kernel writes "0-127\n", but captures of sysfs (hwloc's test
// suite among them: a 128-core ARM node) hold "0-127\n\x00".
func trimList(s string) string {
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s), "\x00"))
}
