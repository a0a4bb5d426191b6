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
		switch {
		case nic.Bond != nil:
			// A RoCE LAG: the bond and its members, one NIC.
			var members []string
			for _, m := range nic.Bond.Members {
				members = append(members, m.Name)
			}
			name += " (" + printable(nic.Bond.Name) + " = " + printable(strings.Join(members, " + ")) + ")"
		case len(nic.Netdevs) > 0 && !slices.Equal(nic.Netdevs, []string{nic.Name}):
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

// writeNICSwitches names the PCIe switches that are a network adapter's
// own (a ConnectX-8's internal switch on HGX/DGX B300) and the NICs and
// GPUs behind each: a PXB there is a path through the NIC's switch, not
// through a discrete one. One line per outermost such switch; nothing
// when the node has none.
func writeNICSwitches(ew *errWriter, f *facts) {
	n := f.n
	byBus := make(map[string]*topology.PCIDevice, len(n.PCIDevices))
	for i := range n.PCIDevices {
		byBus[n.PCIDevices[i].BusID] = &n.PCIDevices[i]
	}
	// top is the outermost in-NIC switch port above bus, "" when none.
	top := func(bus string) string {
		out := ""
		d := byBus[bus]
		for seen := 0; d != nil && d.Parent != "" && seen <= len(n.PCIDevices); seen++ {
			p := byBus[d.Parent]
			if p == nil {
				break
			}
			if p.NICSwitch != "" {
				out = p.BusID
			}
			d = p
		}
		return out
	}
	below := map[string][]string{}
	var tops []string
	add := func(bus, ref string) {
		t := top(bus)
		if t == "" {
			return
		}
		if below[t] == nil {
			tops = append(tops, t)
		}
		below[t] = append(below[t], ref)
	}
	for i, nic := range n.NICs {
		add(nic.BusID, fmt.Sprintf("NIC%d %s", i, nic.Name))
		if dd := nic.DataDirect; dd != nil && top(dd.BusID) != top(nic.BusID) {
			add(dd.BusID, fmt.Sprintf("NIC%d %s's Data Direct %s", i, nic.Name, dd.BusID))
		}
	}
	for _, g := range n.GPUs {
		add(g.BusID, fmt.Sprintf("GPU%d", g.Index))
	}
	if len(tops) == 0 {
		return
	}
	slices.Sort(tops)
	ew.line("")
	ew.line("NIC switches (PCIe switches inside a network adapter):")
	ew.line("")
	tw := newTabs(ew)
	for _, t := range tops {
		d := byBus[t]
		id := strings.TrimPrefix(d.Vendor, "0x") + ":" + strings.TrimPrefix(d.Device, "0x")
		row(tw, "  "+printable(t), printable(d.NICSwitch)+" internal switch ("+printable(id)+")", printable(strings.Join(below[t], ", ")))
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
}
