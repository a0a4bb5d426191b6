package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Table writes n as a human table in the style of `nvidia-smi topo -m`:
// the GPU and NIC matrix, its legend, the NIC legend (RDMA device, netdevs,
// fabric, role), the GPU→NIC pairs, the storage section (NVMe drives, the
// mounts GPUDirect Storage serves, GDS's state, each GPU's nearest NVMe
// and storage NICs) and the node's warnings.
//
// GPU↔GPU cells print NV# where GPUs share NVLinks, else the PCIe class;
// GPU↔NIC cells print the path class, with "*" where the model inferred it
// from CPU lists. The model holds no NIC↔NIC paths, so those cells print
// "-". CPU Affinity is the GPU's local_cpulist (NVML's affinity where that
// is empty). Table does no I/O but writing to w.
func Table(w io.Writer, n topology.Node) error {
	ew := &errWriter{w: w}
	f := newFacts(n)
	if len(n.GPUs) == 0 && len(n.NICs) == 0 {
		ew.line("No GPUs or NICs found.")
	} else {
		m := writeMatrix(ew, f)
		writeLegend(ew, m)
		writeNICLegend(ew, f)
		writePairs(ew, f)
		writeNICSwitches(ew, f)
	}
	writeStorage(ew, f)
	writeFabric(ew, f)
	writeWarnings(ew, n.Warnings)
	if ew.err != nil {
		return fmt.Errorf("render table: %w", ew.err)
	}
	return nil
}

// marks records which of the optional legend entries the matrix used.
type marks struct {
	inferred bool // a class ended in "*"
	unknown  bool // a cell printed "-"
	xgmi     bool // a cell printed "XGMI"
	data     bool // a class ended in "^": a Data Direct NIC's data path
}

const self = " X " // nvidia-smi's diagonal

// newTabs returns the column writer every section of the table uses.
func newTabs(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

// row writes cells separated by tabs, dropping empty trailing cells so that
// no line ends in padding.
func row(tw io.Writer, cells ...string) {
	for len(cells) > 0 && strings.TrimSpace(cells[len(cells)-1]) == "" {
		cells = cells[:len(cells)-1]
	}
	if len(cells) > 0 {
		cells[len(cells)-1] = strings.TrimRight(cells[len(cells)-1], " ")
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

func writeMatrix(ew *errWriter, f *facts) marks {
	var m marks
	n := f.n
	tw := newTabs(ew)
	head := []string{""}
	for _, g := range n.GPUs {
		head = append(head, fmt.Sprintf("GPU%d", g.Index))
	}
	for i := range n.NICs {
		head = append(head, fmt.Sprintf("NIC%d", i))
	}
	head = append(head, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
	row(tw, head...)

	for _, g := range n.GPUs {
		cells := []string{fmt.Sprintf("GPU%d", g.Index)}
		for _, h := range n.GPUs {
			cells = append(cells, f.gpuCell(g.Index, h.Index, &m))
		}
		for _, nic := range n.NICs {
			cells = append(cells, f.nicCell(g.Index, nic.Name, &m))
		}
		cpus := gpuCPUs(g)
		// GPU NUMA ID is the NUMA node of the GPU's own memory (coherent
		// GPU memory, Grace Hopper), N/A elsewhere.
		gpuNUMA := "N/A"
		if g.GPUNUMAID != nil {
			gpuNUMA = strconv.Itoa(*g.GPUNUMAID)
		}
		cells = append(cells, orNA(cpus.String()), numaAffinity(g), gpuNUMA)
		row(tw, cells...)
	}
	for i, nic := range n.NICs {
		cells := []string{fmt.Sprintf("NIC%d", i)}
		for _, g := range n.GPUs {
			cells = append(cells, f.nicCell(g.Index, nic.Name, &m))
		}
		for j := range n.NICs {
			if i == j {
				cells = append(cells, self)
			} else {
				m.unknown = true // the model has no NIC↔NIC paths
				cells = append(cells, "-")
			}
		}
		row(tw, cells...)
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
	return m
}

// gpuCell is the cell between GPU indexes a and b.
func (f *facts) gpuCell(a, b int, m *marks) string {
	if a == b {
		return self
	}
	p, ok := f.gpuPath(a, b)
	switch {
	case ok && p.NVLinks > 0:
		return fmt.Sprintf("NV%d", p.NVLinks)
	case ok && p.XGMI > 0:
		// rocm-smi --showtopotype and amd-smi topology print XGMI for a
		// direct link; MI300X joins each pair by one.
		m.xgmi = true
		return "XGMI"
	case ok && p.Class != topology.ClassUnknown:
		return p.Class.String()
	}
	m.unknown = true
	return "-"
}

// nicCell is the cell between GPU index gpu and the NIC named nic.
func (f *facts) nicCell(gpu int, nic string, m *marks) string {
	p, ok := f.path(gpu, nic)
	if !ok || p.Class == topology.ClassUnknown {
		m.unknown = true
		return "-"
	}
	if p.Inferred {
		m.inferred = true
		return p.Class.String() + "*"
	}
	if p.PFClass != topology.ClassUnknown && p.PFClass != p.Class {
		m.data = true
		return p.Class.String() + "^"
	}
	return p.Class.String()
}

func writeLegend(ew *errWriter, m marks) {
	ew.line("")
	ew.line("Legend:")
	ew.line("")
	ew.line("  X    = Self")
	ew.line("  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)")
	ew.line("  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node")
	ew.line("  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)")
	ew.line("  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)")
	ew.line("  PIX  = Connection traversing at most a single PCIe bridge")
	ew.line("  NV#  = Connection traversing a bonded set of # NVLinks")
	if m.xgmi {
		ew.line("  XGMI = Connection traversing a direct XGMI (AMD Infinity Fabric) link")
	}
	if m.inferred {
		ew.line("  *    = Class inferred from CPU lists: the PCI tree could not place the devices")
	}
	if m.data {
		ew.line("  ^    = The NIC's data path, through its ConnectX-8 Data Direct function (where NCCL places it); nvidia-smi topo -m prints its own function's class (pf_class)")
	}
	if m.unknown {
		ew.line("  -    = Not known: the node holds no path between these devices")
	}
}
