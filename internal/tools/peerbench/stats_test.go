package main

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5}, // (2+3)/2
		{[]float64{7, 7, 1, 100, 2}, 7},
		{[]float64{0.5, 2, 2, 0.5}, 1.25}, // (0.5+2)/2
	} {
		in := slices.Clone(tc.in)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("median(%v) reordered its input to %v", tc.in, in)
		}
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
}

func TestPairRatios(t *testing.T) {
	got, err := pairRatios([]float64{2, 3, 8}, []float64{4, 3, 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0.5, 1, 4}; !slices.Equal(got, want) {
		t.Errorf("pairRatios = %v, want %v", got, want)
	}
	if _, err := pairRatios([]float64{1, 2}, []float64{1}); err == nil {
		t.Error("pairRatios of 2 against 1 samples: no error")
	}
	if _, err := pairRatios([]float64{1}, []float64{0}); err == nil {
		t.Error("pairRatios with a zero peer sample: no error")
	}
}

// The ratio column is the median of the per-pair ratios, not the ratio
// of the medians: here 2, where 20/15 would be 1.33.
func TestSummarize(t *testing.T) {
	got, err := summarize([]float64{10, 20, 30}, []float64{20, 10, 15})
	if err != nil {
		t.Fatal(err)
	}
	// ratios 0.5, 2, 2
	if want := (pairedResult{Ours: 20, Peer: 15, Ratio: 2}); got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
}

func TestMsOf(t *testing.T) {
	got := msOf([]time.Duration{1500 * time.Microsecond, 2 * time.Second})
	if want := []float64{1.5, 2000}; !slices.Equal(got, want) {
		t.Errorf("msOf = %v, want %v", got, want)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{fmtMS(0.1234), "0.123 ms"},
		{fmtMS(4.567), "4.57 ms"},
		{fmtMS(45.67), "45.7 ms"},
		{fmtMS(456.7), "457 ms"},
		{fmtMS(math.NaN()), "—"},
		{fmtMiB(25.63), "25.6 MiB"},
		{fmtRatio(0.456), "0.46"},
		{fmtRatio(1.8749), "1.87"},
		{fmtRatio(math.Inf(1)), "—"},
		{goalCell("≤ 0.5", 0.4, 0.5), "≤ 0.5 (met)"},
		{goalCell("≤ 0.5", 0.5, 0.5), "≤ 0.5 (met)"},
		{goalCell("≤ 0.5", 0.51, 0.5), "≤ 0.5 (missed)"},
		{goalCell("≤ 15 ms", math.NaN(), 15), "≤ 15 ms"},
		{thousands(999), "999"},
		{thousands(1000), "1,000"},
		{thousands(10000), "10,000"},
		{thousands(1234567), "1,234,567"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestMarkdownTable(t *testing.T) {
	got := markdownTable([]string{"a", "bb"}, [][]string{{"xyz", "1"}, {"p|q", "—"}, {"short"}})
	// Widths: column 1 is "short" (5), column 2 "bb" (2); "—" is one
	// rune, the '|' is escaped.
	want := strings.Join([]string{
		"| a     | bb |",
		"|-------|----|",
		"| xyz   | 1  |",
		`| p\|q  | —  |`,
		"| short |    |",
	}, "\n") + "\n"
	if got != want {
		t.Errorf("markdownTable:\n%s\nwant:\n%s", got, want)
	}
}

func TestInterleave(t *testing.T) {
	var calls []string
	next := 0
	f := func(name string) func() (sample, error) {
		return func() (sample, error) {
			calls = append(calls, name)
			next++
			return sample{Wall: time.Duration(next)}, nil
		}
	}
	as, bs, err := interleave(context.Background(), 2, 3, f("a"), f("b"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(calls, ""), "ababababab"; got != want {
		t.Errorf("calls %s, want %s", got, want)
	}
	// Pairs 1 and 2 (samples 1-4) are the warm-ups.
	if got, want := walls(as), msOf([]time.Duration{5, 7, 9}); !slices.Equal(got, want) {
		t.Errorf("a samples %v, want %v", got, want)
	}
	if got, want := walls(bs), msOf([]time.Duration{6, 8, 10}); !slices.Equal(got, want) {
		t.Errorf("b samples %v, want %v", got, want)
	}

	calls, next = nil, 0
	as, bs, err = interleave(context.Background(), 1, 2, f("a"), nil)
	if err != nil || len(as) != 2 || bs != nil || strings.Join(calls, "") != "aaa" {
		t.Errorf("without a peer: %v, %v, %v, calls %v", as, bs, err, calls)
	}

	boom := errors.New("boom")
	_, _, err = interleave(context.Background(), 0, 1, f("a"), func() (sample, error) { return sample{}, boom })
	var pe errPeer
	if !errors.As(err, &pe) || !errors.Is(err, boom) {
		t.Errorf("peer failure: %v, want an errPeer wrapping boom", err)
	}
}
