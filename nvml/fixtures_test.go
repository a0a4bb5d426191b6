package nvml

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// Hand-written nvml.json contents shared by the tests. Values follow the
// machines' published layouts, not this package's output.

const (
	notSupported = "ERROR_NOT_SUPPORTED"
	gpuIsLost    = "ERROR_GPU_IS_LOST"
	unknownError = "ERROR_UNKNOWN"
)

func ok[T any](v T) Answer[T]          { return Answer[T]{Value: v} }
func failed[T any](r string) Answer[T] { return Answer[T]{Return: r} }

// span lists the CPUs lo..hi.
func span(lo, hi int) []int {
	var s []int
	for c := lo; c <= hi; c++ {
		s = append(s, c)
	}
	return s
}

func okp[T any](v T) *Answer[T]          { return &Answer[T]{Value: v} }
func failedp[T any](r string) *Answer[T] { return &Answer[T]{Return: r} }

func intp(v int) *int          { return &v }
func boolp(v bool) *bool       { return &v }
func uint64p(v uint64) *uint64 { return &v }
func uint32p(v uint32) *uint32 { return &v }

// withHealth sets every health answer of d to r.
func withHealth(d ReplayDevice, r string) ReplayDevice {
	d.Persistence, d.RetiredPagesPending = failedp[int](r), failedp[int](r)
	d.ECCUncorrectedVolatile, d.ECCUncorrectedAggregate = failedp[uint64](r), failedp[uint64](r)
	d.RemappedRows, d.RetiredPages = failedp[ReplayRemappedRows](r), failedp[ReplayRetiredPages](r)
	d.Fabric, d.RecoveryAction, d.PCIeReplay = failedp[ReplayFabric](r), failedp[int](r), failedp[int](r)
	return d
}

// linkErrors is a link's four error counter answers.
func linkErrors(crcFlit, crcData, replay, recovery Answer[uint64]) *ReplayNVLinkErrors {
	return &ReplayNVLinkErrors{CRCFlit: &crcFlit, CRCData: &crcData, Replay: &replay, Recovery: &recovery}
}

// sameLinkErrors answers r (a Return name) for all four counters.
func sameLinkErrors(r string) *ReplayNVLinkErrors {
	return linkErrors(failed[uint64](r), failed[uint64](r), failed[uint64](r), failed[uint64](r))
}

// noLinkErrors answers 0 for all four counters.
func noLinkErrors() *ReplayNVLinkErrors {
	return linkErrors(ok[uint64](0), ok[uint64](0), ok[uint64](0), ok[uint64](0))
}

// hgxFile is two GPUs of a two-socket HGX H100 (224 CPUs, SMT on): GPU 0
// on socket 0 with four NVLinks to NVSwitches (link 2 down, after CRC
// errors, replays and recoveries), GPU 1 on socket 1 with two links
// straight to GPU 0 (link 1 answers the IBM NPU type, to cover "other";
// its CRC data counter is not supported and its recovery counter fails).
// GPU 1 answers a NUMA node, as on a coherent platform. Both deliver XID
// events: one pending on GPU 0 (48, double-bit ECC), two on GPU 1 (94
// contained ECC error, then 79 fallen off the bus).
func hgxFile() ReplayFile {
	nvswitch := func(link int, bus string, up bool) ReplayNVLink {
		if !up {
			return ReplayNVLink{Link: link, State: ok(0),
				Version: failed[int](notSupported), Remote: failed[ReplayPCI](notSupported),
				RemoteType: failed[int](notSupported),
				Errors:     linkErrors(ok[uint64](7), ok[uint64](2), ok[uint64](31), ok[uint64](4))}
		}
		return ReplayNVLink{Link: link, State: ok(1), Version: ok(4),
			Remote:     ok(ReplayPCI{BusID: bus, PCIDeviceID: 0x22a310de}),
			RemoteType: ok(2), Errors: noLinkErrors()}
	}
	return ReplayFile{
		Version:           ReplayVersion,
		DriverVersion:     ok("550.54.15"),
		NVMLVersion:       ok("12.550.54.15"),
		CUDADriverVersion: ok(12040),
		DeviceCount:       ok(2),
		Devices: []ReplayDevice{
			{
				PCI:      ok(ReplayPCI{BusID: "00000000:18:00.0", PCIDeviceID: 0x233010de, PCISubsystemID: 0x16c110de}),
				UUID:     ok("GPU-11111111-2222-3333-4444-555555555500"),
				Name:     ok("NVIDIA H100 80GB HBM3"),
				Minor:    ok(0),
				NUMANode: failed[int](notSupported),
				// CPUs 0-55 and 112-167.
				CPUAffinity:  ok([]uint64{0x00ffffffffffffff, 0xffff000000000000, 0x000000ffffffffff}),
				PCIeGen:      ok(5),
				PCIeMaxGen:   ok(5),
				PCIeWidth:    ok(16),
				PCIeMaxWidth: ok(16),
				NVLinks: []ReplayNVLink{
					nvswitch(0, "00000000:05:00.0", true),
					nvswitch(1, "00000000:06:00.0", true),
					nvswitch(2, "", false),
					nvswitch(3, "00000000:07:00.0", true),
				},
				Persistence:             okp(1),
				ECCUncorrectedVolatile:  okp[uint64](0),
				ECCUncorrectedAggregate: okp[uint64](2),
				RemappedRows:            okp(ReplayRemappedRows{Correctable: 1}),
				RetiredPages:            okp(ReplayRetiredPages{}),
				RetiredPagesPending:     okp(0),
				Fabric:                  okp(ReplayFabric{State: 3, Status: 0}),
				RecoveryAction:          okp(0),
				PCIeReplay:              okp(5),
				XIDs:                    okp([]uint64{48}),
			},
			{
				PCI:      ok(ReplayPCI{BusID: "00000000:9A:00.0", PCIDeviceID: 0x233010de, PCISubsystemID: 0x16c110de}),
				UUID:     ok("GPU-11111111-2222-3333-4444-555555555501"),
				Name:     ok("NVIDIA H100 80GB HBM3"),
				Minor:    ok(1),
				NUMANode: ok(1),
				// CPUs 56-111 and 168-223.
				CPUAffinity:  ok([]uint64{0xff00000000000000, 0x0000ffffffffffff, 0xffffff0000000000, 0x00000000ffffffff}),
				PCIeGen:      ok(4), // trained down
				PCIeMaxGen:   ok(5),
				PCIeWidth:    ok(8),
				PCIeMaxWidth: ok(16),
				NVLinks: []ReplayNVLink{
					{Link: 0, State: ok(1), Version: ok(4), Remote: ok(ReplayPCI{BusID: "00000000:18:00.0", PCIDeviceID: 0x233010de, PCISubsystemID: 0x16c110de}), RemoteType: ok(0),
						Errors: noLinkErrors()},
					{Link: 1, State: ok(1), Version: ok(4), Remote: ok(ReplayPCI{BusID: "00000000:18:00.0", PCIDeviceID: 0x233010de, PCISubsystemID: 0x16c110de}), RemoteType: ok(1),
						Errors: linkErrors(ok[uint64](0), failed[uint64](notSupported), ok[uint64](12), failed[uint64](unknownError))},
				},
				// A GPU in trouble, off any NVSwitch fabric.
				Persistence:             okp(0),
				ECCUncorrectedVolatile:  failedp[uint64](notSupported),
				ECCUncorrectedAggregate: failedp[uint64](notSupported),
				RemappedRows:            okp(ReplayRemappedRows{Uncorrectable: 2, Pending: true}),
				RetiredPages:            okp(ReplayRetiredPages{MultipleSingleBit: 1, DoubleBit: 2}),
				RetiredPagesPending:     okp(1),
				Fabric:                  okp(ReplayFabric{}),
				RecoveryAction:          failedp[int](notSupported),
				PCIeReplay:              okp(0),
				XIDs:                    okp([]uint64{94, 79}),
			},
		},
	}
}

// hgxWant is what Read must make of hgxFile.
func hgxWant() Result {
	return Result{
		Available:         true,
		DriverVersion:     "550.54.15",
		NVMLVersion:       "12.550.54.15",
		CUDADriverVersion: 12040,
		GPUs: []GPU{
			{
				Index: 0, BusID: "0000:18:00.0", State: StateOK,
				UUID: "GPU-11111111-2222-3333-4444-555555555500", Name: "NVIDIA H100 80GB HBM3",
				Minor: intp(0), CPUAffinity: append(span(0, 55), span(112, 167)...),
				PCIeGen: 5, PCIeMaxGen: 5, PCIeWidth: 16, PCIeMaxWidth: 16,
				NVLinkVisible: true,
				NVLinks: []NVLink{
					{Link: 0, Active: true, Version: 4, RemoteBusID: "0000:05:00.0", RemoteType: RemoteNVSwitch,
						CRCFlitErrors: uint64p(0), CRCDataErrors: uint64p(0), ReplayErrors: uint64p(0), RecoveryErrors: uint64p(0)},
					{Link: 1, Active: true, Version: 4, RemoteBusID: "0000:06:00.0", RemoteType: RemoteNVSwitch,
						CRCFlitErrors: uint64p(0), CRCDataErrors: uint64p(0), ReplayErrors: uint64p(0), RecoveryErrors: uint64p(0)},
					// Down, with the counts that took it down.
					{Link: 2, CRCFlitErrors: uint64p(7), CRCDataErrors: uint64p(2), ReplayErrors: uint64p(31), RecoveryErrors: uint64p(4)},
					{Link: 3, Active: true, Version: 4, RemoteBusID: "0000:07:00.0", RemoteType: RemoteNVSwitch,
						CRCFlitErrors: uint64p(0), CRCDataErrors: uint64p(0), ReplayErrors: uint64p(0), RecoveryErrors: uint64p(0)},
				},
				Health: Health{
					Persistence: boolp(true), ECCUncorrectedVolatile: uint64p(0), ECCUncorrectedAggregate: uint64p(2),
					RemappedRowsCorrectable: intp(1), RemappedRowsUncorrectable: intp(0),
					RemapPending: boolp(false), RemapFailure: boolp(false),
					RetiredPages: intp(0), RetiredPagesPending: boolp(false),
					FabricState: intp(3), FabricStatus: intp(0), RecoveryAction: intp(0), PCIeReplay: uint64p(5),
				},
				// A v1 recording replays through v4 with every health field "not supported".
				Fabric: &Fabric{State: 3, Status: intp(0), HealthMask: uint32p(0), HealthSummary: intp(0)},
			},
			{
				Index: 1, BusID: "0000:9a:00.0", State: StateOK,
				UUID: "GPU-11111111-2222-3333-4444-555555555501", Name: "NVIDIA H100 80GB HBM3",
				Minor: intp(1), NUMANode: intp(1), CPUAffinity: append(span(56, 111), span(168, 223)...),
				PCIeGen: 4, PCIeMaxGen: 5, PCIeWidth: 8, PCIeMaxWidth: 16,
				NVLinkVisible: true,
				NVLinks: []NVLink{
					{Link: 0, Active: true, Version: 4, RemoteBusID: "0000:18:00.0", RemoteType: RemoteGPU,
						CRCFlitErrors: uint64p(0), CRCDataErrors: uint64p(0), ReplayErrors: uint64p(0), RecoveryErrors: uint64p(0)},
					// CRC data not supported (silent), recovery failed (a warning).
					{Link: 1, Active: true, Version: 4, RemoteBusID: "0000:18:00.0", RemoteType: RemoteOther,
						CRCFlitErrors: uint64p(0), ReplayErrors: uint64p(12)},
				},
				Health: Health{
					Persistence:             boolp(false),
					RemappedRowsCorrectable: intp(0), RemappedRowsUncorrectable: intp(2),
					RemapPending: boolp(true), RemapFailure: boolp(false),
					RetiredPages: intp(3), RetiredPagesPending: boolp(true), PCIeReplay: uint64p(0),
				},
			},
		},
		Warnings: []string{"GPU 1 (0000:9a:00.0): GetNvLinkErrorCounter(1, DL_RECOVERY): ERROR_UNKNOWN"},
	}
}

// failuresFile is a node in trouble: GPU 0 is a VM's passthrough GPU
// (NVLinks NOT_SUPPORTED, no NUMA node) whose minor number fails, GPU 1
// fell off the bus before its handle was taken, GPU 2 after its name was
// read. The driver answers no CUDA version.
func failuresFile() ReplayFile {
	unsupportedLink := func(n int) ReplayNVLink {
		return ReplayNVLink{Link: n, State: failed[int](notSupported), Version: failed[int](notSupported),
			Remote: failed[ReplayPCI](notSupported), RemoteType: failed[int](notSupported),
			Errors: sameLinkErrors(notSupported)}
	}
	lostLink := func(n int) ReplayNVLink {
		return ReplayNVLink{Link: n, State: failed[int](gpuIsLost), Version: failed[int](gpuIsLost),
			Remote: failed[ReplayPCI](gpuIsLost), RemoteType: failed[int](gpuIsLost),
			Errors: sameLinkErrors(gpuIsLost)}
	}
	return ReplayFile{
		Version:           ReplayVersion,
		DriverVersion:     ok("580.159.04"),
		NVMLVersion:       ok("13.580.159.04"),
		CUDADriverVersion: failed[int](unknownError),
		DeviceCount:       ok(3),
		Devices: []ReplayDevice{
			{
				PCI:          ok(ReplayPCI{BusID: "00000000:00:06.0", PCIDeviceID: 0x233510de, PCISubsystemID: 0x18bf10de}),
				UUID:         ok("GPU-aaaaaaaa-0000-0000-0000-000000000000"),
				Name:         ok("NVIDIA H200"),
				Minor:        failed[int](unknownError),
				NUMANode:     failed[int](notSupported),
				CPUAffinity:  ok([]uint64{0xffff}),
				PCIeGen:      ok(5),
				PCIeMaxGen:   ok(5),
				PCIeWidth:    ok(16),
				PCIeMaxWidth: ok(16),
				NVLinks:      []ReplayNVLink{unsupportedLink(0), unsupportedLink(1), unsupportedLink(2)},
				// A VM: no fabric, no retired pages, a recovery action
				// that fails.
				Persistence:             okp(1),
				ECCUncorrectedVolatile:  okp[uint64](0),
				ECCUncorrectedAggregate: failedp[uint64](notSupported),
				RemappedRows:            okp(ReplayRemappedRows{}),
				RetiredPages:            failedp[ReplayRetiredPages](notSupported),
				RetiredPagesPending:     failedp[int](notSupported),
				Fabric:                  okp(ReplayFabric{}),
				RecoveryAction:          failedp[int](unknownError),
				PCIeReplay:              okp(0),
				XIDs:                    failedp[[]uint64](notSupported), // no XID events in a VM
			},
			{Handle: gpuIsLost},
			withHealth(ReplayDevice{
				PCI:          ok(ReplayPCI{BusID: "00000000:1A:00.0", PCIDeviceID: 0x233510de, PCISubsystemID: 0x18bf10de}),
				UUID:         ok("GPU-aaaaaaaa-0000-0000-0000-000000000002"),
				Name:         ok("NVIDIA H200"),
				Minor:        ok(2),
				NUMANode:     failed[int](gpuIsLost),
				CPUAffinity:  failed[[]uint64](gpuIsLost),
				PCIeGen:      failed[int](gpuIsLost),
				PCIeMaxGen:   failed[int](gpuIsLost),
				PCIeWidth:    failed[int](gpuIsLost),
				PCIeMaxWidth: failed[int](gpuIsLost),
				NVLinks:      []ReplayNVLink{lostLink(0)},
				XIDs:         failedp[[]uint64](gpuIsLost),
			}, gpuIsLost),
		},
	}
}

// failuresWant is what Read must make of failuresFile.
func failuresWant() Result {
	return Result{
		Available:     true,
		DriverVersion: "580.159.04",
		NVMLVersion:   "13.580.159.04",
		GPUs: []GPU{
			{
				Index: 0, BusID: "0000:00:06.0", State: StateOK,
				UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000", Name: "NVIDIA H200",
				CPUAffinity: span(0, 15),
				PCIeGen:     5, PCIeMaxGen: 5, PCIeWidth: 16, PCIeMaxWidth: 16,
				Health: Health{
					Persistence: boolp(true), ECCUncorrectedVolatile: uint64p(0),
					RemappedRowsCorrectable: intp(0), RemappedRowsUncorrectable: intp(0),
					RemapPending: boolp(false), RemapFailure: boolp(false), PCIeReplay: uint64p(0),
				},
			},
			{Index: 1, State: StateLost, Err: "DeviceGetHandleByIndex: ERROR_GPU_IS_LOST"},
			{
				Index: 2, BusID: "0000:1a:00.0", State: StateLost, Err: "GetNumaNodeId: ERROR_GPU_IS_LOST",
				UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000002", Name: "NVIDIA H200", Minor: intp(2),
			},
		},
		Warnings: []string{
			"SystemGetCudaDriverVersion: ERROR_UNKNOWN",
			"GPU 0 (0000:00:06.0): GetMinorNumber: ERROR_UNKNOWN",
			"GPU 0 (0000:00:06.0): GetFieldValues(FI_DEV_GET_GPU_RECOVERY_ACTION): ERROR_UNKNOWN",
			"GPU 1: DeviceGetHandleByIndex: ERROR_GPU_IS_LOST",
			"GPU 2 (0000:1a:00.0): GetNumaNodeId: ERROR_GPU_IS_LOST",
		},
	}
}

// libraryNotFoundFile is a node without the NVIDIA driver.
func libraryNotFoundFile() ReplayFile {
	return ReplayFile{Version: ReplayVersion, Init: "ERROR_LIBRARY_NOT_FOUND"}
}

// countFailsFile is a node whose driver answers Init but not DeviceGetCount.
func countFailsFile() ReplayFile {
	return ReplayFile{
		Version:           ReplayVersion,
		DriverVersion:     ok("580.159.04"),
		NVMLVersion:       ok("13.580.159.04"),
		CUDADriverVersion: ok(13000),
		DeviceCount:       failed[int]("ERROR_NO_PERMISSION"),
	}
}

// mockLib is a go-nvml mock of one GPU where every call answers
// ERROR_NOT_SUPPORTED except a healthy handle, bus id, UUID and name; tests
// set the Funcs they need on the returned device.
func mockLib() (*mock.Interface, *mock.Device) {
	dev := &mock.Device{
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			var info nvml.PciInfo
			putCString(info.BusId[:], "00000000:3B:00.0")
			return info, nvml.SUCCESS
		},
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-0", nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H100", nvml.SUCCESS },
	}
	fillNotSupported(dev)
	lib := &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) {
			return dev, nvml.SUCCESS
		},
	}
	fillNotSupported(lib)
	return lib, dev
}
