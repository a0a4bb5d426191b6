package exporter

import (
	"context"
	"errors"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

var errNoNode = errors.New("no discovery has succeeded yet")

// collectTopology renders the last good discovery's GPU→NIC pairing. It
// fails (without output) before the first discovery.
func collectTopology(_ context.Context, st *State, s *sink) error {
	n := st.Node
	if n == nil {
		return errNoNode
	}
	pairs := map[int]*topology.Pair{}
	for i := range n.Pairs {
		pairs[n.Pairs[i].GPU] = &n.Pairs[i]
	}
	aligned := len(n.GPUs) > 0
	for _, g := range n.GPUs {
		gpu := itoa(g.Index)
		p := pairs[g.Index]
		if p == nil || len(p.NICs) == 0 || p.Class == topology.ClassUnknown {
			s.gauge(descTopologyBest, 0, gpu)
			aligned = false
			continue
		}
		for _, nic := range p.NICs {
			s.gauge(descTopologyPair, 1, gpu, nic, p.Class.String())
		}
		s.gauge(descTopologyBest, float64(p.Class), gpu)
		if p.Class > topology.ClassPXB {
			aligned = false
		}
	}
	s.gauge(descTopologyAlign, b2f(aligned))
	return nil
}
