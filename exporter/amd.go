package exporter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/kfd"
	"github.com/gpuaffinity/gpuaffinity/pci"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The amdgpu collector: the AMD Instinct GPUs of the last discovery, which
// have no NVML, read from amdgpu's sysfs under their PCI function at
// scrape time (RAS error counts per block, PCIe replay count and link,
// whether amdgpu still has the GPU) and described from the discovery
// (KFD's view: ISA, render node, XGMI hive and links, partition modes).
//
// The series sit beside those of ROCm's device-metrics-exporter
// (github.com/ROCm/device-metrics-exporter) as the NVIDIA ones sit beside
// dcgm-exporter's: the same join labels as every GPU series here, and,
// where a family is vendor-neutral (gpu_info, gpu_pcie_link_*,
// gpu_pcie_replays_total), the same family, so one query covers both
// vendors. docs/metrics.md, "AMD Instinct GPUs", has the mapping to
// device-metrics-exporter's gpu_ecc_*, pcie_* and gpu_xgmi_* families and
// labels.
//
// amdgpu's xgmi_error is never read: amdgpu clears the counter as it
// answers (amdgpu_xgmi.c amdgpu_xgmi_show_error, set_fica after get_fica),
// so a scrape would take the count from rocm-smi --showxgmierr, amd-smi
// and health checks such as Azure's (kfd.ReadXGMIError says the same; it
// exists for an explicit check and is left unused here).

// amdCollector reads the AMD GPUs' sysfs under Options.Root.
type amdCollector struct {
	root   string
	labels *gpuLabelCache

	once  sync.Once
	fs    *rootfs.Root
	fsErr error
}

// hasAMDGPU reports whether the last discovery found an AMD GPU: the
// amdgpu collector runs (and sends its scrape_collector_* series) only
// there, so a node without one sends exactly what it did before the
// collector came.
func hasAMDGPU(st *State) bool {
	return st.Node != nil && slices.ContainsFunc(st.Node.GPUs, topology.GPU.IsAMD)
}

// nvidiaGPUs reports whether n has a GPU that is not AMD's: the NVML and
// NVLink series are for those.
func nvidiaGPUs(n *topology.Node) bool {
	return slices.ContainsFunc(n.GPUs, func(g topology.GPU) bool { return !g.IsAMD() })
}

// collect renders every AMD GPU of the last discovery. A GPU whose PCI
// function is gone (or not bound to amdgpu) is gpu_amd_up 0 and keeps its
// info series, without an error, as a lost NVIDIA GPU is gpu_up 0; a file
// that is there but does not read or parse is the collector's error, and
// the GPU's other series are still sent.
func (c *amdCollector) collect(ctx context.Context, st *State, s *sink) error {
	n := st.Node
	if n == nil {
		return errNoNode
	}
	c.once.Do(func() { c.fs, c.fsErr = rootfs.Open(c.root) })
	gpus := c.labels.get(n)
	links := newXGMIView(n)
	var errs []error
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if !g.IsAMD() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		id := gpus.discovered(g)
		amdInfoMetrics(id, g, s)
		links.metrics(id, g, s)
		if c.fsErr != nil {
			s.gpuGauge(descAMDUp, 0, id)
			continue
		}
		errs = append(errs, amdLiveMetrics(c.fs, id, g, s)...)
	}
	if c.fsErr != nil {
		errs = append(errs, c.fsErr)
	}
	return errors.Join(errs...)
}

// amdInfoMetrics renders what the discovery says of the GPU: gpu_info (the
// family the nvml collector sends for NVIDIA GPUs, with the same labels)
// and, where KFD lists the GPU, gpu_amd_info.
func amdInfoMetrics(id *gpuLabels, g *topology.GPU, s *sink) {
	var numa string
	if g.Locality.Node != nil {
		numa = itoa(*g.Locality.Node)
	}
	s.gpuGauge(descGPUInfo, 1, id, g.UUID, g.BusID, g.Model, numa)
	a := g.AMD
	if a == nil {
		return
	}
	var render string
	if a.RenderMinor != nil {
		render = itoa(*a.RenderMinor)
	}
	s.gpuGauge(descAMDInfo, 1, id, g.BusID, label(a.GFXTarget), render, label(a.HiveID),
		label(a.ComputePartition), label(a.MemoryPartition))
}

// amdLiveMetrics reads the GPU's PCI function now: whether amdgpu has it,
// its PCIe link, and its health counters (kfd.ReadHealth: RAS per block,
// pcie_replay_count). Errors name the file.
func amdLiveMetrics(r *rootfs.Root, id *gpuLabels, g *topology.GPU, s *sink) []error {
	addr, err := pci.ParseAddress(g.BusID)
	if err != nil {
		s.gpuGauge(descAMDUp, 0, id)
		return []error{fmt.Errorf("GPU %d: bus id %q: %w", g.Index, g.BusID, err)}
	}
	rel := path.Join(pci.BusDir, addr.String())
	dir, err := r.OpenDir(rel)
	if err != nil {
		s.gpuGauge(descAMDUp, 0, id)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the GPU left the bus: up 0 says it
		}
		return []error{fmt.Errorf("GPU %d: %w", g.Index, err)}
	}
	var errs []error
	bound := false
	if t, err := dir.Readlink("driver"); err == nil {
		bound = path.Base(t) == "amdgpu"
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("GPU %d: %w", g.Index, err))
	}
	gen, maxGen := pci.Gen(linkAttr(dir, "current_link_speed", &errs)), pci.Gen(linkAttr(dir, "max_link_speed", &errs))
	width, maxWidth := linkWidth(dir, "current_link_width", &errs), linkWidth(dir, "max_link_width", &errs)
	dir.Close()
	s.gpuGauge(descAMDUp, b2f(bound && g.Usable()), id)
	if !bound {
		// amdgpu let go of it (unbound, failed to initialise): its
		// attributes are the PCI core's, its counters are gone.
		return errs
	}
	for _, l := range []struct {
		d *prometheus.Desc
		v int
	}{{descPCIeGen, gen}, {descPCIeMaxGen, maxGen}, {descPCIeWidth, width}, {descPCIeMaxWidth, maxWidth}} {
		if l.v > 0 {
			s.gpuGauge(l.d, float64(l.v), id)
		}
	}
	h, herrs := kfd.ReadHealth(r, addr)
	for _, err := range herrs {
		if errors.Is(err, fs.ErrNotExist) {
			continue // went away between the two reads
		}
		errs = append(errs, fmt.Errorf("GPU %d: %w", g.Index, err))
	}
	if h == nil {
		return errs
	}
	counterPtr(s, descPCIeReplays, h.PCIeReplayCount, id)
	for _, c := range h.RAS {
		s.gpuCounter(descRASErrors, float64(c.UE), id, c.Block, "ue")
		s.gpuCounter(descRASErrors, float64(c.CE), id, c.Block, "ce")
		if c.DE != nil {
			s.gpuCounter(descRASErrors, float64(*c.DE), id, c.Block, "de")
		}
	}
	return errs
}

// linkAttr reads a link speed attribute of the function; "" where it is
// absent or "Unknown" (a VF or a function without a link of its own).
func linkAttr(dir *rootfs.Dir, name string, errs *[]error) string {
	v, err := dir.String(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			*errs = append(*errs, err)
		}
		return ""
	}
	if strings.HasPrefix(v, "Unknown") {
		return ""
	}
	return v
}

// linkWidth reads a link width attribute; 0 where absent or not a width.
func linkWidth(dir *rootfs.Dir, name string, errs *[]error) int {
	v := linkAttr(dir, name, errs)
	if v == "" {
		return 0
	}
	var w int
	if _, err := fmt.Sscanf(v, "%d", &w); err != nil || w < 0 || itoa(w) != v {
		*errs = append(*errs, fmt.Errorf("%s: %q is not a link width", dir.Path(name), v))
		return 0
	}
	return w
}

// xgmiView is the XGMI hive of a discovery: its AMD GPUs. Which pairs
// share a direct (one-hop) link, the only XGMI link RCCL makes an <xgmi>
// link of, is topology.XGMIDirect's to say.
type xgmiView struct {
	gpus []*topology.GPU // the AMD GPUs, in discovery order
}

func newXGMIView(n *topology.Node) *xgmiView {
	v := &xgmiView{}
	for i := range n.GPUs {
		if g := &n.GPUs[i]; g.IsAMD() {
			v.gpus = append(v.gpus, g)
		}
	}
	return v
}

// linked reports whether a lists a direct XGMI link to b and b one to a:
// what RCCL turns into an <xgmi> link (topology.GPUPath.XGMI).
func (v *xgmiView) linked(a, b *topology.GPU) bool {
	return topology.XGMIDirect(*a, *b, true)
}

// peers are the GPUs g's link series are about: on a full-mesh board
// (topology.AMDGPU.FullMeshXGMI) every other GPU of its hive, a direct link expected to
// each; elsewhere the GPUs either side lists a direct link to, so that a
// 0 is a link only one side has. And whether g expects a full mesh.
func (v *xgmiView) peers(g *topology.GPU) (out []*topology.GPU, mesh bool) {
	a := g.AMD
	if a == nil {
		return nil, false
	}
	mesh = a.HiveID != "" && a.FullMeshXGMI()
	for _, p := range v.gpus {
		if p == g {
			continue
		}
		sameHive := p.AMD != nil && a.HiveID != "" && p.AMD.HiveID == a.HiveID
		if (mesh && sameHive) || topology.XGMIDirect(*g, *p, false) {
			out = append(out, p)
		}
	}
	return out, mesh
}

// metrics renders g's XGMI series: one gpu_xgmi_link_up per peer, the
// direct links both sides list, and on a full-mesh board the links the
// hive should give it. A GPU outside a hive without links has none.
func (v *xgmiView) metrics(id *gpuLabels, g *topology.GPU, s *sink) {
	peers, mesh := v.peers(g)
	if len(peers) == 0 && (g.AMD == nil || g.AMD.HiveID == "") {
		return
	}
	up := 0
	for _, p := range peers {
		ok := v.linked(g, p)
		if ok {
			up++
		}
		s.gpuGauge(descXGMILinkUp, b2f(ok), id, itoa(p.Index), p.BusID)
	}
	s.gpuGauge(descXGMILinks, float64(up), id)
	if mesh {
		expected := 0
		for _, p := range peers {
			if p.AMD != nil && p.AMD.HiveID == g.AMD.HiveID {
				expected++
			}
		}
		s.gpuGauge(descXGMIExpected, float64(expected), id)
	}
}
