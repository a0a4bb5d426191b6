package cpuset

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0-3,8-11", []int{0, 1, 2, 3, 8, 9, 10, 11}, true},
		{"0-15\n", rangeOf(0, 15), true},
		{"0-127\n\x00", rangeOf(0, 127), true}, // a capture's NUL-terminated cpulist (hwloc's 128-core ARM node)
		{"0-3\x00\x00", rangeOf(0, 3), true},
		{"0-3\x00,4", nil, false}, // a NUL inside is garbage
		{"", nil, true},
		{"5", []int{5}, true},
		{"3,1,1-2", []int{1, 2, 3}, true}, // unordered, overlapping: normalised
		{"3-1", nil, false},               // backwards range
		{"a", nil, false},
		{"1,,2", nil, false},
		{"-1", nil, false},
		{"0-4294967295", nil, false}, // would allocate without bound
	} {
		got, err := Parse(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("Parse(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && !slices.Equal(got.CPUs(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %v", tc.in, got.CPUs(), tc.want)
		}
	}
}

func TestParseMask(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"ffff", "0-15", true}, // the H200 capture's local_cpus
		{"00000000,0000ffff,ffffffff", "0-47", true},
		{"000000ff,ffff0000,00ffffff", "0-23,48-71", true}, // AWS p4d NUMA 0 in its NCCL file
		{"ffffff", "0-23", true},
		{"ffff\n\x00", "0-15", true},
		{"", "", true},
		{"xyz", "", false},
		{"1,,2", "", false},
		{"123456789", "", false}, // word wider than 32 bits
	} {
		got, err := ParseMask(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseMask(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && got.String() != tc.want {
			t.Errorf("ParseMask(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMask(t *testing.T) {
	for _, tc := range []struct {
		set   Set
		width int
		want  string
	}{
		{Range(0, 15), 16, "ffff"},
		{Range(0, 23), 24, "ffffff"},
		{Range(0, 47), 96, "00000000,0000ffff,ffffffff"},
		{Of(), 224, "00000000,00000000,00000000,00000000,00000000,00000000,00000000"},
		{Of(1), 4, "2"},
	} {
		if got := tc.set.Mask(tc.width); got != tc.want {
			t.Errorf("%v.Mask(%d) = %q, want %q", tc.set, tc.width, got, tc.want)
		}
	}
}

func TestSetOps(t *testing.T) {
	a, b := Range(0, 7), Of(4, 5, 6, 7, 8, 9)
	if got := a.Intersect(b).String(); got != "4-7" {
		t.Errorf("Intersect = %q", got)
	}
	if got := a.Union(b).String(); got != "0-9" {
		t.Errorf("Union = %q", got)
	}
	if got := a.Difference(b).String(); got != "0-3" {
		t.Errorf("Difference = %q", got)
	}
	if !a.Contains(3) || a.Contains(8) || (Set{}).Contains(0) {
		t.Error("Contains wrong")
	}
	var s Set
	if err := json.Unmarshal([]byte(`"0-2,5"`), &s); err != nil || s.String() != "0-2,5" {
		t.Errorf("UnmarshalJSON = %v, %v", s, err)
	}
	if b, _ := json.Marshal(Of(1, 2, 3, 7)); string(b) != `"1-3,7"` {
		t.Errorf("MarshalJSON = %s", b)
	}
}

func rangeOf(lo, hi int) []int { return Range(lo, hi).CPUs() }

// FuzzParse: whatever parses prints back to a list that parses to the same set.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-3,8-11", "", "5", "3-1", "0-65535", "1,2,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(set.String())
		if err != nil || !again.Equal(set) {
			t.Fatalf("Parse(%q) = %v; reparse of %q = %v, %v", s, set, set.String(), again, err)
		}
	})
}

// FuzzParseMask: a parsed mask prints back to the same set.
func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"ffff", "00000000,0000ffff", "", "zz", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseMask(s)
		if err != nil {
			return
		}
		again, err := ParseMask(set.Mask(0))
		if err != nil || !again.Equal(set) {
			t.Fatalf("ParseMask(%q) = %v; reparse of %q = %v, %v", s, set, set.Mask(0), again, err)
		}
	})
}

// UnmarshalJSON takes a plain string directly and an escaped one through
// the decoder; Parse keeps an ascending list and sorts any other.
func TestUnmarshalJSONForms(t *testing.T) {
	for in, want := range map[string]string{
		`"0-3,8"`:       "0-3,8",
		`"\u0030-3"`:    "0-3",
		`"3,1,2,2"`:     "1-3",
		`""`:            "",
		`"10-11,0-1,5"`: "0-1,5,10-11",
	} {
		var s Set
		if err := s.UnmarshalJSON([]byte(in)); err != nil || s.String() != want {
			t.Errorf("UnmarshalJSON(%s) = %q, %v; want %q", in, s.String(), err, want)
		}
	}
	var s Set
	if err := s.UnmarshalJSON([]byte(`7`)); err == nil {
		t.Errorf("UnmarshalJSON(7) succeeded")
	}
}

// TestSetOpsAgainstMembers holds Intersect, Intersects and Difference to
// their definitions over member lists, on random sets (disjoint, nested,
// equal, empty and overlapping ones all occur).
func TestSetOpsAgainstMembers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() Set {
		var cpus []int
		lo, hi := rng.IntN(64), rng.IntN(64)
		for c := range 64 {
			if c >= lo && c <= hi && rng.IntN(3) > 0 {
				cpus = append(cpus, c)
			}
		}
		return Of(cpus...)
	}
	for range 2000 {
		a, b := random(), random()
		if rng.IntN(8) == 0 {
			b = a
		}
		var inter, diff []int
		for _, c := range a.CPUs() {
			if b.Contains(c) {
				inter = append(inter, c)
			} else {
				diff = append(diff, c)
			}
		}
		if got := a.Intersect(b); !got.Equal(Of(inter...)) {
			t.Fatalf("%v.Intersect(%v) = %v, want %v", a, b, got, Of(inter...))
		}
		if got := a.Intersects(b); got != (len(inter) > 0) {
			t.Fatalf("%v.Intersects(%v) = %v", a, b, got)
		}
		if got := a.Difference(b); !got.Equal(Of(diff...)) {
			t.Fatalf("%v.Difference(%v) = %v, want %v", a, b, got, Of(diff...))
		}
	}
}
