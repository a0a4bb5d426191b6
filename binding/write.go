package binding

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// WriteTable prints the map for people: one row per rank, then the
// leftover CPUs (exclusive mode) and every warning.
func WriteTable(w io.Writer, m Map) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tGPU\tNODE\tMODE\tCPUS\tMEMS")
	for _, r := range m.Ranks {
		node := "-"
		if r.Node >= 0 {
			node = strconv.Itoa(r.Node)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", r.Rank, r.GPU, node, r.Mode, orDash(r.CPUs.String()), orDash(r.Mems.String()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	if m.Selection != "" {
		fmt.Fprintf(bw, "\nRanks drive the GPUs of %s, in that order.\n", m.Selection)
	}
	if m.Mode == ModeExclusive {
		fmt.Fprintf(bw, "\nLeftover CPUs: %s\n", orDash(m.Leftover.String()))
	}
	if len(m.Warnings) > 0 {
		fmt.Fprintln(bw, "\nWarnings:")
		for _, s := range m.Warnings {
			fmt.Fprintf(bw, "  %s\n", s)
		}
	}
	return bw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteJSON writes the map as JSON (schema gpuaffinity.cpumap/v1): one
// entry per rank with rank, gpu, node, cpus, mems, mode and warnings; CPU
// and node sets in the kernel's list form ("0-13,112-125"), "" when empty.
func WriteJSON(w io.Writer, m Map) error {
	if m.Schema == "" {
		m.Schema = Schema
	}
	if m.Warnings == nil {
		m.Warnings = []string{}
	}
	if m.Ranks == nil {
		m.Ranks = []Rank{}
	}
	for i := range m.Ranks {
		if m.Ranks[i].Warnings == nil {
			m.Ranks[i].Warnings = []string{}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}

// WriteNumactl prints one line of numactl options per rank:
// "--physcpubind=<cpus> --membind=<mems>", without --membind where the
// memory node is unknown.
func WriteNumactl(w io.Writer, m Map) error {
	bw := bufio.NewWriter(w)
	for _, r := range m.Ranks {
		fmt.Fprintf(bw, "--physcpubind=%s", r.CPUs)
		if !r.Mems.IsEmpty() {
			fmt.Fprintf(bw, " --membind=%s", r.Mems)
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// WriteTaskset prints one CPU list per rank, the argument of taskset -c
// ("0-13,112-125").
func WriteTaskset(w io.Writer, m Map) error {
	bw := bufio.NewWriter(w)
	for _, r := range m.Ranks {
		fmt.Fprintln(bw, r.CPUs)
	}
	return bw.Flush()
}
