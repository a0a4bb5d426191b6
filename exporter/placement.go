package exporter

import (
	"github.com/gpuaffinity/gpuaffinity/fleet/nodeview"
	"github.com/gpuaffinity/gpuaffinity/placement"
	"github.com/gpuaffinity/gpuaffinity/platform"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The fleet series: one gpuaffinity_node_placement_info and one
// gpuaffinity_node_layout_info per node, what `gpuaffinity fleet` builds
// the cluster's topology files and its consistency report from
// (docs/fleet.md). Both come from nodeview.Describe, so that the agent and
// the fleet reader agree on every fact.
//
// Cardinality: one series each per node. The placement labels change
// when the node moves (a GCP VM rescheduled onto another host, a tray
// moved to another rack), the digests when its layout or NIC firmware
// does.

// nodeMetrics renders the node's placement and layout digests. host is
// the Hostname the GPU series carry.
func nodeMetrics(n *topology.Node, pl *placement.Placement, host string, s *sink) {
	d := nodeview.Describe(n, pl, host)
	tier := func(i int) string {
		if i < len(d.Tiers) {
			return label(d.Tiers[i])
		}
		return ""
	}
	source := ""
	if pl != nil && len(pl.Tiers) > 0 {
		source = placementSource(pl)
	}
	s.gauge(descNodePlacement, 1, label(d.Name), label(d.Model), label(d.GPUModel), d.Cloud, tier(0), tier(1), tier(2),
		label(d.HostID), label(d.Clique), label(d.GPUMemoryFabric), label(d.ChassisSerial), d.Slot, d.Tray, source)
	s.gauge(descNodeLayout, 1, label(d.Name), label(d.Model), label(d.GPUModel), d.Layout, d.Firmware)
}

// placementSource names where pl's tiers came from: "site" (the agent's
// --placement.switches), "gcp-metadata", "oci-imds".
func placementSource(pl *placement.Placement) string {
	switch {
	case pl.Source == placement.SourceSite:
		return "site"
	case pl.Cloud == platform.GCP:
		return "gcp-metadata"
	case pl.Cloud == platform.OCI:
		return "oci-imds"
	}
	return pl.Cloud
}
