package nvml

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// ReplayVersion is the version of the nvml.json format this package writes.
const ReplayVersion = 1

// ReplayFile is the nvml.json format: NVML's answers for one node, recorded
// call by call, so that a replayer can implement go-nvml's nvml.Interface
// and nvml.Device and the same reading code runs live and offline.
//
// Every answer is an Answer: the value NVML returned, or the name of the
// nvml.Return it failed with ("ERROR_NOT_SUPPORTED", "ERROR_GPU_IS_LOST",
// ...). A call the file does not record replays as ERROR_NOT_SUPPORTED.
// The format is documented in docs/nvml-replay.md.
type ReplayFile struct {
	Version int `json:"version"`
	// Init is Init's answer: "" for success, "ERROR_LIBRARY_NOT_FOUND" to
	// replay a node without the NVIDIA driver.
	Init              string         `json:"init,omitempty"`
	DriverVersion     Answer[string] `json:"driver_version"`      // SystemGetDriverVersion
	NVMLVersion       Answer[string] `json:"nvml_version"`        // SystemGetNVMLVersion
	CUDADriverVersion Answer[int]    `json:"cuda_driver_version"` // SystemGetCudaDriverVersion
	// DeviceCount is DeviceGetCount; when it fails, Devices is not read.
	DeviceCount Answer[int]    `json:"device_count"`
	Devices     []ReplayDevice `json:"devices"`
}

// Answer is one recorded NVML answer.
type Answer[T any] struct {
	Value T `json:"value"`
	// Return is the nvml.Return name of a failed call; "" means SUCCESS.
	Return string `json:"return,omitempty"`
}

// ReplayPCI is nvml.PciInfo in readable form.
type ReplayPCI struct {
	BusID          string `json:"bus_id"`           // NVML's form, "00000000:00:06.0"
	PCIDeviceID    uint32 `json:"pci_device_id"`    // 0x233510de: device<<16 | vendor
	PCISubsystemID uint32 `json:"pci_subsystem_id"` // subsystem device<<16 | subsystem vendor
}

// ReplayDevice is one GPU, in NVML index order.
type ReplayDevice struct {
	// Handle is DeviceGetHandleByIndex's answer: "" for success,
	// "ERROR_GPU_IS_LOST" for a GPU that fell off the bus. When it fails no
	// other field is read.
	Handle   string            `json:"handle,omitempty"`
	PCI      Answer[ReplayPCI] `json:"pci"`       // GetPciInfo
	UUID     Answer[string]    `json:"uuid"`      // GetUUID
	Name     Answer[string]    `json:"name"`      // GetName
	Minor    Answer[int]       `json:"minor"`     // GetMinorNumber
	NUMANode Answer[int]       `json:"numa_node"` // GetNumaNodeId
	// CPUAffinity is GetCpuAffinity's words (64 CPUs each, CPU 0 in bit 0
	// of the first word), up to the last non-zero word.
	CPUAffinity  Answer[[]uint64] `json:"cpu_affinity"`
	PCIeGen      Answer[int]      `json:"pcie_gen"`       // GetCurrPcieLinkGeneration
	PCIeMaxGen   Answer[int]      `json:"pcie_max_gen"`   // GetMaxPcieLinkGeneration
	PCIeWidth    Answer[int]      `json:"pcie_width"`     // GetCurrPcieLinkWidth
	PCIeMaxWidth Answer[int]      `json:"pcie_max_width"` // GetMaxPcieLinkWidth
	// NVLinks holds links 0..n-1: Record asks 0..NVLINK_MAX_LINKS-1 (36 in
	// go-nvml v0.13.4-1; a Hopper GPU has 18) and stops before the first link
	// whose state answers ERROR_INVALID_ARGUMENT. A link above every listed
	// one replays as ERROR_INVALID_ARGUMENT, a gap as ERROR_NOT_SUPPORTED.
	NVLinks []ReplayNVLink `json:"nvlinks"`

	// Health calls. Each is optional in the file: a missing one (a file
	// written before they were recorded) replays as ERROR_NOT_SUPPORTED.
	// Record always writes them.

	// Persistence is GetPersistenceMode: 1 enabled, 0 disabled.
	Persistence *Answer[int] `json:"persistence,omitempty"`
	// ECCUncorrectedVolatile and ECCUncorrectedAggregate are
	// GetTotalEccErrors(MEMORY_ERROR_TYPE_UNCORRECTED, VOLATILE_ECC) and
	// (..., AGGREGATE_ECC).
	ECCUncorrectedVolatile  *Answer[uint64]             `json:"ecc_uncorrected_volatile,omitempty"`
	ECCUncorrectedAggregate *Answer[uint64]             `json:"ecc_uncorrected_aggregate,omitempty"`
	RemappedRows            *Answer[ReplayRemappedRows] `json:"remapped_rows,omitempty"` // GetRemappedRows
	// RetiredPages is GetRetiredPages for each cause, as page counts (the
	// replay answers that many made-up page addresses). When either cause
	// fails the answer is the first failure.
	RetiredPages *Answer[ReplayRetiredPages] `json:"retired_pages,omitempty"`
	// RetiredPagesPending is GetRetiredPagesPendingStatus: 1 pending.
	RetiredPagesPending *Answer[int] `json:"retired_pages_pending,omitempty"`
	// Fabric is GetGpuFabricInfo_v4 where the driver has it, else
	// GetGpuFabricInfo (v1: no health fields). The replay answers both.
	Fabric *Answer[ReplayFabric] `json:"fabric,omitempty"`
	// RecoveryAction is GetFieldValues' answer for
	// FI_DEV_GET_GPU_RECOVERY_ACTION (0 none, 1 GPU reset, 2 node reboot,
	// 3 drain P2P, 4 drain and reset, ...); a failure is the field's
	// nvmlReturn, or the call's when the call itself failed.
	RecoveryAction *Answer[int] `json:"recovery_action,omitempty"`
	PCIeReplay     *Answer[int] `json:"pcie_replay,omitempty"` // GetPcieReplayCounter
	// Platform is GetPlatformInfo (Blackwell and newer). Optional: a
	// missing one answers ERROR_NOT_SUPPORTED, as a driver without the call
	// is recorded.
	Platform *Answer[ReplayPlatform] `json:"platform,omitempty"`

	// XIDs is the XID event stream. Its Return is RegisterEvents'
	// answer for nvml.EventTypeXidCriticalError ("" when the GPU delivers
	// XID events, "ERROR_NOT_SUPPORTED" when it does not); its Value lists
	// the XID codes the replayer's event sets deliver, once each, after
	// the GPU is registered. Optional: a missing one answers
	// ERROR_NOT_SUPPORTED. Record writes the events pending when it asks
	// (on a live node, normally none).
	XIDs *Answer[[]uint64] `json:"xids,omitempty"`

	// ComputeProcesses and GraphicsProcesses are
	// GetComputeRunningProcesses and GetGraphicsRunningProcesses: the
	// processes using the GPU when the file was recorded (gpuaffinity
	// audit). Optional: a missing one (a file written before they were
	// recorded) answers ERROR_NOT_SUPPORTED, so an old file says "NVML
	// did not list the processes", never "no process".
	ComputeProcesses  *Answer[[]ReplayProcess] `json:"compute_processes,omitempty"`
	GraphicsProcesses *Answer[[]ReplayProcess] `json:"graphics_processes,omitempty"`
}

// ReplayProcess is one nvml.ProcessInfo.
type ReplayProcess struct {
	PID uint32 `json:"pid"` // Pid, in the host's PID namespace
	// UsedGPUMemory is UsedGpuMemory in bytes; NVML answers
	// NVML_VALUE_NOT_AVAILABLE (2^64-1) where it cannot say (Windows
	// WDDM, some containers).
	UsedGPUMemory uint64 `json:"used_gpu_memory"`
	// GPUInstanceID and ComputeInstanceID are the MIG instance's ids;
	// 0xFFFFFFFF (or missing, replayed as 0) outside MIG.
	GPUInstanceID     uint32 `json:"gpu_instance_id,omitempty"`
	ComputeInstanceID uint32 `json:"compute_instance_id,omitempty"`
}

// ReplayRemappedRows is GetRemappedRows' answer.
type ReplayRemappedRows struct {
	Correctable   int  `json:"correctable"`   // corrRows
	Uncorrectable int  `json:"uncorrectable"` // uncRows
	Pending       bool `json:"pending"`       // isPending
	Failure       bool `json:"failure"`       // failureOccurred
}

// ReplayRetiredPages is GetRetiredPages' page count for each cause.
type ReplayRetiredPages struct {
	// PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
	MultipleSingleBit int `json:"multiple_single_bit"`
	DoubleBit         int `json:"double_bit"` // PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
}

// ReplayFabric is the part of GetGpuFabricInfo's GpuFabricInfo the format
// keeps.
type ReplayFabric struct {
	// State: 0 NOT_SUPPORTED, 1 NOT_STARTED, 2 IN_PROGRESS, 3 COMPLETED.
	State int `json:"state"`
	// Status is the nvml.Return of the fabric registration (0 SUCCESS);
	// NVML sets it once State is COMPLETED.
	Status int `json:"status"`
	// ClusterUUID is clusterUuid in canonical form; "" (or missing) is all
	// zeroes.
	ClusterUUID string `json:"cluster_uuid,omitempty"`
	// CliqueID is cliqueId (v4: the first unicast-pointer clique entry).
	CliqueID uint32 `json:"clique_id,omitempty"`
	// HealthMask and HealthSummary are v4's healthMask and healthSummary
	// (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*, _SUMMARY_*); missing is 0,
	// every field "not supported", as a v1 recording has them.
	HealthMask    uint32 `json:"health_mask,omitempty"`
	HealthSummary int    `json:"health_summary,omitempty"`
}

// ReplayPlatform is GetPlatformInfo's nvmlPlatformInfo_t, by version 2's
// field names.
type ReplayPlatform struct {
	IBGUID        string `json:"ib_guid"`        // ibGuid, hex, trailing zero bytes dropped
	ChassisSerial string `json:"chassis_serial"` // chassisSerialNumber, up to its NUL
	Slot          int    `json:"slot"`           // slotNumber
	Tray          int    `json:"tray"`           // trayIndex
	Host          int    `json:"host"`           // hostId
	PeerType      int    `json:"peer_type"`      // peerType
	Module        int    `json:"module"`         // moduleId
}

// ReplayNVLink is one link's answers.
type ReplayNVLink struct {
	Link       int               `json:"link"`
	State      Answer[int]       `json:"state"`       // GetNvLinkState: 1 enabled, 0 disabled
	Version    Answer[int]       `json:"version"`     // GetNvLinkVersion
	Remote     Answer[ReplayPCI] `json:"remote"`      // GetNvLinkRemotePciInfo
	RemoteType Answer[int]       `json:"remote_type"` // GetNvLinkRemoteDeviceType: 0 GPU, 1 IBMNPU, 2 NVSwitch
	// Errors is GetNvLinkErrorCounter for the four data link counters.
	// Optional, as is each counter in it: a missing one answers
	// ERROR_NOT_SUPPORTED. Record always writes all four.
	Errors *ReplayNVLinkErrors `json:"errors,omitempty"`
}

// ReplayNVLinkErrors is GetNvLinkErrorCounter's answer per counter.
type ReplayNVLinkErrors struct {
	CRCFlit  *Answer[uint64] `json:"crc_flit,omitempty"` // NVLINK_ERROR_DL_CRC_FLIT
	CRCData  *Answer[uint64] `json:"crc_data,omitempty"` // NVLINK_ERROR_DL_CRC_DATA
	Replay   *Answer[uint64] `json:"replay,omitempty"`   // NVLINK_ERROR_DL_REPLAY
	Recovery *Answer[uint64] `json:"recovery,omitempty"` // NVLINK_ERROR_DL_RECOVERY
}

// counter is the recorded answer for c; nil for a counter the format does
// not keep (NVLINK_ERROR_DL_ECC_DATA) or a nil e.
func (e *ReplayNVLinkErrors) counter(c nvml.NvLinkErrorCounter) *Answer[uint64] {
	if e == nil {
		return nil
	}
	switch c {
	case nvml.NVLINK_ERROR_DL_CRC_FLIT:
		return e.CRCFlit
	case nvml.NVLINK_ERROR_DL_CRC_DATA:
		return e.CRCData
	case nvml.NVLINK_ERROR_DL_REPLAY:
		return e.Replay
	case nvml.NVLINK_ERROR_DL_RECOVERY:
		return e.Recovery
	}
	return nil
}
