package nvml

import (
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/pci"
)

// ready answers ERROR_UNINITIALIZED unless Init has succeeded more often
// than Shutdown.
func (l *replayLib) ready() nvml.Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inits == 0 {
		return nvml.ERROR_UNINITIALIZED
	}
	return nvml.SUCCESS
}

// Init answers the recorded Init.
func (l *replayLib) Init() nvml.Return {
	r := ret(l.file.Init)
	if r == nvml.SUCCESS {
		l.mu.Lock()
		l.inits++
		l.mu.Unlock()
	}
	return r
}

// InitWithFlags answers as Init; the flags change nothing in a replay.
func (l *replayLib) InitWithFlags(uint32) nvml.Return { return l.Init() }

// Shutdown drops one reference taken by Init.
func (l *replayLib) Shutdown() nvml.Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inits == 0 {
		return nvml.ERROR_UNINITIALIZED
	}
	l.inits--
	return nvml.SUCCESS
}

// ErrorString answers libnvidia-ml's text for r where known, else its name.
func (l *replayLib) ErrorString(r nvml.Return) string {
	for _, e := range returnTable {
		if e.ret == r && e.text != "" {
			return e.text
		}
	}
	if r == nvml.SUCCESS {
		return "SUCCESS"
	}
	return returnName(r)
}

// Extensions answers a symbol table that has only the newer entry points
// the replay answers from the file (replayedSymbols), so callers that
// check for any other newer entry point skip it.
func (l *replayLib) Extensions() nvml.ExtendedInterface { return replayExtensions{} }

type replayExtensions struct{}

// replayedSymbols are the entry points a reader asks LookupSymbol for
// that the replay answers itself, from nvml.json.
var replayedSymbols = []string{symFabricInfoV4, symPlatformInfo}

func (replayExtensions) LookupSymbol(name string) error {
	if slices.Contains(replayedSymbols, name) {
		return nil
	}
	return fmt.Errorf("%s: not in the NVML replay", name)
}

func (l *replayLib) SystemGetDriverVersion() (string, nvml.Return) {
	return answerAs(l.file.DriverVersion, l.ready(), same[string])
}

func (l *replayLib) SystemGetNVMLVersion() (string, nvml.Return) {
	return answerAs(l.file.NVMLVersion, l.ready(), same[string])
}

func (l *replayLib) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return answerAs(l.file.CUDADriverVersion, l.ready(), same[int])
}

func (l *replayLib) DeviceGetCount() (int, nvml.Return) {
	return answerAs(l.file.DeviceCount, l.ready(), same[int])
}

// DeviceGetHandleByIndex answers the recorded handle of device i, and
// ERROR_INVALID_ARGUMENT for an index past the recorded devices.
func (l *replayLib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if r := l.ready(); r != nvml.SUCCESS {
		return nil, r
	}
	if i < 0 || i >= len(l.devices) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if r := ret(l.devices[i].rec.Handle); r != nvml.SUCCESS {
		return nil, r
	}
	return l.devices[i], nvml.SUCCESS
}

// DeviceGetHandleByUUID finds the device whose recorded UUID is uuid.
func (l *replayLib) DeviceGetHandleByUUID(uuid string) (nvml.Device, nvml.Return) {
	return l.find(func(d *ReplayDevice) bool { return d.UUID.Return == "" && d.UUID.Value == uuid })
}

// DeviceGetHandleByPciBusId finds the device whose recorded bus id is id,
// in NVML's or the sysfs form.
func (l *replayLib) DeviceGetHandleByPciBusId(id string) (nvml.Device, nvml.Return) {
	want, err := pci.Canonical(id)
	if err != nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return l.find(func(d *ReplayDevice) bool {
		got, err := pci.Canonical(d.PCI.Value.BusID)
		return d.PCI.Return == "" && err == nil && got == want
	})
}

func (l *replayLib) find(match func(*ReplayDevice) bool) (nvml.Device, nvml.Return) {
	if r := l.ready(); r != nvml.SUCCESS {
		return nil, r
	}
	for _, d := range l.devices {
		if match(d.rec) {
			if r := ret(d.rec.Handle); r != nvml.SUCCESS {
				return nil, r
			}
			return d, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// The Interface-level forms of the replayed device calls ask the device, as
// go-nvml's own library does.

func (l *replayLib) DeviceGetPciInfo(d nvml.Device) (nvml.PciInfo, nvml.Return) {
	if d == nil {
		return nvml.PciInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetPciInfo()
}

func (l *replayLib) DeviceGetUUID(d nvml.Device) (string, nvml.Return) {
	if d == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetUUID()
}

func (l *replayLib) DeviceGetName(d nvml.Device) (string, nvml.Return) {
	if d == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetName()
}

func (l *replayLib) DeviceGetMinorNumber(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetMinorNumber()
}

func (l *replayLib) DeviceGetIndex(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetIndex()
}

func (l *replayLib) DeviceGetNumaNodeId(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNumaNodeId()
}

func (l *replayLib) DeviceGetCpuAffinity(d nvml.Device, numCPUs int) ([]uint, nvml.Return) {
	if d == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetCpuAffinity(numCPUs)
}

func (l *replayLib) DeviceGetCurrPcieLinkGeneration(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetCurrPcieLinkGeneration()
}

func (l *replayLib) DeviceGetMaxPcieLinkGeneration(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetMaxPcieLinkGeneration()
}

func (l *replayLib) DeviceGetCurrPcieLinkWidth(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetCurrPcieLinkWidth()
}

func (l *replayLib) DeviceGetMaxPcieLinkWidth(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetMaxPcieLinkWidth()
}

func (l *replayLib) DeviceGetNvLinkState(d nvml.Device, link int) (nvml.EnableState, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkState(link)
}

func (l *replayLib) DeviceGetNvLinkVersion(d nvml.Device, link int) (uint32, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkVersion(link)
}

func (l *replayLib) DeviceGetNvLinkRemotePciInfo(d nvml.Device, link int) (nvml.PciInfo, nvml.Return) {
	if d == nil {
		return nvml.PciInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkRemotePciInfo(link)
}

func (l *replayLib) DeviceGetNvLinkRemoteDeviceType(d nvml.Device, link int) (nvml.IntNvLinkDeviceType, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkRemoteDeviceType(link)
}

func (l *replayLib) DeviceGetNvLinkErrorCounter(d nvml.Device, link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkErrorCounter(link, c)
}

func (l *replayLib) DeviceGetPersistenceMode(d nvml.Device) (nvml.EnableState, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetPersistenceMode()
}

func (l *replayLib) DeviceGetTotalEccErrors(d nvml.Device, t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetTotalEccErrors(t, c)
}

func (l *replayLib) DeviceGetRemappedRows(d nvml.Device) (int, int, bool, bool, nvml.Return) {
	if d == nil {
		return 0, 0, false, false, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetRemappedRows()
}

func (l *replayLib) DeviceGetRetiredPages(d nvml.Device, cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
	if d == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetRetiredPages(cause)
}

func (l *replayLib) DeviceGetRetiredPagesPendingStatus(d nvml.Device) (nvml.EnableState, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetRetiredPagesPendingStatus()
}

func (l *replayLib) DeviceGetGpuFabricInfo(d nvml.Device) (nvml.GpuFabricInfo, nvml.Return) {
	if d == nil {
		return nvml.GpuFabricInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetGpuFabricInfo()
}

func (l *replayLib) DeviceGetPcieReplayCounter(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetPcieReplayCounter()
}

func (l *replayLib) DeviceGetFieldValues(d nvml.Device, values []nvml.FieldValue) nvml.Return {
	if d == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetFieldValues(values)
}

func (l *replayLib) DeviceGetGpuFabricInfo_v4(d nvml.Device) (nvml.GpuFabricInfo_v4, nvml.Return) {
	if d == nil {
		return nvml.GpuFabricInfo_v4{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetGpuFabricInfo_v4()
}

func (l *replayLib) DeviceGetPlatformInfo(d nvml.Device) (nvml.PlatformInfo, nvml.Return) {
	if d == nil {
		return nvml.PlatformInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetPlatformInfo()
}

func (l *replayLib) DeviceGetComputeRunningProcesses(d nvml.Device) ([]nvml.ProcessInfo, nvml.Return) {
	if d == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetComputeRunningProcesses()
}

func (l *replayLib) DeviceGetGraphicsRunningProcesses(d nvml.Device) ([]nvml.ProcessInfo, nvml.Return) {
	if d == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetGraphicsRunningProcesses()
}
