package exporter

import (
	"strconv"

	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The NVLink fabric series: per GPU what NVML says of its fabric
// registration at this scrape (GetGpuFabricInfo_v4, nvml.GPU.Fabric) and
// where the last discovery placed it in its rack (GetPlatformInfo,
// topology.GPU.Platform); per node the NVLink domains and IMEX of the
// last discovery (topology.Node.NVLinkFabric).
//
// dcgm-exporter exports the same NVML answers as raw numbers
// (DCGM_FI_DEV_FABRIC_MANAGER_STATUS, _CLUSTER_UUID, _CLIQUE_ID,
// _HEALTH_MASK, _HEALTH_SUMMARY; dcgm_fields.h fields 170-175), the health
// mask as one packed integer that a query cannot take apart. Here the
// cluster UUID and clique are labels of one info series, as GPU Feature
// Discovery's nvidia.com/gpu.clique label is "<clusterUuid>.<cliqueId>",
// and the mask is one series per field (topology.GPUFabric.Health).
//
// Cardinality: the cluster UUID is one per NVLink domain (an NVL72 rack
// and partition), the clique one per partition, the platform labels one
// set per GPU slot; they change when the fabric is re-partitioned or a
// GPU is replaced, never from scrape to scrape. A health field's value
// label changes when the field does (a state change, as the IOMMU mode of
// storage_iommu_info): at most one series per GPU and field at a time.

// fabricMetrics renders the GPU's fabric answer of this scrape: its
// domain (where NVML gives a non-zero cluster UUID), each health mask
// field NVML supports, and the health summary where supported. The
// registration state and status are healthMetrics' (gpu_fabric_state,
// gpu_fabric_status). A GPU outside a fabric (no answer) has none.
func fabricMetrics(gpu *gpuLabels, f *nvml.Fabric, s *sink) {
	if f == nil {
		return
	}
	tf := (*topology.GPUFabric)(f)
	if f.ClusterUUID != "" {
		s.gpuGauge(descFabricInfo, 1, gpu, label(f.ClusterUUID), strconv.FormatUint(uint64(f.CliqueID), 10))
	}
	for _, field := range tf.Health() {
		if field.Value == "not_supported" {
			continue // absent, not 0: NVML does not say
		}
		s.gpuGauge(descFabricHealthBad, b2f(field.Bad), gpu, field.Name, field.Value)
	}
	if f.HealthSummary != nil && *f.HealthSummary != topology.FabricSummaryNotSupported {
		s.gpuGauge(descFabricHealthSummary, float64(*f.HealthSummary), gpu)
	}
}

// platformMetrics renders the GPU's rack position: the discovery's (NVML
// is not asked for it at scrape time), else what NVML gave now (a GPU the
// discovery does not know). Like gpu_info it is sent whatever NVML answers
// now.
func platformMetrics(gpu *gpuLabels, ng *topology.GPU, g *nvml.GPU, s *sink) {
	var p *topology.GPUPlatform
	switch {
	case ng != nil:
		p = ng.Platform
	case g != nil:
		p = (*topology.GPUPlatform)(g.Platform)
	}
	if p == nil {
		return
	}
	s.gpuGauge(descGPUPlatform, 1, gpu, label(p.ChassisSerial), itoa(p.Slot), itoa(p.Tray), itoa(p.Host), itoa(p.Module))
}

// nvlinkFabricMetrics renders the node's NVLink domains and IMEX state of
// the discovery n (collectTopology): the GPUs in each domain and clique,
// the number of domains, whether the node is part of a multi-node NVLink
// domain, and what it has of IMEX. A node without NVIDIA GPUs (none, or
// AMD's only) has none of them.
func nvlinkFabricMetrics(n *topology.Node, s *sink) {
	if !nvidiaGPUs(n) {
		return
	}
	f := &n.NVLinkFabric
	for _, d := range f.Domains {
		s.gauge(descNVLinkDomainGPUs, float64(len(d.GPUs)), label(d.ClusterUUID), strconv.FormatUint(uint64(d.CliqueID), 10))
	}
	s.gauge(descNVLinkDomains, float64(len(f.Domains)))
	s.gauge(descNVLinkMultiNode, b2f(f.MultiNode))
	im := &f.IMEX
	s.gauge(descIMEXChannelsUsable, float64(len(im.UsableChannels())))
	s.gauge(descIMEXDriverRegistered, b2f(im.DeviceMajor != nil))
	s.gauge(descIMEXConfigPresent, b2f(im.Config != nil))
	if im.Config != nil && im.Config.Nodes != nil {
		s.gauge(descIMEXConfigNodes, float64(*im.Config.Nodes))
	}
}
