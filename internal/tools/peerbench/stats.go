package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// median returns the median of xs (the mean of the two middle values
// when len(xs) is even); NaN for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// pairRatios returns a[i]/b[i] for every pair: the ratio of each
// gpuaffinity sample to the peer sample taken right after it.
func pairRatios(a, b []float64) ([]float64, error) {
	if len(a) != len(b) {
		return nil, fmt.Errorf("pairRatios: %d samples against %d", len(a), len(b))
	}
	r := make([]float64, len(a))
	for i := range a {
		if b[i] <= 0 {
			return nil, errors.New("pairRatios: a peer sample is not positive")
		}
		r[i] = a[i] / b[i]
	}
	return r, nil
}

// pairedResult is what one paired figure reports: both medians and the
// median of the per-pair ratios.
type pairedResult struct {
	Ours, Peer, Ratio float64
}

// summarize reduces paired samples (a[i] taken right before b[i]) to
// their medians and the median of a[i]/b[i].
func summarize(a, b []float64) (pairedResult, error) {
	r, err := pairRatios(a, b)
	if err != nil {
		return pairedResult{}, err
	}
	return pairedResult{Ours: median(a), Peer: median(b), Ratio: median(r)}, nil
}

// msOf converts durations to float milliseconds.
func msOf(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// fmtMS formats milliseconds with three significant digits (at least
// one decimal below 100 ms).
func fmtMS(ms float64) string {
	switch {
	case math.IsNaN(ms):
		return "—"
	case ms < 1:
		return fmt.Sprintf("%.3f ms", ms)
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.0f ms", ms)
	}
}

// fmtMiB formats a size in MiB.
func fmtMiB(mib float64) string {
	if math.IsNaN(mib) {
		return "—"
	}
	return fmt.Sprintf("%.1f MiB", mib)
}

// fmtRatio formats a ratio with two decimals.
func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "—"
	}
	return fmt.Sprintf("%.2f", r)
}

// goalCell is the goal column: the goal, and whether value met it
// (value <= limit); the goal alone when value is unknown.
func goalCell(goal string, value, limit float64) string {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return goal
	}
	if value <= limit {
		return goal + " (met)"
	}
	return goal + " (missed)"
}

// markdownTable renders header and rows as a GitHub-flavoured markdown
// table, columns padded to a common width (in runes) so that it reads
// as text too. A '|' in a cell is escaped.
func markdownTable(header []string, rows [][]string) string {
	width := make([]int, len(header))
	cell := func(r []string, i int) string {
		if i < len(r) {
			return strings.ReplaceAll(r[i], "|", `\|`)
		}
		return ""
	}
	measure := func(r []string) {
		for i := range width {
			width[i] = max(width[i], len([]rune(cell(r, i))))
		}
	}
	measure(header)
	for _, r := range rows {
		measure(r)
	}
	var b strings.Builder
	line := func(r []string) {
		b.WriteString("|")
		for i := range width {
			c := cell(r, i)
			b.WriteString(" ")
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", width[i]-len([]rune(c))))
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	line(header)
	b.WriteString("|")
	for i := range width {
		b.WriteString(strings.Repeat("-", width[i]+2))
		b.WriteString("|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		line(r)
	}
	return b.String()
}
