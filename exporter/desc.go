package exporter

import "github.com/prometheus/client_golang/prometheus"

// Every metric the exporter's own collector can send, described once.
// docs/metrics.md is the contract; desc_test.go checks that the two agree.

const ns = "gpuaffinity"

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	fq := ns + "_" + name
	d := prometheus.NewDesc(fq, help, labels, nil)
	descFamilies[d] = familyMeta{name: &fq, help: &help}
	return d
}

// newGPUDesc is newDesc for a series of one GPU: its labels are the join
// labels (gpuLabelNames: gpu, UUID, pci_bus_id, model_name, Hostname), then
// extra. Its series are sent with sink.gpuGauge and sink.gpuCounter.
func newGPUDesc(name, help string, extra ...string) *prometheus.Desc {
	labels := append(append([]string(nil), gpuLabelNames...), extra...)
	return newDesc(name, help, labels...)
}

// familyMeta is the name and help of a desc's family, for the families
// the exporter builds itself (familyBuilder): prometheus.Desc does not
// export them.
type familyMeta struct{ name, help *string }

// descFamilies maps every desc of newDesc to its family's name and help.
// It is filled while the package initialises and only read afterwards.
var descFamilies = map[*prometheus.Desc]familyMeta{}

var (
	// Collector bookkeeping.
	descCollectorDuration = newDesc("scrape_collector_duration_seconds", "Time the collector took in this scrape.", "collector")
	descCollectorSuccess  = newDesc("scrape_collector_success", "1 when the collector finished without error within its deadline.", "collector")

	// Agent state.
	descDiscoverySuccess    = newDesc("discovery_success", "1 when the last discovery succeeded; 0 while the agent serves the last good node.")
	descDiscoveryLast       = newDesc("discovery_last_timestamp_seconds", "Time of the last discovery attempt.")
	descDiscoveryLastOK     = newDesc("discovery_last_success_timestamp_seconds", "Time of the last successful discovery.")
	descDiscoveryDuration   = newDesc("discovery_duration_seconds", "How long the last discovery took.")
	descStateWriteSuccess   = newDesc("state_write_success", "1 when the files under --state-dir were last written without error.")
	descHealthHealthy       = newDesc("health_healthy", "1 when the last health gate passed (what /health answers).")
	descHealthCheckFailed   = newDesc("health_check_failed", "1 for each check that failed at the last health gate, 0 for the others.", "check")
	descHealthLastRun       = newDesc("health_last_run_timestamp_seconds", "Time of the last health gate.")
	descXIDErrors           = newGPUDesc("gpu_xid_errors_total", "XID critical errors seen by the agent's NVML event watch, by code.", "xid")
	descLastXIDTimestamp    = newGPUDesc("gpu_last_xid_timestamp_seconds", "Time of the last XID of the GPU.")
	descNVMLUp              = newDesc("nvml_up", "1 when NVML initialised at this scrape.")
	descGPUInfo             = newGPUDesc("gpu_info", "1 per GPU; numa_node is the GPU's resolved NUMA node (its locality), empty when no single node.", "uuid", "bus_id", "model", "numa_node")
	descGPUUp               = newGPUDesc("gpu_up", "1 while NVML answers for the GPU; 0 when NVML reports it lost, its handle fails or NVML is unavailable.")
	descPCIeGen             = newGPUDesc("gpu_pcie_link_generation", "Current PCIe generation of the GPU's link.")
	descPCIeMaxGen          = newGPUDesc("gpu_pcie_link_max_generation", "Maximum PCIe generation of the GPU's link.")
	descPCIeWidth           = newGPUDesc("gpu_pcie_link_width", "Current PCIe lanes of the GPU's link.")
	descPCIeMaxWidth        = newGPUDesc("gpu_pcie_link_max_width", "Maximum PCIe lanes of the GPU's link.")
	descPCIeReplays         = newGPUDesc("gpu_pcie_replays_total", "PCIe replay counter of the GPU.")
	descECCVolatile         = newGPUDesc("gpu_ecc_uncorrected_volatile_errors_total", "Uncorrected ECC errors since the driver loaded.")
	descECCAggregate        = newGPUDesc("gpu_ecc_uncorrected_aggregate_errors_total", "Uncorrected ECC errors over the GPU's life.")
	descRemapCorrectable    = newGPUDesc("gpu_remapped_rows_correctable", "Rows remapped for correctable errors.")
	descRemapUncorrectable  = newGPUDesc("gpu_remapped_rows_uncorrectable", "Rows remapped for uncorrectable errors.")
	descRemapPending        = newGPUDesc("gpu_remapped_rows_pending", "1 when a row remap waits for a GPU reset.")
	descRemapFailure        = newGPUDesc("gpu_remapped_rows_failure", "1 when a row remap failed.")
	descRetiredPages        = newGPUDesc("gpu_retired_pages", "Retired pages (both causes).")
	descRetiredPending      = newGPUDesc("gpu_retired_pages_pending", "1 when a page retirement waits for a reset.")
	descFabricState         = newGPUDesc("gpu_fabric_state", "GPU fabric registration state: 1 not started, 2 in progress, 3 completed.")
	descFabricStatus        = newGPUDesc("gpu_fabric_status", "nvml.Return of the fabric registration (0 success), once the state is completed.")
	descFabricInfo          = newGPUDesc("gpu_fabric_info", "1 per GPU NVML places in a multi-node NVLink domain (non-zero cluster UUID): cluster_uuid and clique_id, GPU Feature Discovery's nvidia.com/gpu.clique <cluster_uuid>.<clique_id>.", "cluster_uuid", "clique_id")
	descFabricHealthBad     = newGPUDesc("gpu_fabric_health_bad", "One series per field of the GPU's fabric health mask NVML supports, value the field's decoded value: 1 where it costs the NVLink domain bandwidth or membership, else 0.", "field", "value")
	descFabricHealthSummary = newGPUDesc("gpu_fabric_health_summary", "NVML's fabric health summary: 1 healthy, 2 unhealthy, 3 limited capacity.")
	descGPUPlatform         = newGPUDesc("gpu_platform_info", "1 per GPU that reports its rack position (GetPlatformInfo, Blackwell and newer), from the last discovery.", "chassis_serial", "slot", "tray", "host", "module")
	descRecoveryAction      = newGPUDesc("gpu_recovery_action", "NVML's recovery action for the GPU: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset.")
	descNVLinkVisible       = newGPUDesc("nvlink_visible", "1 when NVML reports NVLink state for the GPU; 0 where every link answers NOT_SUPPORTED.")
	descNVLinkExpected      = newGPUDesc("nvlink_expected_links", "Links the GPU should have up: the --expect count, else the links NVML listed at discovery.")
	descNVLinkUp            = newGPUDesc("nvlink_up", "1 when the NVLink is up, 0 when it is down or unreadable.", "link")
	// The error counters are the GPU's, summed over its links, as
	// dcgm-exporter's NVLINK_*_ERROR_COUNT_TOTAL fields: per link they
	// were 4 of every 5 NVLink series (576 of a DGX H100's 1,774), and
	// nvlink_up still names the link that failed.
	descNVLinkCRCFlit  = newGPUDesc("nvlink_crc_flit_errors_total", "NVLink data-link CRC flit errors, summed over the GPU's links; absent when a link's count is unreadable.")
	descNVLinkCRCData  = newGPUDesc("nvlink_crc_data_errors_total", "NVLink data-link CRC data errors, summed over the GPU's links; absent when a link's count is unreadable.")
	descNVLinkReplay   = newGPUDesc("nvlink_replay_errors_total", "NVLink data-link replays, summed over the GPU's links; absent when a link's count is unreadable.")
	descNVLinkRecovery = newGPUDesc("nvlink_recovery_errors_total", "NVLink data-link recoveries, summed over the GPU's links; absent when a link's count is unreadable.")

	// AMD Instinct GPUs (collector amdgpu; amd.go). gpu_info and the
	// gpu_pcie_* families are the NVIDIA GPUs' ones.
	descAMDUp        = newGPUDesc("gpu_amd_up", "1 while amdgpu has the AMD GPU: its PCI function is there and bound to amdgpu, and KFD listed it at the last discovery; else 0.")
	descAMDInfo      = newGPUDesc("gpu_amd_info", "1 per AMD GPU KFD lists: its ISA, render node (/dev/dri/renderD<render_minor>), XGMI hive and partition modes, from the last discovery.", "bus_id", "gfx_target", "render_minor", "xgmi_hive_id", "compute_partition", "memory_partition")
	descRASErrors    = newGPUDesc("gpu_ras_errors_total", "amdgpu's RAS error count of the block since the driver loaded (ras/<block>_err_count), by type: ue uncorrectable, ce corrected, de deferred.", "block", "type")
	descXGMILinkUp   = newGPUDesc("gpu_xgmi_link_up", "1 when the GPU and the peer GPU both list a direct XGMI link to each other (KFD io_links, one hop), from the last discovery; else 0.", "peer_gpu", "peer_bus_id")
	descXGMILinks    = newGPUDesc("gpu_xgmi_links", "Peer GPUs the GPU has a direct XGMI link to, both sides listing it (its gpu_xgmi_link_up series that are 1).")
	descXGMIExpected = newGPUDesc("gpu_xgmi_expected_links", "Direct XGMI links a fully connected hive gives the GPU: the other GPUs of its hive (MI300 and MI350 series only).")

	// RDMA (besides the counters of rdmaCounters).
	descRDMAInfo      = newDesc("rdma_info", "1 per RDMA port.", "device", "port", "link_layer", "fabric", "role", "netdev", "bus_id", "firmware")
	descRDMAState     = newDesc("rdma_state_id", "State of the port (1: down, 2: init, 3: armed, 4: active, 5: active defer).", "device", "port")
	descRDMAPhysState = newDesc("rdma_physical_state_id", "Physical state of the port (1: sleep, 2: polling, 3: disabled, 4: training, 5: link up, 6: link error recovery, 7: phy test).", "device", "port")
	descRDMARate      = newDesc("rdma_rate_bytes_per_second", "Signalling rate of the port.", "device", "port")
	descRDMADisabled  = newDesc("rdma_counters_disabled", "Counter files of the port the agent stopped reading because they answered EINVAL.", "device", "port")
	descRDMAPresent   = newDesc("rdma_device_present", "1 when the RDMA device's ports were read at this scrape; 0 for a device of the last discovery that is gone.", "device")
	descRDMALifespan  = newDesc("rdma_lifespan_seconds", "hw_counters/lifespan: the period within which two reads of the hw_counters may return the same values.", "device", "port")
	descTopologyPair  = newGPUDesc("topology_pair_info", "1 per GPU to NIC pair (class PIX, PXB, PHB, NODE, SYS).", "nic", "class")
	descTopologyBest  = newGPUDesc("topology_best_nic_class", "The GPU's pair class: PIX=1, PXB=2, PHB=3, NODE=4, SYS=5; 0 no compute NIC.")
	descTopologyAlign = newDesc("topology_aligned", "1 when every GPU has a compute NIC at PXB or closer.")

	// NVLink domains and IMEX (collector topology, from the last good
	// discovery; fabric.go).
	descNVLinkDomainGPUs     = newDesc("topology_nvlink_domain_gpus", "GPUs of the node in each NVLink domain and clique their fabric registration completed in with success; cluster_uuid empty on single-node NVSwitch systems.", "cluster_uuid", "clique_id")
	descNVLinkDomains        = newDesc("topology_nvlink_domains", "NVLink domains and cliques the node's GPUs are in: 1 on an NVSwitch node or tray, more where its GPUs are split, 0 without an NVLink fabric.")
	descNVLinkMultiNode      = newDesc("topology_nvlink_multi_node", "1 when a GPU of the node is in a multi-node NVLink domain (non-zero cluster UUID: GB200/GB300 NVL72 and the like).")
	descIMEXChannelsUsable   = newDesc("topology_imex_channels_usable", "IMEX channel devices (/dev/nvidia-caps-imex-channels/channelN) this process can use.")
	descIMEXDriverRegistered = newDesc("topology_imex_driver_registered", "1 when the driver registered the nvidia-caps-imex-channels device (/proc/devices).")
	descIMEXConfigPresent    = newDesc("topology_imex_config_present", "1 when the IMEX daemon's configuration (/etc/nvidia-imex/config.cfg) is installed.")
	descIMEXConfigNodes      = newDesc("topology_imex_config_nodes", "Nodes the IMEX daemon's node list (IMEX_NODE_CONFIG_FILE) holds: the NVLink domain's nodes as the site configured them.")

	// The node in the fleet (collector topology, from the last good
	// discovery and the placement read with it; placement.go).
	descNodePlacement = newDesc("node_placement_info", "1; where the node sits: its network tiers (tier0 the closest switch), cloud host, NVLink clique and rack position.",
		"hostname", "model", "gpu_model", "cloud", "tier0", "tier1", "tier2", "host_id", "clique", "gpu_memory_fabric", "chassis_serial", "slot", "tray", "source")
	descNodeLayout = newDesc("node_layout_info", "1; digests of the node's layout (GPUs, GPU to NIC pairs, NIC roles and fabrics) and of its NIC firmware: nodes of one model built alike share them.",
		"hostname", "model", "gpu_model", "layout", "firmware")

	// Storage (collector storage, from the last good discovery; storage.go).
	descNVMeInfo        = newDesc("storage_nvme_info", "1 per NVMe controller; device, firmware_revision, model, serial and state as node_exporter's node_nvme_info has them.", "device", "bus_id", "model", "serial", "firmware_revision", "transport", "state", "numa_node", "use")
	descNVMeGen         = newDesc("storage_nvme_pcie_link_generation", "Current PCIe generation of the NVMe controller's link.", "device")
	descNVMeMaxGen      = newDesc("storage_nvme_pcie_link_max_generation", "Maximum PCIe generation of the NVMe controller's link.", "device")
	descNVMeWidth       = newDesc("storage_nvme_pcie_link_width", "Current PCIe lanes of the NVMe controller's link.", "device")
	descNVMeMaxWidth    = newDesc("storage_nvme_pcie_link_max_width", "Maximum PCIe lanes of the NVMe controller's link.", "device")
	descStorageNVMePair = newGPUDesc("storage_nvme_pair_info", "1 per GPU and each of its nearest NVMe controllers (class PIX, PXB, PHB, NODE, SYS).", "device", "class")
	descStorageNICPair  = newGPUDesc("storage_nic_pair_info", "1 per GPU and each of its nearest storage NICs (class PIX, PXB, PHB, NODE, SYS).", "nic", "class")
	descGDSNvidiaFS     = newDesc("storage_gds_nvidia_fs_loaded", "1 when the nvidia-fs driver (GPUDirect Storage) is loaded.")
	descGDSP2PDMA       = newDesc("storage_gds_p2pdma_supported", "1 when GPUDirect Storage's P2PDMA mode can run on the node.")
	descIOMMUInfo       = newDesc("storage_iommu_info", "1; mode is how the IOMMU treats GPU and storage DMA: off, passthrough, translated or unknown.", "mode")
	descMountInfo       = newDesc("storage_mount_info", "1 per mounted file system GPUDirect Storage can serve.", "target", "fstype", "kind")
	descMountNICs       = newDesc("storage_mount_nics", "NICs that carry the network mount's traffic.", "target")

	fixedDescs = []*prometheus.Desc{
		descCollectorDuration, descCollectorSuccess,
		descDiscoverySuccess, descDiscoveryLast, descDiscoveryLastOK, descDiscoveryDuration,
		descStateWriteSuccess, descHealthHealthy, descHealthCheckFailed, descHealthLastRun,
		descXIDErrors, descLastXIDTimestamp, descNVMLUp, descGPUInfo, descGPUUp,
		descPCIeGen, descPCIeMaxGen, descPCIeWidth, descPCIeMaxWidth, descPCIeReplays,
		descECCVolatile, descECCAggregate, descRemapCorrectable, descRemapUncorrectable,
		descRemapPending, descRemapFailure, descRetiredPages, descRetiredPending,
		descFabricState, descFabricStatus, descFabricInfo, descFabricHealthBad, descFabricHealthSummary,
		descGPUPlatform, descRecoveryAction,
		descNVLinkVisible, descNVLinkExpected, descNVLinkUp,
		descNVLinkCRCFlit, descNVLinkCRCData, descNVLinkReplay, descNVLinkRecovery,
		descAMDUp, descAMDInfo, descRASErrors, descXGMILinkUp, descXGMILinks, descXGMIExpected,
		descRDMAInfo, descRDMAState, descRDMAPhysState, descRDMARate, descRDMADisabled,
		descRDMAPresent, descRDMALifespan,
		descTopologyPair, descTopologyBest, descTopologyAlign,
		descNVLinkDomainGPUs, descNVLinkDomains, descNVLinkMultiNode,
		descIMEXChannelsUsable, descIMEXDriverRegistered, descIMEXConfigPresent, descIMEXConfigNodes,
		descNodePlacement, descNodeLayout,
		descNVMeInfo, descNVMeGen, descNVMeMaxGen, descNVMeWidth, descNVMeMaxWidth,
		descStorageNVMePair, descStorageNICPair,
		descGDSNvidiaFS, descGDSP2PDMA, descIOMMUInfo, descMountInfo, descMountNICs,
		descGPUProcesses, descGPUProcessesListed, descJobInfo,
		descJobComputeNICIdle, descJobStorageNICCompute,
	}
)
