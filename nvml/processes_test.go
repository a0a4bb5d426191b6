package nvml

import (
	"errors"
	"reflect"
	"testing"
)

// processesFile is two GPUs: GPU 0 runs PIDs 300 (compute and graphics,
// its memory unknown) and 100; GPU 1's compute list answers
// ERROR_NO_PERMISSION and its graphics list is not recorded (a file
// from before the lists were: ERROR_NOT_SUPPORTED).
func processesFile() ReplayFile {
	f := hgxFile()
	f.DeviceCount = ok(2)
	f.Devices = f.Devices[:2]
	f.Devices[1].Handle = ""
	f.Devices[1].PCI = ok(ReplayPCI{BusID: "00000000:2A:00.0", PCIDeviceID: 0x233010de})
	f.Devices[0].ComputeProcesses = okp([]ReplayProcess{{PID: 300, UsedGPUMemory: 1 << 30}, {PID: 100, UsedGPUMemory: 2 << 30}})
	f.Devices[0].GraphicsProcesses = okp([]ReplayProcess{{PID: 300, UsedGPUMemory: valueNotAvailable}})
	f.Devices[1].ComputeProcesses = failedp[[]ReplayProcess]("ERROR_NO_PERMISSION")
	return f
}

func TestReadProcesses(t *testing.T) {
	got, err := ReadProcesses(NewReplay(processesFile()))
	if err != nil {
		t.Fatal(err)
	}
	one, two := uint64(1<<30), uint64(2<<30)
	want := []GPUProcesses{
		{Index: 0, BusID: "0000:18:00.0", Processes: []Process{
			{PID: 100, Kinds: []string{"compute"}, UsedGPUMemory: &two},
			{PID: 300, Kinds: []string{"compute", "graphics"}, UsedGPUMemory: &one},
		}},
		{Index: 1, BusID: "0000:2a:00.0", Unknown: []string{
			"GetComputeRunningProcesses: ERROR_NO_PERMISSION", "GetGraphicsRunningProcesses: ERROR_NOT_SUPPORTED"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadProcesses =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := ReadProcesses(NewReplay(libraryNotFoundFile())); !errors.Is(err, ErrLibraryNotFound) {
		t.Errorf("no driver: %v, want ErrLibraryNotFound", err)
	}
	if _, err := ReadProcesses(nil); !errors.Is(err, ErrLibraryNotFound) {
		t.Errorf("nil lib: %v, want ErrLibraryNotFound", err)
	}
}

// Record keeps the lists and their failures, and leaves out a list that
// answers ERROR_NOT_SUPPORTED (what a missing one replays).
func TestRecordProcesses(t *testing.T) {
	f := processesFile()
	got, err := Record(NewReplay(f))
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range got.Devices {
		if !reflect.DeepEqual(d.ComputeProcesses, f.Devices[i].ComputeProcesses) ||
			!reflect.DeepEqual(d.GraphicsProcesses, f.Devices[i].GraphicsProcesses) {
			t.Errorf("device %d: recorded %+v / %+v, want %+v / %+v", i, d.ComputeProcesses, d.GraphicsProcesses,
				f.Devices[i].ComputeProcesses, f.Devices[i].GraphicsProcesses)
		}
	}
}
