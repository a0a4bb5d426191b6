package exporter

import (
	"cmp"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/pci"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// collectStorage renders n's storage layer (topology.Storage): one info
// series per NVMe controller and its PCIe link, each GPU's nearest NVMe
// controllers and storage NICs with their path class, what the node
// offers GPUDirect Storage, and the mounts it serves. Like the topology
// series they change only with the discovery (discoveryCollector renders
// them once per node), and their count follows the hardware: controllers,
// GPUs × nearest devices, mounts, and three series per node.
//
// NVMe info keeps node_exporter's node_nvme_info labels (device,
// firmware_revision, model, serial, state; collector/nvme_linux.go), so
// the two join on device. The serial is one value per drive for the
// drive's life, so it adds no series; it is what an RMA asks for.
func collectStorage(state *State, gpus *gpuLabelSet, s *sink) {
	n := state.Node
	st := &n.Storage
	for i := range st.NVMe {
		nvmeMetrics(&st.NVMe[i], s)
	}

	byGPU := map[int]*topology.StoragePair{}
	for i := range st.Pairs {
		byGPU[st.Pairs[i].GPU] = &st.Pairs[i]
	}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		p := byGPU[g.Index]
		if p == nil {
			continue
		}
		gpu := gpus.discovered(g)
		if p.NVMeClass != topology.ClassUnknown {
			for _, d := range p.NVMe {
				s.gpuGauge(descStorageNVMePair, 1, gpu, d, p.NVMeClass.String())
			}
		}
		if p.NICClass != topology.ClassUnknown {
			for _, nic := range p.NICs {
				s.gpuGauge(descStorageNICPair, 1, gpu, nic, p.NICClass.String())
			}
		}
	}

	gds := &st.GDS
	s.gauge(descGDSNvidiaFS, b2f(gds.NvidiaFS))
	s.gauge(descGDSP2PDMA, b2f(gds.P2PDMA.Supported))
	s.gauge(descIOMMUInfo, 1, string(cmp.Or(gds.IOMMU.Mode, topology.IOMMUUnknown)))

	// A target mounted twice (one mount over another) shows the last one
	// mounted, as the mount table lists it last.
	last := map[string]int{}
	for i := range st.Mounts {
		last[st.Mounts[i].Target] = i
	}
	for i := range st.Mounts {
		m := &st.Mounts[i]
		if last[m.Target] != i {
			continue
		}
		target := label(m.Target)
		s.gauge(descMountInfo, 1, target, label(m.FSType), string(m.Kind))
		if m.Kind.Network() {
			s.gauge(descMountNICs, float64(len(m.NICs)), target)
		}
	}
}

// nvmeMetrics renders one NVMe controller: its info, and its PCIe link
// where the controller is a PCI function and sysfs reports the link.
func nvmeMetrics(d *topology.NVMe, s *sink) {
	numa := ""
	if d.NUMANode != nil && *d.NUMANode >= 0 {
		numa = itoa(*d.NUMANode)
	}
	s.gauge(descNVMeInfo, 1, d.Name, d.BusID, driveText(d.Model), driveText(d.Serial), driveText(d.Firmware),
		d.Transport, d.State, numa, string(d.Use))
	if d.BusID == "" {
		return // NVMe over fabrics: no PCIe link of its own
	}
	if g := pci.Gen(d.Link.Speed); g > 0 {
		s.gauge(descNVMeGen, float64(g), d.Name)
	}
	if g := pci.Gen(d.Link.MaxSpeed); g > 0 {
		s.gauge(descNVMeMaxGen, float64(g), d.Name)
	}
	if d.Link.Width > 0 {
		s.gauge(descNVMeWidth, float64(d.Link.Width), d.Name)
	}
	if d.Link.MaxWidth > 0 {
		s.gauge(descNVMeMaxWidth, float64(d.Link.MaxWidth), d.Name)
	}
}

// label makes text the mount table or a drive reports a valid label
// value: bytes that are not UTF-8 become U+FFFD, so that one odd path or
// drive costs no series (a label value that is not UTF-8 would be the
// collector's error, and the series would be dropped).
func label(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// driveText is label for the text a drive reports (model, serial,
// firmware), without the blanks the NVMe identify data pads it with.
func driveText(s string) string { return label(strings.TrimSpace(s)) }
