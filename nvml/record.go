package nvml

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Record asks lib every call nvml.json records and returns the file; it is
// what `gpuaffinity snapshot` writes. Init comes first: when it fails the
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
		for i := range f.DeviceCount.Value {
			f.Devices = append(f.Devices, recordDevice(lib, i))
		}
	}
	if r := lib.Shutdown(); r != nvml.SUCCESS {
		return f, fmt.Errorf("nvml: record: Shutdown: %w", retErr(r))
	}
	return f, nil
}

// recordDevice asks every recorded call of device i.
func recordDevice(lib nvml.Interface, i int) ReplayDevice {
	dev, r := lib.DeviceGetHandleByIndex(i)
	if r != nvml.SUCCESS {
		return ReplayDevice{Handle: returnName(r)}
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
		})
	}
	return d
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
