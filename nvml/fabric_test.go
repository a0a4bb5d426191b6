package nvml

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"
)

// gb200File is one GB200 GPU as NVML 580 reports it on an NVL72 tray: a
// completed registration in clique 32766 (the value of a published AKS
// walkthrough, frontier.md §3.4) with the healthy mask, and its rack
// position. The mask is written field by field from nvml.h: degraded_bw,
// route_recovery, route_unhealthy and access_timeout_recovery FALSE (2 at
// shifts 0, 2, 4, 6), incorrect_configuration NONE (1 at shift 8),
// partition_assigned TRUE (1 at shift 12), gfm_state CONNECTED (1 at 14).
func gb200File() ReplayFile {
	f := ReplayFile{Version: ReplayVersion, DriverVersion: ok("580.95.05"), NVMLVersion: ok("13.580.95.05"),
		CUDADriverVersion: ok(13000), DeviceCount: ok(1)}
	const healthy = 2<<0 | 2<<2 | 2<<4 | 2<<6 | 1<<8 | 1<<12 | 1<<14
	d := ReplayDevice{
		PCI:  ok(ReplayPCI{BusID: "00000008:01:00.0", PCIDeviceID: 0x294110de}),
		UUID: ok("GPU-gb200000-0000-0000-0000-000000000000"), Name: ok("NVIDIA GB200"),
		Minor: ok(0), NUMANode: ok(2), CPUAffinity: ok([]uint64{0xff}),
		PCIeGen: ok(5), PCIeMaxGen: ok(5), PCIeWidth: ok(16), PCIeMaxWidth: ok(16),
		Fabric: &Answer[ReplayFabric]{Value: ReplayFabric{State: 3, Status: 0,
			ClusterUUID: "9277d399-0674-44a9-b64e-d85bb19ce2b0", CliqueID: 32766,
			HealthMask: healthy, HealthSummary: 1}},
		Platform: &Answer[ReplayPlatform]{Value: ReplayPlatform{IBGUID: "0102030405060708",
			ChassisSerial: "1821224000123", Slot: 7, Tray: 4, Host: 0, PeerType: 2, Module: 1}},
	}
	f.Devices = []ReplayDevice{d}
	return f
}

func TestFabricReplay(t *testing.T) {
	f := gb200File()
	res := Read(NewReplay(f))
	if !res.Available || len(res.GPUs) != 1 {
		t.Fatalf("Read = %+v", res)
	}
	g := res.GPUs[0]
	mask := uint32(0xaa | 1<<8 | 1<<12 | 1<<14)
	want := &Fabric{State: 3, Status: intp(0), ClusterUUID: "9277d399-0674-44a9-b64e-d85bb19ce2b0",
		CliqueID: 32766, HealthMask: &mask, HealthSummary: intp(1)}
	if d := cmp.Diff(want, g.Fabric); d != "" {
		t.Errorf("Fabric (-want +got):\n%s", d)
	}
	if g.Health.FabricState == nil || *g.Health.FabricState != 3 || g.Health.FabricStatus == nil || *g.Health.FabricStatus != 0 {
		t.Errorf("Health fabric = %v, %v; want 3, 0", g.Health.FabricState, g.Health.FabricStatus)
	}
	wantP := &Platform{IBGUID: "0102030405060708", ChassisSerial: "1821224000123", Slot: 7, Tray: 4, PeerType: 2, Module: 1}
	if d := cmp.Diff(wantP, g.Platform); d != "" {
		t.Errorf("Platform (-want +got):\n%s", d)
	}
	// ForScrape reads the fabric (health) but not the platform (static).
	if s := Read(NewReplay(f), ForScrape()); s.GPUs[0].Fabric == nil || s.GPUs[0].Platform != nil {
		t.Errorf("ForScrape: Fabric %v, Platform %v; want set, nil", s.GPUs[0].Fabric, s.GPUs[0].Platform)
	}
	// Record gives the file back, also through JSON.
	got, err := Record(NewReplay(f))
	if err != nil {
		t.Fatal(err)
	}
	rd := got.Devices[0]
	if d := cmp.Diff(f.Devices[0].Fabric, rd.Fabric); d != "" {
		t.Errorf("Record fabric (-f +got):\n%s", d)
	}
	if d := cmp.Diff(f.Devices[0].Platform, rd.Platform); d != "" {
		t.Errorf("Record platform (-f +got):\n%s", d)
	}
	data, _ := json.Marshal(got)
	if _, err := decodeReplay(data); err != nil {
		t.Errorf("decodeReplay(Record): %v", err)
	}
}

// A registration still in progress has no status yet, and an all-zero
// cluster UUID (a single-node NVSwitch system) is "".
func TestFabricInProgress(t *testing.T) {
	f := gb200File()
	f.Devices[0].Fabric.Value = ReplayFabric{State: 2, Status: 1}
	g := Read(NewReplay(f)).GPUs[0]
	if g.Fabric == nil || g.Fabric.State != 2 || g.Fabric.Status != nil || g.Fabric.ClusterUUID != "" {
		t.Errorf("Fabric = %+v; want state 2, no status, no cluster", g.Fabric)
	}
	f.Devices[0].Fabric.Value = ReplayFabric{State: 0}
	if g := Read(NewReplay(f)).GPUs[0]; g.Fabric != nil || g.Health.FabricState != nil {
		t.Errorf("NOT_SUPPORTED state: Fabric %+v, FabricState %v; want nil", g.Fabric, g.Health.FabricState)
	}
}

// A driver without nvmlDeviceGetGpuFabricInfo_v4 or GetPlatformInfo is
// asked the v1 call only: calling a missing symbol through go-nvml kills
// the process.
func TestFabricOlderDriver(t *testing.T) {
	lib, dev := mockLib()
	lib.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error { return nvml.ERROR_NOT_FOUND }}
	}
	dev.GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		t.Error("GetGpuFabricInfo_v4 called on a driver without it")
		return nvml.GpuFabricInfo_v4{}, nvml.ERROR_UNKNOWN
	}
	dev.GetPlatformInfoFunc = func() (nvml.PlatformInfo, nvml.Return) {
		t.Error("GetPlatformInfo called on a driver without it")
		return nvml.PlatformInfo{}, nvml.ERROR_UNKNOWN
	}
	dev.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
		info := nvml.GpuFabricInfo{State: 3, Status: 0, CliqueId: 5}
		info.ClusterUuid[15] = 1
		return info, nvml.SUCCESS
	}
	g := Read(lib).GPUs[0]
	want := &Fabric{State: 3, Status: intp(0), ClusterUUID: "00000000-0000-0000-0000-000000000001", CliqueID: 5}
	if d := cmp.Diff(want, g.Fabric); d != "" {
		t.Errorf("Fabric (-want +got):\n%s", d)
	}
	if g.Platform != nil {
		t.Errorf("Platform = %+v; want nil", g.Platform)
	}
}

func TestFabricReplayBounds(t *testing.T) {
	for name, edit := range map[string]func(*ReplayDevice){
		"cluster uuid":   func(d *ReplayDevice) { d.Fabric.Value.ClusterUUID = "not-a-uuid" },
		"chassis serial": func(d *ReplayDevice) { d.Platform.Value.ChassisSerial = "bad\x07serial" },
		"ib guid":        func(d *ReplayDevice) { d.Platform.Value.IBGUID = "zz" },
		"slot":           func(d *ReplayDevice) { d.Platform.Value.Slot = 256 },
	} {
		f := gb200File()
		edit(&f.Devices[0])
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeReplay(data); err == nil || !strings.Contains(err.Error(), "devices[0]") {
			t.Errorf("%s: decodeReplay = %v; want an error naming devices[0]", name, err)
		}
	}
}
