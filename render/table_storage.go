package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// hasStorage reports whether the Node says anything of its storage layer:
// discovery always does (topology.Link decides the IOMMU mode); a Node
// built without it (an old JSON file, a hand-made one) prints no section.
func hasStorage(st topology.Storage) bool {
	return len(st.NVMe) > 0 || len(st.Mounts) > 0 || len(st.Pairs) > 0 ||
		st.GDS.NvidiaFS || st.GDS.IOMMU.Mode != ""
}

// writeStorage writes the storage section: the NVMe drives (bus id,
// model, link, NUMA node, use), the mounts GDS serves (kind, file system,
// the NVMe under a local one or the NICs carrying a network one), one GDS
// line (nvidia-fs, P2PDMA or what it misses, the IOMMU mode), and each
// GPU's nearest NVMe and storage NICs with their classes.
func writeStorage(ew *errWriter, f *facts) {
	st := f.n.Storage
	if !hasStorage(st) {
		return
	}
	ew.line("")
	ew.line("Storage:")
	ew.line("")
	if len(st.NVMe) == 0 {
		ew.line("  NVMe: none")
	} else {
		tw := newTabs(ew)
		row(tw, "  NVMe", "Bus ID", "Model", "Link", "NUMA", "Use")
		for _, d := range st.NVMe {
			bus := d.BusID
			if bus == "" {
				bus = dash(d.Transport)
			}
			numa := "-"
			if d.NUMANode != nil && *d.NUMANode >= 0 {
				numa = strconv.Itoa(*d.NUMANode)
			}
			row(tw, "  "+printable(d.Name), printable(bus), printable(dash(d.Model)), printable(linkText(d.Link)), numa, printable(dash(string(d.Use))))
		}
		flush(ew, tw)
	}
	ew.line("")
	if len(st.Mounts) == 0 {
		ew.line("  GDS mounts: none")
	} else {
		tw := newTabs(ew)
		row(tw, "  Mount", "Kind", "FS", "Served by")
		for _, m := range st.Mounts {
			row(tw, "  "+printable(m.Target), printable(string(m.Kind)), printable(m.FSType), printable(f.servedBy(m)))
		}
		flush(ew, tw)
	}
	ew.line("")
	ew.line("  " + printable(gdsLine(st.GDS)))
	if len(st.Pairs) == 0 {
		return
	}
	ew.line("")
	tw := newTabs(ew)
	row(tw, "  GPU", "NVMe", "Class", "Storage NICs", "Class", "Note")
	for _, p := range st.Pairs {
		nvme, nics := "none", "none"
		if len(p.NVMe) > 0 {
			nvme = strings.Join(p.NVMe, ", ")
		}
		if len(p.NICs) > 0 {
			refs := make([]string, len(p.NICs))
			for i, name := range p.NICs {
				refs[i] = f.nicRef(name)
			}
			nics = strings.Join(refs, ", ")
		}
		row(tw, fmt.Sprintf("  GPU%d", p.GPU), printable(nvme), classText(p.NVMeClass), printable(nics), classText(p.NICClass), printable(p.Note))
	}
	flush(ew, tw)
}

// servedBy is what a mount's data moves through: the NVMe controllers of
// a local mount, the NICs of a network one (with the rule that chose
// them).
func (f *facts) servedBy(m topology.Mount) string {
	if !m.Kind.Network() {
		if len(m.Devices) == 0 {
			return "-"
		}
		return strings.Join(m.Devices, ", ")
	}
	if len(m.NICs) == 0 {
		return "no NIC reaches it"
	}
	refs := make([]string, len(m.NICs))
	for i, name := range m.NICs {
		refs[i] = f.nicRef(name)
	}
	s := strings.Join(refs, ", ")
	if m.NICsReason != "" {
		s += " (" + m.NICsReason + ")"
	}
	return s
}

// gdsLine is the one line on what GDS finds: "GDS: nvidia-fs 2.28
// loaded; P2PDMA supported; IOMMU passthrough (iommu=pt)".
func gdsLine(g topology.GDS) string {
	parts := []string{"nvidia-fs not loaded"}
	if g.NvidiaFS {
		parts[0] = "nvidia-fs loaded"
		if g.NvidiaFSVersion != "" {
			parts[0] = "nvidia-fs " + g.NvidiaFSVersion + " loaded"
		}
	}
	if g.P2PDMA.Supported {
		parts = append(parts, "P2PDMA supported")
	} else if len(g.P2PDMA.Missing) > 0 {
		parts = append(parts, "P2PDMA not supported: "+strings.Join(g.P2PDMA.Missing, ", "))
	} else {
		parts = append(parts, "P2PDMA not supported")
	}
	iommu := "IOMMU " + dash(string(g.IOMMU.Mode))
	if len(g.IOMMU.Cmdline) > 0 {
		iommu += " (" + strings.Join(g.IOMMU.Cmdline, " ") + ")"
	}
	parts = append(parts, iommu)
	return "GDS: " + strings.Join(parts, "; ")
}

// linkText is a PCIe link as "16.0 GT/s x4" (the current speed and
// width), "-" when not reported.
func linkText(l topology.PCILink) string {
	speed := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(l.Speed), "PCIe"))
	switch {
	case speed != "" && l.Width > 0:
		return fmt.Sprintf("%s x%d", speed, l.Width)
	case speed != "":
		return speed
	case l.Width > 0:
		return fmt.Sprintf("x%d", l.Width)
	}
	return "-"
}

// classText prints a class, "-" when unknown.
func classText(c topology.Class) string {
	if c == topology.ClassUnknown {
		return "-"
	}
	return c.String()
}

// flush ends a tabwriter block, remembering its error.
func flush(ew *errWriter, tw interface{ Flush() error }) {
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
}
