package nvml

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDocExamples loads the ```json examples of docs/nvml-replay.md and
// checks what the text says Read makes of them.
func TestDocExamples(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "nvml-replay.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(data), "```json\n")[1:] {
		blocks = append(blocks, part[:strings.Index(part, "```")])
	}
	if len(blocks) != 2 {
		t.Fatalf("found %d json examples, want 2", len(blocks))
	}

	f, err := decodeReplay([]byte(blocks[0]))
	if err != nil {
		t.Fatalf("example 1: %v", err)
	}
	got := Read(NewReplay(f))
	want := Result{
		Available: true, DriverVersion: "550.54.15", NVMLVersion: "12.550.54.15", CUDADriverVersion: 12040,
		GPUs: []GPU{
			{
				Index: 0, BusID: "0000:18:00.0", State: StateOK,
				UUID: "GPU-11111111-2222-3333-4444-555555555500", Name: "NVIDIA H100 80GB HBM3", Minor: intp(0),
				CPUAffinity: append(span(0, 55), span(112, 167)...),
				PCIeGen:     5, PCIeMaxGen: 5, PCIeWidth: 16, PCIeMaxWidth: 16,
				NVLinkVisible: true,
				NVLinks: []NVLink{
					{Link: 0, Active: true, Version: 4, RemoteBusID: "0000:05:00.0", RemoteType: RemoteNVSwitch,
						CRCFlitErrors: uint64p(0), CRCDataErrors: uint64p(0), ReplayErrors: uint64p(0), RecoveryErrors: uint64p(0)},
					{Link: 1, Active: true, Version: 4, RemoteBusID: "0000:06:00.0", RemoteType: RemoteNVSwitch,
						CRCFlitErrors: uint64p(0), CRCDataErrors: uint64p(0), ReplayErrors: uint64p(0), RecoveryErrors: uint64p(0)},
					{Link: 2, CRCFlitErrors: uint64p(12), CRCDataErrors: uint64p(1), ReplayErrors: uint64p(3), RecoveryErrors: uint64p(2)},
				},
				Health: Health{
					Persistence: boolp(true), ECCUncorrectedVolatile: uint64p(0), ECCUncorrectedAggregate: uint64p(0),
					RemappedRowsCorrectable: intp(0), RemappedRowsUncorrectable: intp(0),
					RemapPending: boolp(false), RemapFailure: boolp(false),
					FabricState: intp(3), FabricStatus: intp(0), RecoveryAction: intp(0), PCIeReplay: uint64p(0),
				},
				// A v1 recording replays through v4 with every health field "not supported".
				Fabric: &Fabric{State: 3, Status: intp(0), HealthMask: uint32p(0), HealthSummary: intp(0)},
			},
			{Index: 1, State: StateLost, Err: "DeviceGetHandleByIndex: ERROR_GPU_IS_LOST"},
		},
		Warnings: []string{"GPU 1: DeviceGetHandleByIndex: ERROR_GPU_IS_LOST"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("example 1: Read (-want +got):\n%s", diff)
	}
	if rec, err := Record(NewReplay(f)); err != nil || !cmp.Equal(f, rec) {
		t.Errorf("example 1 is not what Record writes for it: %v\n%s", err, cmp.Diff(f, rec))
	}

	events, warnings, err := watch(t, NewReplay(f), 1)
	if err != nil || !cmp.Equal([]XIDEvent{{GPU: 0, BusID: "0000:18:00.0", XID: 48}}, events, ignoreTime) ||
		!cmp.Equal([]string{"GPU 1: DeviceGetHandleByIndex: ERROR_GPU_IS_LOST"}, warnings) {
		t.Errorf("example 1: WatchXID = %v, events %+v, warnings %q", err, events, warnings)
	}

	f, err = decodeReplay([]byte(blocks[1]))
	if err != nil {
		t.Fatalf("example 2: %v", err)
	}
	if got := Read(NewReplay(f)); got.Available || !errors.Is(got.Err, ErrLibraryNotFound) {
		t.Errorf("example 2: Read = %+v, want NVML not found", got)
	}
}
