package nvml

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

// TestReadForScrapeSkips checks that ForScrape makes none of the
// discovery-only calls, even where each would succeed, and still makes
// every call whose answer a scrape renders.
func TestReadForScrapeSkips(t *testing.T) {
	lib, dev := mockLib()
	lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "580.159.04", nvml.SUCCESS }
	lib.SystemGetNVMLVersionFunc = func() (string, nvml.Return) { return "13.580.159.04", nvml.SUCCESS }
	lib.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 13000, nvml.SUCCESS }
	dev.GetMinorNumberFunc = func() (int, nvml.Return) { return 3, nvml.SUCCESS }
	dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 1, nvml.SUCCESS }
	dev.GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { return []uint{0xff}, nvml.SUCCESS }
	dev.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
	dev.GetNvLinkVersionFunc = func(int) (uint32, nvml.Return) { return 4, nvml.SUCCESS }
	dev.GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) {
		var info nvml.PciInfo
		putCString(info.BusId[:], "00000000:05:00.0")
		return info, nvml.SUCCESS
	}
	dev.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
	}
	// What a scrape renders: PCIe, one active and one down link with
	// counters, ECC.
	dev.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 5, nvml.SUCCESS }
	dev.GetMaxPcieLinkWidthFunc = func() (int, nvml.Return) { return 16, nvml.SUCCESS }
	dev.GetNvLinkStateFunc = func(n int) (nvml.EnableState, nvml.Return) {
		switch n {
		case 0:
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		case 1:
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	dev.GetNvLinkErrorCounterFunc = func(n int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		if c == nvml.NVLINK_ERROR_DL_REPLAY {
			return uint64(10 + n), nvml.SUCCESS
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	dev.GetTotalEccErrorsFunc = func(_ nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if c == nvml.AGGREGATE_ECC {
			return 7, nvml.SUCCESS
		}
		return 2, nvml.SUCCESS
	}

	got := Read(lib, ForScrape())

	for call, n := range map[string]int{
		"SystemGetDriverVersion":     len(lib.SystemGetDriverVersionCalls()),
		"SystemGetNVMLVersion":       len(lib.SystemGetNVMLVersionCalls()),
		"SystemGetCudaDriverVersion": len(lib.SystemGetCudaDriverVersionCalls()),
		"GetMinorNumber":             len(dev.GetMinorNumberCalls()),
		"GetNumaNodeId":              len(dev.GetNumaNodeIdCalls()),
		"GetCpuAffinity":             len(dev.GetCpuAffinityCalls()),
		"GetPersistenceMode":         len(dev.GetPersistenceModeCalls()),
		"GetNvLinkVersion":           len(dev.GetNvLinkVersionCalls()),
		"GetNvLinkRemotePciInfo":     len(dev.GetNvLinkRemotePciInfoCalls()),
		"GetNvLinkRemoteDeviceType":  len(dev.GetNvLinkRemoteDeviceTypeCalls()),
	} {
		if n != 0 {
			t.Errorf("ForScrape called %s %d times, want 0", call, n)
		}
	}
	for call, n := range map[string]int{
		"Init":                         len(lib.InitCalls()),
		"Shutdown":                     len(lib.ShutdownCalls()),
		"GetCurrPcieLinkGeneration":    len(dev.GetCurrPcieLinkGenerationCalls()),
		"GetMaxPcieLinkGeneration":     len(dev.GetMaxPcieLinkGenerationCalls()),
		"GetCurrPcieLinkWidth":         len(dev.GetCurrPcieLinkWidthCalls()),
		"GetMaxPcieLinkWidth":          len(dev.GetMaxPcieLinkWidthCalls()),
		"GetRemappedRows":              len(dev.GetRemappedRowsCalls()),
		"GetRetiredPagesPendingStatus": len(dev.GetRetiredPagesPendingStatusCalls()),
		"GetGpuFabricInfo":             len(dev.GetGpuFabricInfoCalls()),
		"GetFieldValues":               len(dev.GetFieldValuesCalls()),
		"GetPcieReplayCounter":         len(dev.GetPcieReplayCounterCalls()),
	} {
		if n != 1 {
			t.Errorf("ForScrape called %s %d times, want 1", call, n)
		}
	}
	// Two links, four counters each; links 0, 1 and the end (2).
	if n := len(dev.GetNvLinkErrorCounterCalls()); n != 8 {
		t.Errorf("GetNvLinkErrorCounter called %d times, want 8", n)
	}
	if n := len(dev.GetNvLinkStateCalls()); n != 3 {
		t.Errorf("GetNvLinkState called %d times, want 3", n)
	}
	if n := len(dev.GetTotalEccErrorsCalls()); n != 2 {
		t.Errorf("GetTotalEccErrors called %d times, want 2", n)
	}

	want := Result{
		Available: true,
		GPUs: []GPU{{
			Index: 0, BusID: "0000:3b:00.0", State: StateOK, UUID: "GPU-0", Name: "NVIDIA H100",
			PCIeGen: 5, PCIeMaxWidth: 16,
			NVLinkVisible: true,
			NVLinks: []NVLink{
				{Link: 0, Active: true, ReplayErrors: uint64p(10)},
				{Link: 1, ReplayErrors: uint64p(11)},
			},
			Health: Health{ECCUncorrectedVolatile: uint64p(2), ECCUncorrectedAggregate: uint64p(7)},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read(ForScrape) (-want +got):\n%s", diff)
	}
}

// TestReadForScrapeReplay reads the hgx replay with ForScrape: every field
// a scrape renders is as a full Read gives it (hgxWant), the discovery-only
// ones are left empty.
func TestReadForScrapeReplay(t *testing.T) {
	want := hgxWant()
	want.DriverVersion, want.NVMLVersion, want.CUDADriverVersion = "", "", 0
	for i := range want.GPUs {
		g := &want.GPUs[i]
		g.Minor, g.NUMANode, g.CPUAffinity, g.Health.Persistence = nil, nil, nil, nil
		for j := range g.NVLinks {
			l := &g.NVLinks[j]
			l.Version, l.RemoteBusID, l.RemoteType = 0, "", ""
		}
	}
	got := Read(NewReplay(hgxFile()), ForScrape())
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read(ForScrape) (-want +got):\n%s", diff)
	}
}
