package nvml

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ready answers ERROR_INVALID_ARGUMENT for a nil device and
// ERROR_UNINITIALIZED while the library is not initialised.
func (d *replayDevice) ready() nvml.Return {
	if d == nil || d.rec == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return d.lib.ready()
}

func (d *replayDevice) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return nvml.PciInfo{}, r
	}
	return answerAs(d.rec.PCI, r, pciInfo)
}

func (d *replayDevice) GetUUID() (string, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return "", r
	}
	return answerAs(d.rec.UUID, r, same[string])
}

func (d *replayDevice) GetName() (string, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return "", r
	}
	return answerAs(d.rec.Name, r, same[string])
}

func (d *replayDevice) GetMinorNumber() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.Minor, r, same[int])
}

// GetIndex answers the device's place in the file, which is NVML's index.
func (d *replayDevice) GetIndex() (int, nvml.Return) {
	if r := d.ready(); r != nvml.SUCCESS {
		return 0, r
	}
	return d.index, nvml.SUCCESS
}

func (d *replayDevice) GetNumaNodeId() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.NUMANode, r, same[int])
}

// GetCpuAffinity answers the recorded words, whatever numCPUs asks for:
// every CPU the recording host had is in them.
func (d *replayDevice) GetCpuAffinity(numCPUs int) ([]uint, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return nil, r
	}
	return answerAs(d.rec.CPUAffinity, r, func(w []uint64) []uint {
		out := make([]uint, len(w))
		for i, x := range w {
			out[i] = uint(x)
		}
		return out
	})
}

func (d *replayDevice) GetCurrPcieLinkGeneration() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.PCIeGen, r, same[int])
}

func (d *replayDevice) GetMaxPcieLinkGeneration() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.PCIeMaxGen, r, same[int])
}

func (d *replayDevice) GetCurrPcieLinkWidth() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.PCIeWidth, r, same[int])
}

func (d *replayDevice) GetMaxPcieLinkWidth() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.PCIeMaxWidth, r, same[int])
}

// link finds the recorded link n. A link above every recorded one answers
// ERROR_INVALID_ARGUMENT, as NVML does past a device's last link; a gap
// answers ERROR_NOT_SUPPORTED.
func (d *replayDevice) link(n int) (*ReplayNVLink, nvml.Return) {
	if r := d.ready(); r != nvml.SUCCESS {
		return nil, r
	}
	last := -1
	for i := range d.rec.NVLinks {
		l := &d.rec.NVLinks[i]
		if l.Link == n {
			return l, nvml.SUCCESS
		}
		last = max(last, l.Link)
	}
	if n < 0 || n > last {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return nil, nvml.ERROR_NOT_SUPPORTED
}

func (d *replayDevice) GetNvLinkState(n int) (nvml.EnableState, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(l.State, r, func(v int) nvml.EnableState { return nvml.EnableState(v) })
}

func (d *replayDevice) GetNvLinkVersion(n int) (uint32, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(l.Version, r, func(v int) uint32 { return uint32(v) })
}

func (d *replayDevice) GetNvLinkRemotePciInfo(n int) (nvml.PciInfo, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return nvml.PciInfo{}, r
	}
	return answerAs(l.Remote, r, pciInfo)
}

func (d *replayDevice) GetNvLinkRemoteDeviceType(n int) (nvml.IntNvLinkDeviceType, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(l.RemoteType, r, func(v int) nvml.IntNvLinkDeviceType { return nvml.IntNvLinkDeviceType(v) })
}

// GetNvLinkErrorCounter answers the link's recorded count of c:
// ERROR_NOT_SUPPORTED where the file has none (and for
// NVLINK_ERROR_DL_ECC_DATA, which the format does not keep),
// ERROR_INVALID_ARGUMENT for a counter NVML does not define.
func (d *replayDevice) GetNvLinkErrorCounter(n int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if c < 0 || c >= nvml.NVLINK_ERROR_COUNT {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return answerAs(optional(l.Errors.counter(c)), r, same[uint64])
}

func (d *replayDevice) GetPersistenceMode() (nvml.EnableState, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[int] { return h.Persistence })), d.ready(),
		func(v int) nvml.EnableState { return nvml.EnableState(v) })
}

// GetTotalEccErrors answers the recorded uncorrected counts; corrected
// errors are not recorded and answer ERROR_NOT_SUPPORTED.
func (d *replayDevice) GetTotalEccErrors(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	var a *Answer[uint64]
	switch {
	case t != nvml.MEMORY_ERROR_TYPE_UNCORRECTED:
	case c == nvml.VOLATILE_ECC:
		a = d.rec.ECCUncorrectedVolatile
	case c == nvml.AGGREGATE_ECC:
		a = d.rec.ECCUncorrectedAggregate
	}
	return answerAs(optional(a), r, same[uint64])
}

func (d *replayDevice) GetRemappedRows() (int, int, bool, bool, nvml.Return) {
	v, r := answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayRemappedRows] { return h.RemappedRows })),
		d.ready(), same[ReplayRemappedRows])
	return v.Correctable, v.Uncorrectable, v.Pending, v.Failure, r
}

// GetRetiredPages answers as many made-up page addresses as the file
// records for cause.
func (d *replayDevice) GetRetiredPages(cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
	v, r := answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayRetiredPages] { return h.RetiredPages })),
		d.ready(), same[ReplayRetiredPages])
	if r != nvml.SUCCESS {
		return nil, r
	}
	var n int
	switch cause {
	case nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
		n = v.MultipleSingleBit
	case nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
		n = v.DoubleBit
	default:
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if n > MaxReplayRetiredPages { // only a ReplayFile LoadReplay did not check
		return nil, nvml.ERROR_UNKNOWN
	}
	pages := make([]uint64, max(n, 0))
	for i := range pages {
		pages[i] = uint64(cause)<<40 | uint64(i+1)<<12
	}
	return pages, nvml.SUCCESS
}

func (d *replayDevice) GetRetiredPagesPendingStatus() (nvml.EnableState, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[int] { return h.RetiredPagesPending })), d.ready(),
		func(v int) nvml.EnableState { return nvml.EnableState(v) })
}

func (d *replayDevice) GetGpuFabricInfo() (nvml.GpuFabricInfo, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayFabric] { return h.Fabric })), d.ready(),
		func(f ReplayFabric) nvml.GpuFabricInfo {
			uuid, _ := parseClusterUUID(f.ClusterUUID) // LoadReplay checked it
			return nvml.GpuFabricInfo{State: uint8(f.State), Status: uint32(f.Status), ClusterUuid: uuid, CliqueId: f.CliqueID}
		})
}

// GetGpuFabricInfo_v4 answers the recorded fabric with one unicast-pointer
// clique entry, the recorded clique.
func (d *replayDevice) GetGpuFabricInfo_v4() (nvml.GpuFabricInfo_v4, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayFabric] { return h.Fabric })), d.ready(),
		func(f ReplayFabric) nvml.GpuFabricInfo_v4 {
			uuid, _ := parseClusterUUID(f.ClusterUUID)
			info := nvml.GpuFabricInfo_v4{State: uint8(f.State), Status: uint32(f.Status), ClusterUuid: uuid,
				HealthMask: f.HealthMask, HealthSummary: uint8(f.HealthSummary), NumCliques: 1}
			info.Cliques[0] = nvml.GpuFabricClique_v1{Type: nvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER, Id: f.CliqueID}
			return info
		})
}

func (d *replayDevice) GetPlatformInfo() (nvml.PlatformInfo, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayPlatform] { return h.Platform })), d.ready(),
		func(p ReplayPlatform) nvml.PlatformInfo {
			info := nvml.PlatformInfo{Version: nvml.STRUCT_VERSION(nvml.PlatformInfo{}, 1),
				SlotNumber: uint8(p.Slot), TrayIndex: uint8(p.Tray), HostId: uint8(p.Host),
				PeerType: uint8(p.PeerType), ModuleId: uint8(p.Module)}
			guid, _ := hex.DecodeString(p.IBGUID)
			copy(info.IbGuid[:], guid)
			copy(info.ChassisSerialNumber[:], p.ChassisSerial)
			return info
		})
}

func (d *replayDevice) GetPcieReplayCounter() (int, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[int] { return h.PCIeReplay })), d.ready(), same[int])
}

// GetFieldValues answers FI_DEV_GET_GPU_RECOVERY_ACTION (scope 0) from the
// file, as an unsigned int; every other field gets nvmlReturn
// ERROR_NOT_SUPPORTED. The call itself succeeds once the library is
// initialised and values is not empty.
func (d *replayDevice) GetFieldValues(values []nvml.FieldValue) nvml.Return {
	if r := d.ready(); r != nvml.SUCCESS {
		return r
	}
	if len(values) == 0 {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	for i := range values {
		fv := &values[i]
		fv.NvmlReturn, fv.ValueType, fv.Value = uint32(nvml.ERROR_NOT_SUPPORTED), 0, [8]byte{}
		if fv.FieldId != nvml.FI_DEV_GET_GPU_RECOVERY_ACTION || fv.ScopeId != 0 {
			continue
		}
		v, r := answer(optional(d.rec.RecoveryAction))
		if v < 0 {
			v = 0
		}
		fv.NvmlReturn = uint32(r)
		if r == nvml.SUCCESS {
			fv.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			binary.LittleEndian.PutUint32(fv.Value[:4], uint32(v))
		}
	}
	return nvml.SUCCESS
}

// GetComputeRunningProcesses answers compute_processes.
func (d *replayDevice) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[[]ReplayProcess] { return h.ComputeProcesses })), d.ready(), processInfos)
}

// GetGraphicsRunningProcesses answers graphics_processes.
func (d *replayDevice) GetGraphicsRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[[]ReplayProcess] { return h.GraphicsProcesses })), d.ready(), processInfos)
}

// processInfos is a recorded process list in go-nvml's form; a fresh
// slice, so a caller cannot change the recording.
func processInfos(ps []ReplayProcess) []nvml.ProcessInfo {
	out := make([]nvml.ProcessInfo, len(ps))
	for i, p := range ps {
		out[i] = nvml.ProcessInfo{Pid: p.PID, UsedGpuMemory: p.UsedGPUMemory,
			GpuInstanceId: p.GPUInstanceID, ComputeInstanceId: p.ComputeInstanceID}
	}
	return out
}
