// Package sortfn sorts slices by a comparison function, as
// slices.SortFunc and slices.SortStableFunc do, but with one copy of the
// sorting code for every element type.
//
// slices.SortFunc is generic: the compiler instantiates its pattern-
// defeating quicksort (about 12 KB of machine code with its helpers) once
// per GC shape, which for a slice of structs means once per struct type.
// The agent sorted some thirty struct types, about 400 KB of code and
// its tables, which the kernel maps whole into the daemon's resident
// memory 64 KiB at a time (docs/bench.md, "Agent memory"). The packages
// the agent links sort with this package; here each element type costs
// one small closure, and the algorithm is sort.Slice's, shared.
//
// The order is the same as slices.SortFunc's for a strict weak order:
// Sort is not stable, SortStable keeps equal elements in their order.
package sortfn

import "sort"

// Sort sorts s in the order cmp gives (negative: a before b), not
// stable, as slices.SortFunc.
func Sort[S ~[]E, E any](s S, cmp func(a, b E) int) {
	sort.Slice(s, func(i, j int) bool { return cmp(s[i], s[j]) < 0 })
}

// SortStable is Sort keeping equal elements in their order, as
// slices.SortStableFunc.
func SortStable[S ~[]E, E any](s S, cmp func(a, b E) int) {
	sort.SliceStable(s, func(i, j int) bool { return cmp(s[i], s[j]) < 0 })
}
