package topology

import "slices"

// ForLaunch is the node as launchers (env, cpumap) read it from the
// agent's launch.node: without the parts only topo, the NCCL topology
// XML, the health checks and the metrics read (every PCI function, the
// path matrices, each GPU's NVLinks, health and rack position, the
// storage layer, which cufile reads from the full node; env keeps each
// GPU's fabric and the node's NVLink fabric, to warn where multi-node
// NVLink is not ready), a quarter of
// topology.json, so that a rank's
// launcher decodes a few kilobytes. n is not changed. A launcher output
// that comes to need one of these parts must stop dropping it here:
// cmd's TestLaunchViewSameOutput compares only today's outputs.
func (n Node) ForLaunch() Node {
	n.PCIDevices, n.Paths, n.GPUPaths = nil, nil, nil
	n.Storage = Storage{}
	n.GPUs = slices.Clone(n.GPUs)
	for i := range n.GPUs {
		n.GPUs[i].NVLinks, n.GPUs[i].Health, n.GPUs[i].Platform = nil, GPUHealth{}, nil
		if a := n.GPUs[i].AMD; a != nil {
			// Launchers need an AMD GPU's ordinals and render node, not
			// its links and counters.
			c := *a
			c.XGMILinks, c.RAS, c.PCIeReplayCount = nil, nil, nil
			n.GPUs[i].AMD = &c
		}
	}
	return n
}
