package nvml

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

// replayed lists the methods NewReplay answers from the file (or, for
// Init, Shutdown, ErrorString, Extensions and GetIndex, by itself).
var replayed = map[string]bool{
	"Init": true, "InitWithFlags": true, "Shutdown": true, "ErrorString": true, "Extensions": true,
	"SystemGetDriverVersion": true, "SystemGetNVMLVersion": true, "SystemGetCudaDriverVersion": true,
	"DeviceGetCount": true, "DeviceGetHandleByIndex": true, "DeviceGetHandleByUUID": true,
	"DeviceGetHandleByPciBusId": true,
	// Events (replay_events.go).
	"EventSetCreate": true, "EventSetWait": true, "EventSetFree": true,
	"RegisterEvents": true, "DeviceRegisterEvents": true,
	"GetSupportedEventTypes": true, "DeviceGetSupportedEventTypes": true,
}

var replayedDevice = []string{
	"GetPciInfo", "GetUUID", "GetName", "GetMinorNumber", "GetIndex", "GetNumaNodeId", "GetCpuAffinity",
	"GetCurrPcieLinkGeneration", "GetMaxPcieLinkGeneration", "GetCurrPcieLinkWidth", "GetMaxPcieLinkWidth",
	"GetNvLinkState", "GetNvLinkVersion", "GetNvLinkRemotePciInfo", "GetNvLinkRemoteDeviceType",
	"GetPersistenceMode", "GetTotalEccErrors", "GetRemappedRows", "GetRetiredPages",
	"GetRetiredPagesPendingStatus", "GetGpuFabricInfo", "GetFieldValues", "GetPcieReplayCounter",
	"GetNvLinkErrorCounter", "GetGpuFabricInfo_v4", "GetPlatformInfo",
	"GetComputeRunningProcesses", "GetGraphicsRunningProcesses",
}

func init() {
	for _, m := range replayedDevice {
		replayed[m] = true
		replayed["Device"+m] = true
	}
}

// callAll calls every method of iface on v with zero arguments (dev for a
// Device argument) and returns, for each method not in skip, the Returns
// that were not ERROR_NOT_SUPPORTED and the other results that were not
// zero values. A panic fails the test.
func callAll(t *testing.T, iface reflect.Type, v any, dev nvml.Device, skip map[string]bool) (calls int, bad []string) {
	t.Helper()
	rv := reflect.ValueOf(v)
	deviceType := reflect.TypeFor[nvml.Device]()
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		ft := m.Type
		in := make([]reflect.Value, 0, ft.NumIn())
		for j := range ft.NumIn() {
			if ft.IsVariadic() && j == ft.NumIn()-1 {
				break
			}
			if ft.In(j) == deviceType && dev != nil {
				in = append(in, reflect.ValueOf(dev))
				continue
			}
			in = append(in, reflect.Zero(ft.In(j)))
		}
		var out []reflect.Value
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", m.Name, p)
				}
			}()
			out = rv.MethodByName(m.Name).Call(in)
		}()
		calls++
		if skip[m.Name] {
			continue
		}
		for k, o := range out {
			if r, ok := o.Interface().(nvml.Return); ok {
				if r != nvml.ERROR_NOT_SUPPORTED {
					bad = append(bad, m.Name+" = "+returnName(r))
				}
			} else if !o.IsZero() {
				bad = append(bad, fmt.Sprintf("%s result %d = %v, not the zero value", m.Name, k, o))
			}
		}
	}
	return calls, bad
}

// TestReplayUnrecordedCalls calls every method of go-nvml's Interface and
// Device on a replay: none may panic, and every call the file does not
// record answers ERROR_NOT_SUPPORTED.
func TestReplayUnrecordedCalls(t *testing.T) {
	lib := NewReplay(hgxFile())
	if r := lib.Init(); r != nvml.SUCCESS {
		t.Fatalf("Init = %v", r)
	}
	dev, r := lib.DeviceGetHandleByIndex(0)
	if r != nvml.SUCCESS {
		t.Fatalf("DeviceGetHandleByIndex(0) = %v", r)
	}
	set, r := lib.EventSetCreate()
	if r != nvml.SUCCESS {
		t.Fatalf("EventSetCreate = %v", r)
	}
	for _, tc := range []struct {
		name  string
		iface reflect.Type
		v     any
		min   int
		skip  map[string]bool
	}{
		{"Interface", reflect.TypeFor[nvml.Interface](), lib, 400, replayed},
		{"Device", reflect.TypeFor[nvml.Device](), dev, 270, replayed},
		// Wait and Free are replayed (replay_events.go).
		{"EventSet", reflect.TypeFor[nvml.EventSet](), set, 8, map[string]bool{"Wait": true, "Free": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, bad := callAll(t, tc.iface, tc.v, dev, tc.skip)
			if calls < tc.min {
				t.Errorf("called %d methods, want at least %d", calls, tc.min)
			}
			if len(bad) > 0 {
				t.Errorf("unrecorded calls answered other than ERROR_NOT_SUPPORTED:\n%s", strings.Join(bad, "\n"))
			}
		})
	}
	if err := lib.Extensions().LookupSymbol("nvmlDeviceGetGpuFabricInfoV"); err == nil {
		t.Error("Extensions().LookupSymbol found a symbol in a replay")
	}
}

// TestReplayForms checks that the Interface-level DeviceGetXxx(dev, ...)
// forms answer what the device's own methods answer, on every recorded
// value and failure.
func TestReplayForms(t *testing.T) {
	for name, f := range map[string]ReplayFile{"hgx": hgxFile(), "failures": failuresFile()} {
		t.Run(name, func(t *testing.T) {
			lib := NewReplay(f)
			lib.Init()
			n, _ := lib.DeviceGetCount()
			for i := range n {
				dev, r := lib.DeviceGetHandleByIndex(i)
				if r != nvml.SUCCESS {
					continue
				}
				for _, m := range replayedDevice {
					args := []reflect.Value{}
					switch m {
					case "GetCpuAffinity":
						args = append(args, reflect.ValueOf(64))
					case "GetNvLinkState", "GetNvLinkVersion", "GetNvLinkRemotePciInfo", "GetNvLinkRemoteDeviceType":
						args = append(args, reflect.ValueOf(1))
					case "GetNvLinkErrorCounter":
						args = append(args, reflect.ValueOf(1), reflect.ValueOf(nvml.NVLINK_ERROR_DL_REPLAY))
					case "GetTotalEccErrors":
						args = append(args, reflect.ValueOf(nvml.MEMORY_ERROR_TYPE_UNCORRECTED), reflect.ValueOf(nvml.AGGREGATE_ECC))
					case "GetRetiredPages":
						args = append(args, reflect.ValueOf(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR))
					case "GetFieldValues":
						args = append(args, reflect.ValueOf([]nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}))
					}
					want := reflect.ValueOf(dev).MethodByName(m).Call(args)
					got := reflect.ValueOf(lib).MethodByName("Device" + m).Call(append([]reflect.Value{reflect.ValueOf(dev)}, args...))
					if !reflect.DeepEqual(values(want), values(got)) {
						t.Errorf("device %d: Device%s = %v, %s = %v", i, m, values(got), m, values(want))
					}
				}
			}
		})
	}
}

func values(vs []reflect.Value) []any {
	var out []any
	for _, v := range vs {
		out = append(out, v.Interface())
	}
	return out
}

func TestReplayDevice(t *testing.T) {
	lib := NewReplay(hgxFile())
	lib.Init()
	dev, _ := lib.DeviceGetHandleByIndex(1)

	info, r := dev.GetPciInfo()
	want := nvml.PciInfo{Domain: 0, Bus: 0x9a, Device: 0, PciDeviceId: 0x233010de, PciSubSystemId: 0x16c110de}
	putCString(want.BusId[:], "00000000:9A:00.0")
	putCString(want.BusIdLegacy[:], "0000:9A:00.0")
	if r != nvml.SUCCESS || info != want {
		t.Errorf("GetPciInfo = %+v, %v; want %+v", info, r, want)
	}
	if i, r := dev.GetIndex(); i != 1 || r != nvml.SUCCESS {
		t.Errorf("GetIndex = %d, %v; want 1", i, r)
	}
	words, r := dev.GetCpuAffinity(16)
	if diff := cmp.Diff([]uint{0xff00000000000000, 0x0000ffffffffffff, 0xffffff0000000000, 0x00000000ffffffff}, words); r != nvml.SUCCESS || diff != "" {
		t.Errorf("GetCpuAffinity = %v (-want +got):\n%s", r, diff)
	}
	if typ, r := dev.GetNvLinkRemoteDeviceType(0); typ != nvml.NVLINK_DEVICE_TYPE_GPU || r != nvml.SUCCESS {
		t.Errorf("GetNvLinkRemoteDeviceType(0) = %v, %v", typ, r)
	}

	gpu0, _ := lib.DeviceGetHandleByIndex(0)
	for _, tc := range []struct {
		link int
		want nvml.Return
	}{
		{2, nvml.SUCCESS},                 // recorded, disabled
		{4, nvml.ERROR_INVALID_ARGUMENT},  // past the last recorded link
		{-1, nvml.ERROR_INVALID_ARGUMENT}, // never a link
	} {
		if _, r := gpu0.GetNvLinkState(tc.link); r != tc.want {
			t.Errorf("GetNvLinkState(%d) = %v, want %v", tc.link, r, tc.want)
		}
	}
	gap := hgxFile()
	gap.Devices[0].NVLinks = append(gap.Devices[0].NVLinks[:1], gap.Devices[0].NVLinks[2:]...)
	lib = NewReplay(gap)
	lib.Init()
	gpu0, _ = lib.DeviceGetHandleByIndex(0)
	if _, r := gpu0.GetNvLinkState(1); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetNvLinkState of a gap = %v, want ERROR_NOT_SUPPORTED", r)
	}
}

func TestReplayHandles(t *testing.T) {
	lib := NewReplay(failuresFile())
	lib.Init()
	for _, tc := range []struct {
		name  string
		get   func() (nvml.Device, nvml.Return)
		index int
		want  nvml.Return
	}{
		{"index", func() (nvml.Device, nvml.Return) { return lib.DeviceGetHandleByIndex(2) }, 2, nvml.SUCCESS},
		{"lost", func() (nvml.Device, nvml.Return) { return lib.DeviceGetHandleByIndex(1) }, 0, nvml.ERROR_GPU_IS_LOST},
		{"past the end", func() (nvml.Device, nvml.Return) { return lib.DeviceGetHandleByIndex(3) }, 0, nvml.ERROR_INVALID_ARGUMENT},
		{"uuid", func() (nvml.Device, nvml.Return) {
			return lib.DeviceGetHandleByUUID("GPU-aaaaaaaa-0000-0000-0000-000000000002")
		}, 2, nvml.SUCCESS},
		{"unknown uuid", func() (nvml.Device, nvml.Return) { return lib.DeviceGetHandleByUUID("GPU-x") }, 0, nvml.ERROR_NOT_FOUND},
		{"nvml bus id", func() (nvml.Device, nvml.Return) { return lib.DeviceGetHandleByPciBusId("00000000:1A:00.0") }, 2, nvml.SUCCESS},
		{"sysfs bus id", func() (nvml.Device, nvml.Return) { return lib.DeviceGetHandleByPciBusId("0000:00:06.0") }, 0, nvml.SUCCESS},
		{"bad bus id", func() (nvml.Device, nvml.Return) { return lib.DeviceGetHandleByPciBusId("x") }, 0, nvml.ERROR_INVALID_ARGUMENT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, r := tc.get()
			if r != tc.want {
				t.Fatalf("got %v, want %v", r, tc.want)
			}
			if r != nvml.SUCCESS {
				if dev != nil {
					t.Errorf("failed lookup returned device %v", dev)
				}
				return
			}
			if i, _ := dev.GetIndex(); i != tc.index {
				t.Errorf("device index %d, want %d", i, tc.index)
			}
		})
	}
}

// TestReplayLifecycle checks NVML's reference-counted Init/Shutdown.
func TestReplayLifecycle(t *testing.T) {
	lib := NewReplay(hgxFile())
	if _, r := lib.DeviceGetCount(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("before Init: DeviceGetCount = %v, want ERROR_UNINITIALIZED", r)
	}
	lib.Init()
	lib.Init()
	dev, _ := lib.DeviceGetHandleByIndex(0)
	lib.Shutdown()
	if _, r := dev.GetUUID(); r != nvml.SUCCESS {
		t.Errorf("after one of two Shutdowns: GetUUID = %v, want SUCCESS", r)
	}
	lib.Shutdown()
	if _, r := dev.GetUUID(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("after Shutdown: GetUUID = %v, want ERROR_UNINITIALIZED", r)
	}
	if r := lib.Shutdown(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("third Shutdown = %v, want ERROR_UNINITIALIZED", r)
	}

	lib = NewReplay(libraryNotFoundFile())
	if r := lib.Init(); r != nvml.ERROR_LIBRARY_NOT_FOUND {
		t.Errorf("Init = %v, want ERROR_LIBRARY_NOT_FOUND", r)
	}
	if _, r := lib.SystemGetDriverVersion(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("after a failed Init: SystemGetDriverVersion = %v, want ERROR_UNINITIALIZED", r)
	}
	if s := lib.ErrorString(nvml.ERROR_NOT_SUPPORTED); s != "Not Supported" {
		t.Errorf("ErrorString = %q, want NVML's text", s)
	}
}

// TestReplayUnknownReturn: NewReplay takes any file; a name it does not
// know replays as ERROR_UNKNOWN.
func TestReplayUnknownReturn(t *testing.T) {
	f := hgxFile()
	f.Devices[0].UUID = failed[string]("ERROR_FROM_THE_FUTURE")
	lib := NewReplay(f)
	lib.Init()
	dev, _ := lib.DeviceGetHandleByIndex(0)
	if _, r := dev.GetUUID(); r != nvml.ERROR_UNKNOWN {
		t.Errorf("GetUUID = %v, want ERROR_UNKNOWN", r)
	}
}

func TestLoadReplay(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, err := json.MarshalIndent(hgxFile(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	lib, err := LoadReplay(write("good.json", good))
	if err != nil {
		t.Fatalf("LoadReplay: %v", err)
	}
	if diff := cmp.Diff(hgxWant(), Read(lib)); diff != "" {
		t.Errorf("Read(LoadReplay) (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name, data, wantErr string
	}{
		{"version", `{"version": 2}`, "unsupported version 2"},
		{"no version", `{}`, "unsupported version 0"},
		// A newer file fails on a field this build does not know: the
		// version is what it says.
		{"version with new field", `{"version": 2, "chassis": {}}`, "unsupported version 2"},
		{"trailing data", `{"version": 1, "device_count": {"value": 0}} x`, "invalid character 'x' after top-level value"},
		{"not json", `nvml`, "invalid character"},
		{"unknown field", `{"version": 1, "device_count": {"value": 0}, "numa": {}}`, `unknown field "numa"`},
		{"unknown return", `{"version": 1, "init": "ERROR_BOGUS"}`, `init: unknown NVML return "ERROR_BOGUS"`},
		{"count mismatch", `{"version": 1, "device_count": {"value": 2}, "devices": [{}]}`, "device_count is 2 but 1 devices"},
		{"link twice", `{"version": 1, "device_count": {"value": 1}, "devices": [{"nvlinks": [{"link": 0}, {"link": 0}]}]}`,
			"devices[0].nvlinks[1].link: link 0 is negative or listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(tc.name+".json", []byte(tc.data))
			_, err := LoadReplay(p)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), p) {
				t.Errorf("LoadReplay = %v, want an error naming %s and saying %q", err, p, tc.wantErr)
			}
		})
	}
	if _, err := LoadReplay(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("LoadReplay(missing) = %v, want an error naming the file", err)
	}
}

// TestReplayHealth: the health calls answer the file, a file without them
// answers NOT_SUPPORTED, and Read turns a lost GPU's health answer into
// state lost.
func TestReplayHealth(t *testing.T) {
	lib := NewReplay(hgxFile())
	lib.Init()
	dev, _ := lib.DeviceGetHandleByIndex(1)
	if pages, r := dev.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR); r != nvml.SUCCESS || len(pages) != 2 || pages[0] == pages[1] {
		t.Errorf("GetRetiredPages(DOUBLE_BIT) = %#x, %v; want 2 distinct pages", pages, r)
	}
	if _, r := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("corrected ECC = %v, want NOT_SUPPORTED", r)
	}
	dev0, _ := lib.DeviceGetHandleByIndex(0)
	values := []nvml.FieldValue{{FieldId: nvml.FI_DEV_MEMORY_TEMP}, {FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
	if r := dev0.GetFieldValues(values); r != nvml.SUCCESS ||
		nvml.Return(values[0].NvmlReturn) != nvml.ERROR_NOT_SUPPORTED || nvml.Return(values[1].NvmlReturn) != nvml.SUCCESS ||
		nvml.ValueType(values[1].ValueType) != nvml.VALUE_TYPE_UNSIGNED_INT {
		t.Errorf("GetFieldValues = %v, %+v", r, values)
	}
	if info, r := dev0.GetGpuFabricInfo(); r != nvml.SUCCESS || info.State != nvml.GPU_FABRIC_STATE_COMPLETED {
		t.Errorf("GetGpuFabricInfo = %+v, %v", info, r)
	}

	// A file written before the health calls (and the NVLink error
	// counters): all NOT_SUPPORTED, no warning.
	old := hgxFile()
	for i := range old.Devices {
		d := &old.Devices[i]
		d.Persistence, d.ECCUncorrectedVolatile, d.ECCUncorrectedAggregate = nil, nil, nil
		d.RemappedRows, d.RetiredPages, d.RetiredPagesPending = nil, nil, nil
		d.Fabric, d.RecoveryAction, d.PCIeReplay = nil, nil, nil
		d.XIDs = nil
		for j := range d.NVLinks {
			d.NVLinks[j].Errors = nil
		}
	}
	res := Read(NewReplay(old))
	for _, g := range res.GPUs {
		if !cmp.Equal(g.Health, Health{}) {
			t.Errorf("GPU %d health without health answers = %+v, want all nil", g.Index, g.Health)
		}
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings %q", res.Warnings)
	}

	// A GPU lost at its first health call.
	lost := hgxFile()
	lost.Devices[0].Persistence = failedp[int](gpuIsLost)
	res = Read(NewReplay(lost))
	if g := res.GPUs[0]; g.State != StateLost || g.Err != "GetPersistenceMode: ERROR_GPU_IS_LOST" || g.Health.ECCUncorrectedVolatile != nil {
		t.Errorf("GPU 0 = %s %q %+v, want lost at GetPersistenceMode with nothing read after", g.State, g.Err, g.Health)
	}

	// validate names a bad health Return.
	bad := hgxFile()
	bad.Devices[0].Fabric = failedp[ReplayFabric]("ERROR_BOGUS")
	if err := bad.validate(); err == nil || !strings.Contains(err.Error(), "devices[0].fabric") {
		t.Errorf("validate = %v, want devices[0].fabric named", err)
	}
}
