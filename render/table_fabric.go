package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// hasFabric reports whether some GPU has NVLink fabric or platform info,
// or the node has IMEX channels or a driver major for them.
func hasFabric(n topology.Node) bool {
	for _, g := range n.GPUs {
		if g.Fabric != nil || g.Platform != nil {
			return true
		}
	}
	im := n.NVLinkFabric.IMEX
	return im.DeviceMajor != nil || len(im.Channels) > 0 || im.Config != nil
}

// writeFabric writes the NVLink fabric section: each GPU's registration
// (state, status, clique, the health mask's bad fields, its rack
// position), the node's NVLink domains, and IMEX.
func writeFabric(ew *errWriter, f *facts) {
	n := f.n
	if !hasFabric(n) {
		return
	}
	ew.line("")
	ew.line("NVLink fabric:")
	ew.line("")
	tw := newTabs(ew)
	row(tw, "  GPU", "State", "Status", "Clique", "Health", "Position")
	for _, g := range n.GPUs {
		state, status, clique, health := "-", "-", "-", "-"
		if fi := g.Fabric; fi != nil {
			state = fabricState(fi.State)
			if fi.Status != nil {
				status = "success"
				if *fi.Status != 0 {
					status = "error " + strconv.Itoa(*fi.Status)
				}
			}
			if c := fi.Clique(); c != "" {
				clique = c
			} else if fi.State == topology.FabricCompleted && fi.Status != nil && *fi.Status == 0 {
				clique = "single node"
			}
			health = fabricHealth(fi)
		}
		pos := "-"
		if p := g.Platform; p != nil {
			pos = fmt.Sprintf("chassis %s slot %d tray %d host %d module %d", dash(p.ChassisSerial), p.Slot, p.Tray, p.Host, p.Module)
		}
		row(tw, "  "+strconv.Itoa(g.Index), state, printable(status), printable(clique), printable(health), printable(pos))
	}
	flush(ew, tw)
	ew.line("")
	fab := n.NVLinkFabric
	var doms []string
	for _, d := range fab.Domains {
		id := "single node"
		if d.ClusterUUID != "" {
			id = fmt.Sprintf("%s.%d", d.ClusterUUID, d.CliqueID)
		}
		gs := make([]string, len(d.GPUs))
		for i, g := range d.GPUs {
			gs[i] = strconv.Itoa(g)
		}
		doms = append(doms, fmt.Sprintf("GPUs %s in %s", strings.Join(gs, ","), id))
	}
	kind := "single node"
	if fab.MultiNode {
		kind = "multi-node"
	}
	if len(doms) == 0 {
		ew.line("  Domains: none")
	} else {
		ew.line(printable(fmt.Sprintf("  Domains (%s): %s", kind, strings.Join(doms, "; "))))
	}
	ew.line(printable("  " + imexLine(fab.IMEX)))
}

func fabricState(s int) string {
	switch s {
	case topology.FabricNotStarted:
		return "not started"
	case topology.FabricInProgress:
		return "in progress"
	case topology.FabricCompleted:
		return "completed"
	}
	return "state " + strconv.Itoa(s)
}

// fabricHealth is the health mask's bad fields, or the summary.
func fabricHealth(fi *topology.GPUFabric) string {
	var bad []string
	for _, h := range fi.Health() {
		if h.Bad {
			bad = append(bad, h.Name+"="+h.Value)
		}
	}
	if len(bad) > 0 {
		return strings.Join(bad, ", ")
	}
	if fi.HealthSummary == nil {
		return "-"
	}
	return [...]string{"not supported", "healthy", "unhealthy", "limited capacity"}[min(max(*fi.HealthSummary, 0), 3)]
}

// imexLine is the IMEX view in one line.
func imexLine(im topology.IMEX) string {
	var b strings.Builder
	b.WriteString("IMEX: ")
	if im.DeviceMajor == nil {
		b.WriteString("no nvidia-caps-imex-channels device")
	} else {
		fmt.Fprintf(&b, "major %d", *im.DeviceMajor)
	}
	if len(im.Channels) == 0 {
		b.WriteString("; no channel nodes")
	}
	for _, c := range im.Channels {
		fmt.Fprintf(&b, "; channel%d", c.Number)
		if c.Problem != "" {
			b.WriteString(" unusable: " + c.Problem)
		}
	}
	if c := im.Config; c != nil {
		b.WriteString("; config " + c.Path)
		if c.Nodes != nil {
			fmt.Fprintf(&b, " (%d nodes)", *c.Nodes)
		}
	} else {
		b.WriteString("; no IMEX config")
	}
	return b.String()
}
