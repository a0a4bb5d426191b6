package nvml

import (
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/pci"
)

// GPUProcesses is one GPU's running processes as NVML lists them
// (GetComputeRunningProcesses, then GetGraphicsRunningProcesses).
type GPUProcesses struct {
	Index int    // NVML index
	BusID string // sysfs form, "0000:18:00.0"; "" when GetPciInfo failed
	// Processes are the listed processes, by PID; a process both lists
	// name is one entry with both kinds.
	Processes []Process
	// Unknown says why the list is not complete: each failed call and its
	// answer ("GetComputeRunningProcesses: ERROR_NO_PERMISSION"); "" when
	// both calls answered. ERROR_NOT_SUPPORTED is said too: "no process"
	// and "NVML did not say" are different answers.
	Unknown []string
}

// Process is one process NVML lists on a GPU.
type Process struct {
	PID uint32
	// Kinds are "compute" and/or "graphics": the lists that name it.
	Kinds []string
	// UsedGPUMemory is in bytes; nil where NVML answers
	// NVML_VALUE_NOT_AVAILABLE.
	UsedGPUMemory *uint64
}

// valueNotAvailable is nvml.h's NVML_VALUE_NOT_AVAILABLE for an unsigned
// long long: (unsigned long long)(-1).
const valueNotAvailable = ^uint64(0)

// ReadProcesses lists every GPU's running processes: Init, for each GPU
// its handle, bus id and both process lists, Shutdown. The error is
// non-nil when NVML cannot be asked at all (nil lib, Init or
// DeviceGetCount failing; it wraps ErrLibraryNotFound or ErrUnavailable);
// a failure of one GPU or call is in that GPU's Unknown. A panicking
// lib is an error naming the panic, not a crash.
func ReadProcesses(lib nvml.Interface) (gpus []GPUProcesses, err error) {
	if lib == nil {
		return nil, fmt.Errorf("%w: no NVML source", ErrLibraryNotFound)
	}
	defer func() {
		if p := recover(); p != nil {
			gpus, err = nil, fmt.Errorf("%w: process lists: %w (panic: %v)", ErrUnavailable, retErr(nvml.ERROR_UNKNOWN), p)
		}
	}()
	if r := lib.Init(); r != nvml.SUCCESS {
		if r == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, fmt.Errorf("%w: Init: %w", ErrLibraryNotFound, retErr(r))
		}
		return nil, fmt.Errorf("%w: Init: %w", ErrUnavailable, retErr(r))
	}
	defer lib.Shutdown()
	n, r := lib.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: DeviceGetCount: %w", ErrUnavailable, retErr(r))
	}
	if n < 0 || n > MaxReplayDevices {
		return nil, fmt.Errorf("%w: DeviceGetCount: %d devices, outside 0..%d", ErrUnavailable, n, MaxReplayDevices)
	}
	for i := range n {
		gpus = append(gpus, readGPUProcesses(lib, i))
	}
	return gpus, nil
}

// readGPUProcesses asks GPU i's handle, bus id and process lists.
func readGPUProcesses(lib nvml.Interface, i int) GPUProcesses {
	g := GPUProcesses{Index: i}
	dev, r := lib.DeviceGetHandleByIndex(i)
	if r != nvml.SUCCESS {
		g.Unknown = append(g.Unknown, "DeviceGetHandleByIndex: "+returnName(r))
		return g
	}
	if info, r := dev.GetPciInfo(); r == nvml.SUCCESS {
		if bus, err := pci.Canonical(cString(info.BusId[:])); err == nil {
			g.BusID = bus
		}
	}
	if g.BusID == "" {
		// Without the bus id the GPU cannot be tied to the node's.
		g.Unknown = append(g.Unknown, "GetPciInfo: "+returnName(r))
		return g
	}
	byPID := map[uint32]int{}
	for _, c := range []struct {
		kind, call string
		get        func() ([]nvml.ProcessInfo, nvml.Return)
	}{
		{"compute", "GetComputeRunningProcesses", dev.GetComputeRunningProcesses},
		{"graphics", "GetGraphicsRunningProcesses", dev.GetGraphicsRunningProcesses},
	} {
		infos, r := c.get()
		if r != nvml.SUCCESS {
			g.Unknown = append(g.Unknown, c.call+": "+returnName(r))
			continue
		}
		for _, p := range infos {
			j, ok := byPID[p.Pid]
			if !ok {
				j = len(g.Processes)
				byPID[p.Pid] = j
				g.Processes = append(g.Processes, Process{PID: p.Pid})
			}
			g.Processes[j].Kinds = append(g.Processes[j].Kinds, c.kind)
			if m := p.UsedGpuMemory; m != valueNotAvailable && g.Processes[j].UsedGPUMemory == nil {
				g.Processes[j].UsedGPUMemory = &m
			}
		}
	}
	sortfn.Sort(g.Processes, func(a, b Process) int { return int(a.PID) - int(b.PID) })
	return g
}
