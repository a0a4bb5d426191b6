package main

import (
	"maps"
	"testing"
)

// -only names figures 1 to 5 (docs/bench.md's numbering); "" runs all.
func TestParseOnly(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[int]bool
		err  bool
	}{
		{in: "", want: nil},
		{in: "5", want: map[int]bool{5: true}},
		{in: "1, 3", want: map[int]bool{1: true, 3: true}},
		{in: "0", err: true},
		{in: "6", err: true},
		{in: "4,x", err: true},
		{in: "5,", err: true},
	} {
		got, err := parseOnly(c.in)
		if (err != nil) != c.err || !maps.Equal(got, c.want) {
			t.Errorf("parseOnly(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
	if o := (options{}); !o.want(1) || !o.want(5) {
		t.Error("no -only: want every figure")
	}
	if o := (options{only: map[int]bool{5: true}}); o.want(4) || !o.want(5) {
		t.Error("-only 5: want figure 5 and not 4")
	}
}
