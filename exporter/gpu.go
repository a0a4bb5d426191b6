package exporter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// collectNVML reads NVML (nvml.Read with nvml.ForScrape: Init, every GPU
// without the calls only discovery needs, Shutdown) and renders the
// NVIDIA GPUs of the last discovery joined with what NVML answered now
// (AMD GPUs are the amdgpu collector's). A GPU of the
// discovery that NVML does not answer for (lost, a failed handle, missing,
// or NVML unavailable) is up 0 and keeps its info and NVLink series; a
// link listed at discovery stays as 0 when it is down or unreadable. NVML
// unavailable is the collector's error, but on a node whose discovery
// found GPUs and only AMD ones.
//
// nvml.Read cannot be interrupted: ctx is not consulted; the runner drops
// the output of a read that ends past the deadline.
//
// It renders the GPU series where the nvml collector is enabled and the
// NVLink series where the nvlink collector is (e.nvml).
func (e *Exporter) collectNVML(_ context.Context, st *State, s *sink) error {
	var lib gonvml.Interface
	if e.opts.NVML != nil {
		lib = e.opts.NVML()
	}
	res := nvml.Read(lib, nvml.ForScrape())
	// A node whose GPUs are all AMD's has no NVML to miss: where it does
	// not initialise there, the collector sends nothing and does not fail
	// (nvml_up 0 would say an NVIDIA node lost its driver).
	amdOnly := st.Node != nil && len(st.Node.GPUs) > 0 && !nvidiaGPUs(st.Node)
	if amdOnly && !res.Available {
		return nil
	}
	if e.nvml.gpus {
		s.gauge(descNVMLUp, b2f(res.Available))
	}

	byBus := map[string]*nvml.GPU{}
	byIndex := map[int]*nvml.GPU{}
	for i := range res.GPUs {
		g := &res.GPUs[i]
		byIndex[g.Index] = g
		if g.BusID != "" {
			byBus[g.BusID] = g
		}
	}
	used := map[*nvml.GPU]bool{}
	labelled := map[int]bool{} // gpu label values sent
	gpus := e.gpus.get(st.Node)
	if st.Node != nil {
		for i := range st.Node.GPUs {
			ng := &st.Node.GPUs[i]
			if ng.IsAMD() {
				// NVML knows nothing of it: the amdgpu collector renders
				// it. Its index is taken all the same.
				labelled[ng.Index] = true
				continue
			}
			g := byBus[ng.BusID]
			if g == nil && ng.NVMLIndex != nil {
				// A GPU whose handle failed or that was lost before
				// GetPciInfo has no bus id: join it by NVML index.
				if x := byIndex[*ng.NVMLIndex]; x != nil && x.BusID == "" {
					g = x
				}
			}
			if used[g] {
				g = nil
			}
			if g != nil {
				used[g] = true
			}
			labelled[ng.Index] = true
			gpuMetrics(st, gpus.discovered(ng), ng, g, e.nvml, s)
		}
	}
	// GPUs NVML answers for that the discovery does not know (no
	// discovery yet, or a GPU that appeared since).
	var errs []error
	for i := range res.GPUs {
		g := &res.GPUs[i]
		switch {
		case used[g]:
		case labelled[g.Index]:
			// Its index is a discovered GPU's that NVML no longer
			// answers for under that bus id: the GPUs were renumbered.
			errs = append(errs, fmt.Errorf("NVML GPU %d (%s) is not the discovered GPU %d: rediscovery needed", g.Index, g.BusID, g.Index))
		default:
			labelled[g.Index] = true
			gpuMetrics(st, gpus.nvmlOnly(g), nil, g, e.nvml, s)
		}
	}
	return errors.Join(append([]error{res.Err}, errs...)...)
}

// nvmlParts says which of the NVML collector's series to render.
type nvmlParts struct {
	gpus  bool // the nvml collector's: gpuaffinity_gpu_*, nvml_up
	links bool // the nvlink collector's: gpuaffinity_nvlink_*
}

// gpuMetrics renders one GPU: id is its labels (its gpu label is its
// discovery index, else NVML's), ng its discovery entry (nil when none),
// g what NVML answered at this scrape (nil when nothing).
func gpuMetrics(st *State, id *gpuLabels, ng *topology.GPU, g *nvml.GPU, parts nvmlParts, s *sink) {
	if parts.gpus {
		gpuHealthMetrics(id, ng, g, s)
	}
	if parts.links {
		nvlinkMetrics(st, id, ng, g, s)
	}
}

// gpuHealthMetrics renders a GPU's info, up, platform, health and fabric
// series.
func gpuHealthMetrics(gpu *gpuLabels, ng *topology.GPU, g *nvml.GPU, s *sink) {
	var uuid, bus, model, numa string
	if ng != nil {
		uuid, bus, model = ng.UUID, ng.BusID, ng.Model
		if ng.Locality.Node != nil {
			numa = itoa(*ng.Locality.Node)
		}
	}
	if g != nil {
		uuid, bus, model = cmp.Or(uuid, g.UUID), cmp.Or(bus, g.BusID), cmp.Or(model, g.Name)
	}
	s.gpuGauge(descGPUInfo, 1, gpu, uuid, bus, model, numa)
	s.gpuGauge(descGPUUp, b2f(g != nil && g.State == nvml.StateOK), gpu)
	platformMetrics(gpu, ng, g, s)

	if g != nil {
		if g.PCIeGen > 0 {
			s.gpuGauge(descPCIeGen, float64(g.PCIeGen), gpu)
		}
		if g.PCIeMaxGen > 0 {
			s.gpuGauge(descPCIeMaxGen, float64(g.PCIeMaxGen), gpu)
		}
		if g.PCIeWidth > 0 {
			s.gpuGauge(descPCIeWidth, float64(g.PCIeWidth), gpu)
		}
		if g.PCIeMaxWidth > 0 {
			s.gpuGauge(descPCIeMaxWidth, float64(g.PCIeMaxWidth), gpu)
		}
		healthMetrics(gpu, &g.Health, s)
		fabricMetrics(gpu, g.Fabric, s)
	}
}

// nvlinkMetrics renders a GPU's NVLink series: the links of the discovery
// and of this scrape.
func nvlinkMetrics(st *State, gpu *gpuLabels, ng *topology.GPU, g *nvml.GPU, s *sink) {
	visible := (ng != nil && ng.NVLinkVisible) || (g != nil && g.NVLinkVisible)
	s.gpuGauge(descNVLinkVisible, b2f(visible), gpu)
	expected, ok := st.ExpectedNVLinks[gpu.index]
	switch {
	case ok:
	case ng != nil:
		expected = len(ng.NVLinks)
	case g != nil:
		expected = len(g.NVLinks)
	}
	s.gpuGauge(descNVLinkExpected, float64(expected), gpu)

	now := map[int]*nvml.NVLink{}
	var links []int
	if g != nil {
		for i := range g.NVLinks {
			l := &g.NVLinks[i]
			now[l.Link] = l
			links = append(links, l.Link)
		}
	}
	if ng != nil {
		for _, l := range ng.NVLinks {
			if now[l.Link] == nil {
				links = append(links, l.Link)
			}
		}
	}
	// In the order of their label values, as the families sort them
	// ("10" before "2"), which spares familyBuilder the sort.
	sortfn.Sort(links, func(a, b int) int { return strings.Compare(itoa(a), itoa(b)) })
	links = slices.Compact(links)
	// Each error counter is the sum over every link listed, and only
	// when every one answered: a link that did not (gone from NVML now,
	// or its count unreadable) would lower the sum, which Prometheus
	// takes for a counter reset and rate() for a burst of errors. So the
	// total is absent that scrape instead; nvlink_up names the link.
	var sums [4]uint64
	read := [4]bool{true, true, true, true}
	for _, n := range links {
		l := now[n]
		s.gpuGauge(descNVLinkUp, b2f(l != nil && l.Active), gpu, itoa(n))
		if l == nil {
			read = [4]bool{}
			continue
		}
		for i, v := range [4]*uint64{l.CRCFlitErrors, l.CRCDataErrors, l.ReplayErrors, l.RecoveryErrors} {
			if v == nil {
				read[i] = false
			} else {
				sums[i] += *v
			}
		}
	}
	if len(links) == 0 {
		return
	}
	for i, d := range [4]*prometheus.Desc{descNVLinkCRCFlit, descNVLinkCRCData, descNVLinkReplay, descNVLinkRecovery} {
		if read[i] {
			s.gpuCounter(d, float64(sums[i]), gpu)
		}
	}
}

// healthMetrics renders NVML's health answers; a nil answer (NOT_SUPPORTED
// or failed) is no series.
func healthMetrics(gpu *gpuLabels, h *nvml.Health, s *sink) {
	counterPtr(s, descPCIeReplays, h.PCIeReplay, gpu)
	counterPtr(s, descECCVolatile, h.ECCUncorrectedVolatile, gpu)
	counterPtr(s, descECCAggregate, h.ECCUncorrectedAggregate, gpu)
	gaugeInt(s, descRemapCorrectable, h.RemappedRowsCorrectable, gpu)
	gaugeInt(s, descRemapUncorrectable, h.RemappedRowsUncorrectable, gpu)
	gaugeBool(s, descRemapPending, h.RemapPending, gpu)
	gaugeBool(s, descRemapFailure, h.RemapFailure, gpu)
	gaugeInt(s, descRetiredPages, h.RetiredPages, gpu)
	gaugeBool(s, descRetiredPending, h.RetiredPagesPending, gpu)
	gaugeInt(s, descFabricState, h.FabricState, gpu)
	gaugeInt(s, descFabricStatus, h.FabricStatus, gpu)
	gaugeInt(s, descRecoveryAction, h.RecoveryAction, gpu)
}

func counterPtr(s *sink, d *prometheus.Desc, v *uint64, gpu *gpuLabels, extra ...string) {
	if v != nil {
		s.gpuCounter(d, float64(*v), gpu, extra...)
	}
}

func gaugeInt(s *sink, d *prometheus.Desc, v *int, gpu *gpuLabels) {
	if v != nil {
		s.gpuGauge(d, float64(*v), gpu)
	}
}

func gaugeBool(s *sink, d *prometheus.Desc, v *bool, gpu *gpuLabels) {
	if v != nil {
		s.gpuGauge(d, b2f(*v), gpu)
	}
}
