package render

import (
	"fmt"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// pairs adds one edge per GPU→NIC pair, labelled with the pair's class.
func (b *builder) pairs() {
	nicIndex := newFacts(b.n).nicIndex
	for _, p := range b.n.Pairs {
		for _, name := range p.NICs {
			i, ok := nicIndex[name]
			if !ok || b.nodes[gpuKey(p.GPU)].key == "" {
				continue
			}
			e := gedge{from: gpuKey(p.GPU), to: nicKey(i), kind: edgePair, label: p.Class.String()}
			if !p.Decided {
				e.kind, e.label = edgeUndecided, e.label+" (undecided)"
			}
			b.edges[e] = true
		}
	}
}

// nvlinks draws the NVSwitch fabric as one node joined to each GPU with
// active links to an NVSwitch; without one, GPU pairs that share NVLinks
// are joined directly, as are AMD GPUs joined by XGMI.
func (b *builder) nvlinks() {
	for _, g := range b.n.GPUs {
		count := 0
		for _, l := range g.NVLinks {
			if l.Active && l.RemoteType == topology.RemoteNVSwitch {
				count++
			}
		}
		if count == 0 {
			continue
		}
		if b.loose == nil {
			b.loose = []gnode{{key: "nvswitch", kind: kindNVSwitch, lines: []string{"NVSwitch fabric"}}}
		}
		b.edges[gedge{from: gpuKey(g.Index), to: "nvswitch", kind: edgeNVLink, label: fmt.Sprintf("NV%d", count)}] = true
	}
	if b.loose != nil {
		return
	}
	for _, p := range b.n.GPUPaths {
		a, c := gpuKey(min(p.A, p.B)), gpuKey(max(p.A, p.B))
		if b.nodes[a].key == "" || b.nodes[c].key == "" {
			continue
		}
		switch {
		case p.NVLinks > 0:
			b.edges[gedge{from: a, to: c, kind: edgeNVLink, label: fmt.Sprintf("NV%d", p.NVLinks)}] = true
		case p.XGMI > 0:
			// AMD's XGMI mesh is drawn as the GPU-to-GPU links it is.
			b.edges[gedge{from: a, to: c, kind: edgeNVLink, label: "XGMI"}] = true
		}
	}
}
