package nvml

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestReadReplay(t *testing.T) {
	for _, tc := range []struct {
		name string
		file ReplayFile
		want Result
	}{
		// NVSwitch and GPU peers, a link down, CPUs past 64, a NUMA node.
		{"hgx", hgxFile(), hgxWant()},
		// NOT_SUPPORTED is silent, other failures warn, lost GPUs stop.
		{"failures", failuresFile(), failuresWant()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Read(NewReplay(tc.file))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lib     nvml.Interface
		is      []error
		errText string
		want    Result // without Err
	}{
		{
			// A node without the driver: Init says so and nothing else is asked.
			name:    "library not found",
			lib:     NewReplay(libraryNotFoundFile()),
			is:      []error{ErrLibraryNotFound, nvml.ERROR_LIBRARY_NOT_FOUND},
			errText: "NVML library not found: Init: ERROR_LIBRARY_NOT_FOUND",
		},
		{
			// Open's answer for a root without nvml.json.
			name:    "no source",
			lib:     nil,
			is:      []error{ErrLibraryNotFound},
			errText: "NVML library not found: no NVML source",
		},
		{
			name:    "count fails",
			lib:     NewReplay(countFailsFile()),
			is:      []error{ErrUnavailable, nvml.ERROR_NO_PERMISSION},
			errText: "NVML unavailable: DeviceGetCount: ERROR_NO_PERMISSION",
			want:    Result{DriverVersion: "580.159.04", NVMLVersion: "13.580.159.04", CUDADriverVersion: 13000},
		},
		{
			name:    "driver not loaded",
			lib:     NewReplay(ReplayFile{Version: ReplayVersion, Init: "ERROR_DRIVER_NOT_LOADED"}),
			is:      []error{ErrUnavailable, nvml.ERROR_DRIVER_NOT_LOADED},
			errText: "NVML unavailable: Init: ERROR_DRIVER_NOT_LOADED",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Read(tc.lib)
			for _, target := range tc.is {
				if !errors.Is(got.Err, target) {
					t.Errorf("Err = %v, want it to wrap %v", got.Err, target)
				}
			}
			if got.Err == nil || got.Err.Error() != tc.errText {
				t.Errorf("Err = %v, want %q", got.Err, tc.errText)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Result{}, "Err")); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadInitShutdown checks that Init failure stops everything (live
// go-nvml would crash on a call into the missing library) and that a
// successful Init is paired with one Shutdown.
func TestReadInitShutdown(t *testing.T) {
	lib, _ := mockLib()
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	Read(lib)
	if n := len(lib.ShutdownCalls()) + len(lib.DeviceGetCountCalls()) + len(lib.SystemGetDriverVersionCalls()); n != 0 {
		t.Errorf("after a failed Init, Read made %d more calls, want 0", n)
	}

	lib, _ = mockLib()
	lib.ShutdownFunc = func() nvml.Return { return nvml.ERROR_UNKNOWN }
	got := Read(lib)
	if len(lib.InitCalls()) != 1 || len(lib.ShutdownCalls()) != 1 {
		t.Errorf("Init called %d times, Shutdown %d, want 1 and 1", len(lib.InitCalls()), len(lib.ShutdownCalls()))
	}
	if !got.Available || !contains(got.Warnings, "Shutdown: ERROR_UNKNOWN") {
		t.Errorf("Read = %+v, want available with a Shutdown warning", got)
	}
}

func TestReadGPUFailures(t *testing.T) {
	healthy := GPU{Index: 0, BusID: "0000:3b:00.0", State: StateOK, UUID: "GPU-0", Name: "NVIDIA H100"}
	for _, tc := range []struct {
		name     string
		setup    func(*mock.Device)
		want     GPU
		warnings []string
	}{
		{
			// Every optional call NOT_SUPPORTED: no warning, nothing known.
			name:  "all not supported",
			setup: func(*mock.Device) {},
			want:  healthy,
		},
		{
			// A required call failing marks the GPU, reading goes on.
			name: "uuid fails",
			setup: func(d *mock.Device) {
				d.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
				d.GetMinorNumberFunc = func() (int, nvml.Return) { return 3, nvml.SUCCESS }
			},
			want: GPU{Index: 0, BusID: "0000:3b:00.0", State: StateError, Err: "GetUUID: ERROR_UNKNOWN",
				Name: "NVIDIA H100", Minor: intp(3)},
			warnings: []string{"GPU 0 (0000:3b:00.0): GetUUID: ERROR_UNKNOWN"},
		},
		{
			// NOT_SUPPORTED is an error for a call that identifies the GPU.
			name: "pci info not supported",
			setup: func(d *mock.Device) {
				d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED }
			},
			want:     GPU{Index: 0, State: StateError, Err: "GetPciInfo: ERROR_NOT_SUPPORTED", UUID: "GPU-0", Name: "NVIDIA H100"},
			warnings: []string{"GPU 0: GetPciInfo: ERROR_NOT_SUPPORTED"},
		},
		{
			name: "unreadable bus id",
			setup: func(d *mock.Device) {
				d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
					var info nvml.PciInfo
					putCString(info.BusId[:], "garbage")
					return info, nvml.SUCCESS
				}
			},
			want: GPU{Index: 0, State: StateError, Err: `GetPciInfo: unreadable bus id "garbage"`,
				UUID: "GPU-0", Name: "NVIDIA H100"},
			warnings: []string{`GPU 0: GetPciInfo: unreadable bus id "garbage"`},
		},
		{
			// Lost in the middle of an active link: nothing is asked after.
			name: "lost mid-read",
			setup: func(d *mock.Device) {
				d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
				d.GetNvLinkVersionFunc = func(n int) (uint32, nvml.Return) {
					if n == 1 {
						return 0, nvml.ERROR_GPU_IS_LOST
					}
					return 4, nvml.SUCCESS
				}
			},
			want: GPU{Index: 0, BusID: "0000:3b:00.0", State: StateLost, Err: "GetNvLinkVersion(1): ERROR_GPU_IS_LOST",
				UUID: "GPU-0", Name: "NVIDIA H100", NVLinkVisible: true,
				NVLinks: []NVLink{{Link: 0, Active: true, Version: 4}}},
			warnings: []string{"GPU 0 (0000:3b:00.0): GetNvLinkVersion(1): ERROR_GPU_IS_LOST"},
		},
		{
			// Other link failures warn and the loop goes on; version and the
			// far end are not asked for a link that is down.
			name: "link errors",
			setup: func(d *mock.Device) {
				d.GetNvLinkStateFunc = func(n int) (nvml.EnableState, nvml.Return) {
					switch n {
					case 0:
						return 0, nvml.ERROR_UNKNOWN
					case 1:
						return nvml.FEATURE_DISABLED, nvml.SUCCESS
					case 2:
						return nvml.FEATURE_ENABLED, nvml.SUCCESS
					}
					return 0, nvml.ERROR_INVALID_ARGUMENT
				}
				d.GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) {
					var info nvml.PciInfo
					putCString(info.BusId[:], "not a bus id")
					return info, nvml.SUCCESS
				}
			},
			want: GPU{Index: 0, BusID: "0000:3b:00.0", State: StateOK, UUID: "GPU-0", Name: "NVIDIA H100",
				NVLinkVisible: true, NVLinks: []NVLink{{Link: 1}, {Link: 2, Active: true}}},
			warnings: []string{
				"GPU 0 (0000:3b:00.0): GetNvLinkState(0): ERROR_UNKNOWN",
				`GPU 0 (0000:3b:00.0): GetNvLinkRemotePciInfo(2): unreadable bus id "not a bus id"`,
			},
		},
		{
			name: "affinity and numa",
			setup: func(d *mock.Device) {
				d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
				d.GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { return []uint{0b101, 0, 1 << 63}, nvml.SUCCESS }
			},
			want: GPU{Index: 0, BusID: "0000:3b:00.0", State: StateOK, UUID: "GPU-0", Name: "NVIDIA H100",
				NUMANode: intp(0), CPUAffinity: []int{0, 2, 191}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib, dev := mockLib()
			tc.setup(dev)
			got := Read(lib)
			if diff := cmp.Diff([]GPU{tc.want}, got.GPUs); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, got.Warnings); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadNVLinkLoop(t *testing.T) {
	t.Run("stops at invalid argument", func(t *testing.T) {
		lib, dev := mockLib()
		dev.GetNvLinkStateFunc = func(n int) (nvml.EnableState, nvml.Return) {
			if n >= 2 {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		Read(lib)
		if n := len(dev.GetNvLinkStateCalls()); n != 3 {
			t.Errorf("GetNvLinkState called %d times, want 3", n)
		}
	})
	t.Run("asks every link go-nvml knows", func(t *testing.T) {
		lib, dev := mockLib()
		got := Read(lib)
		if n := len(dev.GetNvLinkStateCalls()); n != nvml.NVLINK_MAX_LINKS {
			t.Errorf("GetNvLinkState called %d times, want %d", n, nvml.NVLINK_MAX_LINKS)
		}
		if got.GPUs[0].NVLinkVisible || got.GPUs[0].NVLinks != nil {
			t.Errorf("every link NOT_SUPPORTED: got visible %v, links %v", got.GPUs[0].NVLinkVisible, got.GPUs[0].NVLinks)
		}
	})
}

func TestReadAsksEnoughCPUs(t *testing.T) {
	lib, dev := mockLib()
	Read(lib)
	calls := dev.GetCpuAffinityCalls()
	if len(calls) != 1 {
		t.Fatalf("GetCpuAffinity called %d times, want 1", len(calls))
	}
	if n := calls[0].N; n < 1024 || n < runtime.NumCPU() {
		t.Errorf("GetCpuAffinity(%d), want at least max(1024, NumCPU=%d)", n, runtime.NumCPU())
	}
}

// TestReadConcurrent reads one replay from several goroutines, for -race.
func TestReadConcurrent(t *testing.T) {
	lib := NewReplay(hgxFile())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := Read(lib); !got.Available || len(got.GPUs) != 2 {
				t.Errorf("Read = %+v", got)
			}
		})
	}
	wg.Wait()
}

func TestCPUsOf(t *testing.T) {
	for _, tc := range []struct {
		words []uint
		want  []int
	}{
		{nil, nil},
		{[]uint{0, 0}, nil},
		{[]uint{0xffff}, span(0, 15)},
		{[]uint{1 << 63, 1}, []int{63, 64}},
	} {
		if diff := cmp.Diff(tc.want, cpusOf(tc.words)); diff != "" {
			t.Errorf("cpusOf(%#x) (-want +got):\n%s", tc.words, diff)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}
