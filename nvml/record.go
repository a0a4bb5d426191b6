package nvml

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Record asks lib every call nvml.json records and returns the file; it is
// what `gpuaffinity snapshot` writes. For xids it registers every GPU on one
// event set and keeps the XID events already pending (Wait with timeout
// 0); on a replayer those are the ones no event set has delivered yet. Init comes first: when it fails the
// file holds only its answer, and nothing else is asked (live go-nvml
// cannot be called without its library). Every other failure is an answer
// in the file, not an error; a lost GPU keeps being asked, so the file
// shows what each call said. Record(NewReplay(f)) gives f back for any f
// Record wrote.
//
// The error is non-nil for a nil lib, and when Shutdown fails; the file is
// complete in that case too.
func Record(lib nvml.Interface) (ReplayFile, error) {
	if lib == nil {
		return ReplayFile{}, errors.New("nvml: record: no NVML interface")
	}
	f := ReplayFile{Version: ReplayVersion}
	if r := lib.Init(); r != nvml.SUCCESS {
		f.Init = returnName(r)
		return f, nil
	}
	f.DriverVersion = recordAnswer(lib.SystemGetDriverVersion())
	f.NVMLVersion = recordAnswer(lib.SystemGetNVMLVersion())
	f.CUDADriverVersion = recordAnswer(lib.SystemGetCudaDriverVersion())
	f.DeviceCount = recordAnswer(lib.DeviceGetCount())
	if f.DeviceCount.Return == "" {
		var devs []nvml.Device
		syms := lookupSymbols(lib, symFabricInfoV4, symPlatformInfo)
		for i := range f.DeviceCount.Value {
			d, dev := recordDevice(lib, i, syms)
			f.Devices = append(f.Devices, d)
			devs = append(devs, dev)
		}
		for i, x := range recordXIDs(lib, devs) {
			if x != nil {
				f.Devices[i].XIDs = x
			}
		}
	}
	if r := lib.Shutdown(); r != nvml.SUCCESS {
		return f, fmt.Errorf("nvml: record: Shutdown: %w", retErr(r))
	}
	return f, nil
}

// recordDevice asks every recorded call of device i but the XID events,
// and returns its handle (nil when DeviceGetHandleByIndex failed).
func recordDevice(lib nvml.Interface, i int, syms map[string]bool) (ReplayDevice, nvml.Device) {
	dev, r := lib.DeviceGetHandleByIndex(i)
	if r != nvml.SUCCESS {
		return ReplayDevice{Handle: returnName(r)}, nil
	}
	d := ReplayDevice{
		PCI:          recordAs(replayPCI)(dev.GetPciInfo()),
		UUID:         recordAnswer(dev.GetUUID()),
		Name:         recordAnswer(dev.GetName()),
		Minor:        recordAnswer(dev.GetMinorNumber()),
		NUMANode:     recordAnswer(dev.GetNumaNodeId()),
		CPUAffinity:  recordAs(affinityWords)(dev.GetCpuAffinity(affinityCPUs())),
		PCIeGen:      recordAnswer(dev.GetCurrPcieLinkGeneration()),
		PCIeMaxGen:   recordAnswer(dev.GetMaxPcieLinkGeneration()),
		PCIeWidth:    recordAnswer(dev.GetCurrPcieLinkWidth()),
		PCIeMaxWidth: recordAnswer(dev.GetMaxPcieLinkWidth()),
	}
	recordHealth(dev, &d, syms)
	d.ComputeProcesses = recordProcesses(dev.GetComputeRunningProcesses())
	d.GraphicsProcesses = recordProcesses(dev.GetGraphicsRunningProcesses())
	for n := range nvml.NVLINK_MAX_LINKS {
		state, r := dev.GetNvLinkState(n)
		if r == nvml.ERROR_INVALID_ARGUMENT {
			break
		}
		d.NVLinks = append(d.NVLinks, ReplayNVLink{
			Link:       n,
			State:      recordAs(func(s nvml.EnableState) int { return int(s) })(state, r),
			Version:    recordAs(func(v uint32) int { return int(v) })(dev.GetNvLinkVersion(n)),
			Remote:     recordAs(replayPCI)(dev.GetNvLinkRemotePciInfo(n)),
			RemoteType: recordAs(func(t nvml.IntNvLinkDeviceType) int { return int(t) })(dev.GetNvLinkRemoteDeviceType(n)),
			Errors:     recordLinkErrors(dev, n),
		})
	}
	return d, dev
}

// recordLinkErrors asks link n's four error counters.
func recordLinkErrors(dev nvml.Device, n int) *ReplayNVLinkErrors {
	get := func(c nvml.NvLinkErrorCounter) *Answer[uint64] {
		a := recordAnswer(dev.GetNvLinkErrorCounter(n, c))
		return &a
	}
	return &ReplayNVLinkErrors{
		CRCFlit:  get(nvml.NVLINK_ERROR_DL_CRC_FLIT),
		CRCData:  get(nvml.NVLINK_ERROR_DL_CRC_DATA),
		Replay:   get(nvml.NVLINK_ERROR_DL_REPLAY),
		Recovery: get(nvml.NVLINK_ERROR_DL_RECOVERY),
	}
}

// recordHealth asks the health calls.
func recordHealth(dev nvml.Device, d *ReplayDevice, syms map[string]bool) {
	enable := recordAs(func(s nvml.EnableState) int { return int(s) })
	ptr := func(a Answer[int]) *Answer[int] { return &a }
	d.Persistence = ptr(enable(dev.GetPersistenceMode()))
	vol := recordAnswer(dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC))
	agg := recordAnswer(dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC))
	d.ECCUncorrectedVolatile, d.ECCUncorrectedAggregate = &vol, &agg

	corr, unc, pending, failure, r := dev.GetRemappedRows()
	rows := recordAnswer(ReplayRemappedRows{Correctable: corr, Uncorrectable: unc, Pending: pending, Failure: failure}, r)
	d.RemappedRows = &rows

	single, r1 := dev.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
	double, r2 := dev.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
	if r1 == nvml.SUCCESS {
		r1 = r2
	}
	pages := recordAnswer(ReplayRetiredPages{MultipleSingleBit: len(single), DoubleBit: len(double)}, r1)
	d.RetiredPages = &pages
	d.RetiredPagesPending = ptr(enable(dev.GetRetiredPagesPendingStatus()))

	var fabric Answer[ReplayFabric]
	if syms[symFabricInfoV4] {
		fabric = recordAs(func(f nvml.GpuFabricInfo_v4) ReplayFabric {
			r := ReplayFabric{State: int(f.State), Status: int(f.Status), ClusterUUID: clusterUUID(f.ClusterUuid),
				HealthMask: f.HealthMask, HealthSummary: int(f.HealthSummary)}
			for _, c := range f.Cliques[:min(int(f.NumCliques), len(f.Cliques))] {
				if c.Type == nvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER {
					r.CliqueID = c.Id
					break
				}
			}
			return r
		})(dev.GetGpuFabricInfo_v4())
	} else {
		fabric = recordAs(func(f nvml.GpuFabricInfo) ReplayFabric {
			return ReplayFabric{State: int(f.State), Status: int(f.Status), ClusterUUID: clusterUUID(f.ClusterUuid), CliqueID: f.CliqueId}
		})(dev.GetGpuFabricInfo())
	}
	d.Fabric = &fabric
	if syms[symPlatformInfo] {
		p := recordAs(func(p nvml.PlatformInfo) ReplayPlatform {
			return ReplayPlatform{IBGUID: trimmedHex(p.IbGuid[:]), ChassisSerial: printable(p.ChassisSerialNumber[:]),
				Slot: int(p.SlotNumber), Tray: int(p.TrayIndex), Host: int(p.HostId), PeerType: int(p.PeerType), Module: int(p.ModuleId)}
		})(dev.GetPlatformInfo())
		if p.Return != returnName(nvml.ERROR_NOT_SUPPORTED) {
			d.Platform = &p // a missing one replays as ERROR_NOT_SUPPORTED
		}
	}
	d.RecoveryAction = ptr(recordAnswer(recoveryAction(dev)))
	d.PCIeReplay = ptr(recordAnswer(dev.GetPcieReplayCounter()))
}

// recoveryAction asks GetFieldValues for FI_DEV_GET_GPU_RECOVERY_ACTION:
// the field's value, or the call's failure, else the field's.
func recoveryAction(dev nvml.Device) (int, nvml.Return) {
	values := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
	if r := dev.GetFieldValues(values); r != nvml.SUCCESS {
		return 0, r
	}
	return fieldInt(values[0])
}

// fieldInt reads an integer FieldValue; a double or unknown value type
// answers ERROR_UNKNOWN.
func fieldInt(fv nvml.FieldValue) (int, nvml.Return) {
	if r := nvml.Return(fv.NvmlReturn); r != nvml.SUCCESS {
		return 0, r
	}
	v := fv.Value[:]
	switch nvml.ValueType(fv.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return int(binary.LittleEndian.Uint32(v)), nvml.SUCCESS
	case nvml.VALUE_TYPE_SIGNED_INT:
		return int(int32(binary.LittleEndian.Uint32(v))), nvml.SUCCESS
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return int(binary.LittleEndian.Uint64(v)), nvml.SUCCESS
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return int(binary.LittleEndian.Uint16(v)), nvml.SUCCESS
	}
	return 0, nvml.ERROR_UNKNOWN
}

// recordAnswer is one answer as nvml.json keeps it: the value on success,
// the Return's name and the zero value otherwise.
func recordAnswer[T any](v T, r nvml.Return) Answer[T] {
	if r != nvml.SUCCESS {
		return Answer[T]{Return: returnName(r)}
	}
	return Answer[T]{Value: v}
}

// recordAs is recordAnswer for a value whose recorded type differs from
// go-nvml's.
func recordAs[S, T any](conv func(S) T) func(S, nvml.Return) Answer[T] {
	return func(v S, r nvml.Return) Answer[T] {
		if r != nvml.SUCCESS {
			return Answer[T]{Return: returnName(r)}
		}
		return Answer[T]{Value: conv(v)}
	}
}

// affinityWords keeps GetCpuAffinity's words up to the last non-zero one
// (at least one word): go-nvml returns far more words than CPUs exist.
func affinityWords(w []uint) []uint64 {
	n := min(len(w), 1)
	for i, x := range w {
		if x != 0 {
			n = i + 1
		}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(w[i])
	}
	return out
}

// replayProcesses is a process list in the file's form.
func replayProcesses(ps []nvml.ProcessInfo) []ReplayProcess {
	out := make([]ReplayProcess, len(ps))
	for i, p := range ps {
		out[i] = ReplayProcess{PID: p.Pid, UsedGPUMemory: p.UsedGpuMemory,
			GPUInstanceID: p.GpuInstanceId, ComputeInstanceID: p.ComputeInstanceId}
	}
	return out
}

// recordProcesses is a process list's answer; nil (left out) for
// ERROR_NOT_SUPPORTED, which is what a missing one replays, so a file
// without the lists records back as itself.
func recordProcesses(ps []nvml.ProcessInfo, r nvml.Return) *Answer[[]ReplayProcess] {
	if r == nvml.ERROR_NOT_SUPPORTED {
		return nil
	}
	a := recordAs(replayProcesses)(ps, r)
	return &a
}
