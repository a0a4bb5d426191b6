package exporter

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaffinity/gpuaffinity/placement"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

var errNoNode = errors.New("no discovery has succeeded yet")

// discoveryCollector renders series that change only with the discovery:
// the topology collector's GPU→NIC pairing (collectTopology) and the
// storage collector's storage layer (collectStorage). It fails (without
// output) before the first discovery.
//
// Its series are rendered once per State.Node and State.Placement (which
// the agent replaces, never modifies) and the same metrics are sent at
// every scrape until either changes. Its runs never overlap
// (collector.busy), so the cache needs no lock.
type discoveryCollector struct {
	labels    *gpuLabelCache
	render    func(st *State, gpus *gpuLabelSet, s *sink)
	node      *topology.Node       // the node ms and err were rendered from
	placement *placement.Placement // and the placement
	ms        []prometheus.Metric
	err       error
}

func (c *discoveryCollector) collect(_ context.Context, st *State, s *sink) error {
	if st.Node == nil {
		return errNoNode
	}
	if st.Node != c.node || st.Placement != c.placement {
		var fresh sink // NewConstMetric's, held as long as the node
		c.render(st, c.labels.get(st.Node), &fresh)
		c.node, c.placement, c.ms, c.err = st.Node, st.Placement, fresh.ms, errors.Join(fresh.errs...)
	}
	s.ms = append(s.ms, c.ms...)
	return c.err
}

// collectTopology renders the node's pairing, its GPUs labelled from
// gpus, its NVLink domains and IMEX state (nvlinkFabricMetrics) and what
// places it in the fleet (nodeMetrics).
func collectTopology(st *State, gpus *gpuLabelSet, s *sink) {
	n := st.Node
	pairs := map[int]*topology.Pair{}
	for i := range n.Pairs {
		pairs[n.Pairs[i].GPU] = &n.Pairs[i]
	}
	aligned := len(n.GPUs) > 0
	for i := range n.GPUs {
		g := &n.GPUs[i]
		gpu := gpus.discovered(g)
		p := pairs[g.Index]
		if p == nil || len(p.NICs) == 0 || p.Class == topology.ClassUnknown {
			s.gpuGauge(descTopologyBest, 0, gpu)
			aligned = false
			continue
		}
		for _, nic := range p.NICs {
			s.gpuGauge(descTopologyPair, 1, gpu, nic, p.Class.String())
		}
		s.gpuGauge(descTopologyBest, float64(p.Class), gpu)
		if p.Class > topology.ClassPXB {
			aligned = false
		}
	}
	s.gauge(descTopologyAlign, b2f(aligned))
	nvlinkFabricMetrics(n, s)
	nodeMetrics(n, st.Placement, gpus.host, s)
}
