package sortfn

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

type rec struct {
	key, seq int
	name     string
}

// byKey orders by key only, so that equal keys show whether a sort is
// stable.
func byKey(a, b rec) int { return cmp.Compare(a.key, b.key) }

func TestSortMatchesSlices(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 12, 13, 50, 1000} {
		in := make([]rec, n)
		for i := range in {
			in[i] = rec{key: r.IntN(n/3 + 1), seq: i, name: string(rune('a' + r.IntN(26)))}
		}
		full := func(a, b rec) int { return cmp.Or(byKey(a, b), cmp.Compare(a.seq, b.seq)) }

		got, want := slices.Clone(in), slices.Clone(in)
		Sort(got, full)
		slices.SortFunc(want, full)
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: Sort differs from slices.SortFunc", n)
		}

		got, want = slices.Clone(in), slices.Clone(in)
		SortStable(got, byKey)
		slices.SortStableFunc(want, byKey)
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: SortStable differs from slices.SortStableFunc (equal keys out of their order)", n)
		}

		got = slices.Clone(in)
		Sort(got, byKey)
		if !slices.IsSortedFunc(got, byKey) {
			t.Errorf("n=%d: Sort by key left the slice unsorted", n)
		}
	}
}
