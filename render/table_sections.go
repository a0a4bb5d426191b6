package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// writeNICLegend writes nvidia-smi's NIC legend, "  NIC0: mlx5_0", with the
// netdevs in parentheses and columns for fabric, role, rate and bus id.
func writeNICLegend(ew *errWriter, f *facts) {
	if len(f.n.NICs) == 0 {
		return
	}
	ew.line("")
	ew.line("NIC Legend:")
	ew.line("")
	tw := newTabs(ew)
	for i, nic := range f.n.NICs {
		name := fmt.Sprintf("  NIC%d: %s", i, printable(nic.Name))
		if len(nic.Netdevs) > 0 && !slices.Equal(nic.Netdevs, []string{nic.Name}) {
			name += " (" + printable(strings.Join(nic.Netdevs, ", ")) + ")"
		}
		role := dash(string(nic.Role))
		if nic.Virtual {
			role += " VF"
		}
		bus := printable(nic.BusID)
		if dd := nic.DataDirect; dd != nil {
			bus += fmt.Sprintf(", Data Direct %s (by %s)", printable(dd.BusID), printable(dd.MatchedBy))
		}
		row(tw, name, dash(string(nic.Fabric)), role, dash(rate(nic)), bus)
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
}

// writePairs writes one line per GPU: its NIC(s), the class they share, an
// "undecided" flag where the choice among tied NICs was by order only, and
// the model's note.
func writePairs(ew *errWriter, f *facts) {
	if len(f.n.GPUs) == 0 {
		return
	}
	ew.line("")
	ew.line("Pairs:")
	ew.line("")
	tw := newTabs(ew)
	for _, g := range f.n.GPUs {
		gpu := fmt.Sprintf("  GPU%d", g.Index)
		pairs := f.pairsOf(g.Index)
		if len(pairs) == 0 {
			row(tw, gpu, "none", "-", "", "not paired")
			continue
		}
		for _, p := range pairs {
			nics := "none"
			if len(p.NICs) > 0 {
				refs := make([]string, len(p.NICs))
				for i, name := range p.NICs {
					refs[i] = printable(f.nicRef(name))
				}
				nics = strings.Join(refs, ", ")
			}
			class := "-"
			if p.Class != topology.ClassUnknown {
				class = p.Class.String()
			}
			flag := ""
			if !p.Decided {
				flag = "undecided"
			}
			row(tw, gpu, nics, class, flag, printable(p.Note))
		}
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
}

// writeWarnings writes the node's warnings, one a line, if any.
func writeWarnings(ew *errWriter, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	ew.line("")
	ew.line("Warnings:")
	ew.line("")
	for _, w := range warnings {
		ew.line("  " + printable(w))
	}
}

// dash prints "-" for an empty string.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
