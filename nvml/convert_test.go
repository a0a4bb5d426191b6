package nvml

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// probePath is the real capture of go-nvml's answers on an H200 VM.
var probePath = filepath.Join("..", "internal", "testutil", "fakesys", "testdata", "h200-vm", "nvml-probe.json")

// h200VMWant is written from the capture's host report and nvidia-smi: one
// H200 passed through to a 16-vCPU VM, driver 580.159.04, CUDA 13.0, no
// NUMA node, no NVLink (every one of the probe's 36 links answers Not
// Supported).
func h200VMWant() ReplayFile {
	var links []ReplayNVLink
	for n := range 36 {
		// The probe asked the CRC flit and replay counters (Not
		// Supported); the other two were not asked.
		links = append(links, ReplayNVLink{Link: n, State: failed[int](notSupported), Version: failed[int](notSupported),
			Remote: failed[ReplayPCI](notSupported), RemoteType: failed[int](notSupported),
			Errors: &ReplayNVLinkErrors{CRCFlit: failedp[uint64](notSupported), CRCData: failedp[uint64](notSupported),
				Replay: failedp[uint64](notSupported), Recovery: failedp[uint64](notSupported)}})
	}
	return ReplayFile{
		Version:           ReplayVersion,
		DriverVersion:     ok("580.159.04"),
		NVMLVersion:       ok("13.580.159.04"),
		CUDADriverVersion: ok(13000),
		DeviceCount:       ok(1),
		Devices: []ReplayDevice{{
			// H200 is PCI device 0x2335; subsystem 0x18bf, both NVIDIA (0x10de).
			PCI:          ok(ReplayPCI{BusID: "00000000:00:06.0", PCIDeviceID: 0x233510de, PCISubsystemID: 0x18bf10de}),
			UUID:         ok("GPU-e3344502-c9fc-0416-7091-4a6968e9d3e8"),
			Name:         ok("NVIDIA H200"),
			Minor:        ok(0),
			NUMANode:     failed[int](notSupported),
			CPUAffinity:  ok([]uint64{0xffff}), // CPUs 0-15
			PCIeGen:      ok(5),
			PCIeMaxGen:   ok(5),
			PCIeWidth:    ok(16),
			PCIeMaxWidth: ok(16),
			NVLinks:      links,
			// What the probe asked: persistence on, no uncorrected ECC
			// error, no remapped row, fabric state 0 (NOT_SUPPORTED: a VM
			// GPU outside any NVSwitch fabric), no PCIe replay. What it did
			// not ask answers NOT_SUPPORTED.
			Persistence:             okp(1),
			ECCUncorrectedVolatile:  okp[uint64](0),
			ECCUncorrectedAggregate: failedp[uint64](notSupported),
			RemappedRows:            okp(ReplayRemappedRows{}),
			RetiredPages:            failedp[ReplayRetiredPages](notSupported),
			RetiredPagesPending:     failedp[int](notSupported),
			Fabric:                  okp(ReplayFabric{State: 0, Status: 0}),
			RecoveryAction:          failedp[int](notSupported),
			PCIeReplay:              okp(0),
		}},
	}
}

func TestConvertProbeH200(t *testing.T) {
	fh, err := os.Open(probePath)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	got, err := ConvertProbe(fh)
	if err != nil {
		t.Fatalf("ConvertProbe: %v", err)
	}
	if diff := cmp.Diff(h200VMWant(), got); diff != "" {
		t.Errorf("ConvertProbe (-want +got):\n%s", diff)
	}
	if err := got.validate(); err != nil {
		t.Errorf("converted file does not validate: %v", err)
	}

	res := Read(NewReplay(got))
	want := Result{
		Available: true, DriverVersion: "580.159.04", NVMLVersion: "13.580.159.04", CUDADriverVersion: 13000,
		GPUs: []GPU{{
			Index: 0, BusID: "0000:00:06.0", State: StateOK,
			UUID: "GPU-e3344502-c9fc-0416-7091-4a6968e9d3e8", Name: "NVIDIA H200", Minor: intp(0),
			CPUAffinity: span(0, 15), PCIeGen: 5, PCIeMaxGen: 5, PCIeWidth: 16, PCIeMaxWidth: 16,
			// Fabric state 0 is GPU_FABRIC_STATE_NOT_SUPPORTED: unknown.
			Health: Health{
				Persistence: boolp(true), ECCUncorrectedVolatile: uint64p(0),
				RemappedRowsCorrectable: intp(0), RemappedRowsUncorrectable: intp(0),
				RemapPending: boolp(false), RemapFailure: boolp(false), PCIeReplay: uint64p(0),
			},
		}},
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("Read(NewReplay(converted)) (-want +got):\n%s", diff)
	}
}

func TestConvertProbe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		probe   string
		want    ReplayFile
		wantErr string
	}{
		{
			// Error texts map to Return names; calls the probe did not make
			// (minor, remote_type) answer NOT_SUPPORTED; a successful remote
			// may be a bus id or a PciInfo.
			name: "answers",
			probe: `{"driver": {"err": "Insufficient Permissions"}, "nvml": {"value": "13.580.159.04"}, "cuda": {"value": 13000},
				"devices": [{
					"pci": {"value": "00000000:18:00.0"}, "uuid": {"err": "GPU is lost"}, "name": {"value": "NVIDIA H100"},
					"numa": {"value": 1}, "cpu_affinity": {"value": [1, 0]},
					"pcie_gen_cur": {"value": 5}, "pcie_gen_max": {"value": 5}, "pcie_width_cur": {"value": 16}, "pcie_width_max": {"value": 16},
					"persistence": {"value": 0}, "ecc_uncorrected_volatile": {"value": 3},
					"remapped_rows": {"value": [1, 2, true, false]},
					"fabric": {"value": {"ClusterUuid": [0], "Status": 0, "CliqueId": 7, "State": 3}},
					"pcie_replay": {"err": "Not Supported"},
					"nvlinks": [
						{"link": 0, "state": {"value": 1}, "version": {"value": 4}, "remote": {"value": "00000000:05:00.0"}},
						{"link": 1, "state": {"value": 1}, "version": {"value": 4}, "remote_type": {"value": 2},
						 "remote": {"value": {"BusId": [48, 48, 48, 48, 48, 48, 48, 48, 58, 48, 54, 58, 48, 48, 46, 48, 0], "PciDeviceId": 582160606}}}
					]}]}`,
			want: ReplayFile{
				Version: ReplayVersion, DriverVersion: failed[string]("ERROR_NO_PERMISSION"),
				NVMLVersion: ok("13.580.159.04"), CUDADriverVersion: ok(13000), DeviceCount: ok(1),
				Devices: []ReplayDevice{{
					PCI:  ok(ReplayPCI{BusID: "00000000:18:00.0"}),
					UUID: failed[string](gpuIsLost), Name: ok("NVIDIA H100"),
					Minor: failed[int](notSupported), NUMANode: ok(1), CPUAffinity: ok([]uint64{1, 0}),
					PCIeGen: ok(5), PCIeMaxGen: ok(5), PCIeWidth: ok(16), PCIeMaxWidth: ok(16),
					NVLinks: []ReplayNVLink{
						{Link: 0, State: ok(1), Version: ok(4), Remote: ok(ReplayPCI{BusID: "00000000:05:00.0"}), RemoteType: failed[int](notSupported)},
						{Link: 1, State: ok(1), Version: ok(4), Remote: ok(ReplayPCI{BusID: "00000000:06:00.0", PCIDeviceID: 0x22b310de}), RemoteType: ok(2)},
					},
					Persistence:             okp(0),
					ECCUncorrectedVolatile:  okp[uint64](3),
					ECCUncorrectedAggregate: failedp[uint64](notSupported),
					RemappedRows:            okp(ReplayRemappedRows{Correctable: 1, Uncorrectable: 2, Pending: true}),
					RetiredPages:            failedp[ReplayRetiredPages](notSupported),
					RetiredPagesPending:     failedp[int](notSupported),
					Fabric:                  okp(ReplayFabric{State: 3}),
					RecoveryAction:          failedp[int](notSupported),
					PCIeReplay:              failedp[int](notSupported),
				}},
			},
		},
		{
			// Without "pci", the bus id comes from pci_raw.
			name:  "pci_raw only",
			probe: `{"devices": [{"pci_raw": {"value": {"BusId": [48, 48, 58, 48, 54, 46, 48, 0], "PciDeviceId": 1, "PciSubSystemId": 2}}}]}`,
			want: ReplayFile{
				Version: ReplayVersion, DriverVersion: failed[string](notSupported), NVMLVersion: failed[string](notSupported),
				CUDADriverVersion: failed[int](notSupported), DeviceCount: ok(1),
				Devices: []ReplayDevice{withHealth(ReplayDevice{
					PCI:  ok(ReplayPCI{BusID: "00:06.0", PCIDeviceID: 1, PCISubsystemID: 2}),
					UUID: failed[string](notSupported), Name: failed[string](notSupported), Minor: failed[int](notSupported),
					NUMANode: failed[int](notSupported), CPUAffinity: failed[[]uint64](notSupported),
					PCIeGen: failed[int](notSupported), PCIeMaxGen: failed[int](notSupported),
					PCIeWidth: failed[int](notSupported), PCIeMaxWidth: failed[int](notSupported),
				}, notSupported)},
			},
		},
		{
			name:    "unknown error text",
			probe:   `{"devices": [{"numa": {"err": "Something New"}}]}`,
			wantErr: `devices[0].numa: unknown NVML return "Something New"`,
		},
		{
			name:    "link out of range",
			probe:   `{"devices": [{"nvlinks": [{"link": 36}]}]}`,
			wantErr: "devices[0].nvlinks[0].link: link 36 is outside 0..35",
		},
		{
			name:    "bad remote",
			probe:   `{"devices": [{"nvlinks": [{"link": 0, "remote": {"value": 7}}]}]}`,
			wantErr: "devices[0].nvlinks[0].remote: value is neither a bus id nor a PciInfo",
		},
		{
			name:    "bad remapped rows",
			probe:   `{"devices": [{"remapped_rows": {"value": [0, 0, false]}}]}`,
			wantErr: "devices[0].remapped_rows: value is not an array of 4 results",
		},
		{name: "not json", probe: `{`, wantErr: "nvml: probe: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConvertProbe(strings.NewReader(tc.probe))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("ConvertProbe error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ConvertProbe: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ConvertProbe (-want +got):\n%s", diff)
			}
		})
	}
}
