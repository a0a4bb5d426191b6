package nvml

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

// TestRecordRoundTrip: recording a replay gives the file back, directly
// and through JSON.
func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		file ReplayFile
	}{
		{"full", hgxFile()},
		// NOT_SUPPORTED NVLinks, a lost handle, a GPU lost mid-way.
		{"failures", failuresFile()},
		{"library not found", libraryNotFoundFile()},
		{"count fails", countFailsFile()},
		{"no gpus", ReplayFile{Version: ReplayVersion, DriverVersion: ok("580.159.04"),
			NVMLVersion: ok("13.580.159.04"), CUDADriverVersion: ok(13000), DeviceCount: ok(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Record(NewReplay(tc.file))
			if err != nil {
				t.Fatalf("Record: %v", err)
			}
			if diff := cmp.Diff(tc.file, got); diff != "" {
				t.Errorf("Record(NewReplay(f)) (-f +got):\n%s", diff)
			}

			data, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := decodeReplay(data)
			if err != nil {
				t.Fatalf("decodeReplay(Marshal(f)): %v", err)
			}
			again, err := Record(NewReplay(decoded))
			if err != nil {
				t.Fatalf("Record: %v", err)
			}
			if diff := cmp.Diff(tc.file, again); diff != "" {
				t.Errorf("through JSON (-f +got):\n%s", diff)
			}
		})
	}
}

// TestRecordMock records go-nvml's mock, as it would the live library:
// affinity words are trimmed, the link loop stops at INVALID_ARGUMENT and
// a failed Shutdown is an error next to a complete file.
func TestRecordMock(t *testing.T) {
	lib, dev := mockLib()
	lib.ShutdownFunc = func() nvml.Return { return nvml.ERROR_UNKNOWN }
	dev.GetCpuAffinityFunc = func(n int) ([]uint, nvml.Return) {
		words := make([]uint, (n-1)/8+1) // go-nvml's sizing
		words[0], words[1] = 0xff, 0x1
		return words, nvml.SUCCESS
	}
	dev.GetNvLinkStateFunc = func(n int) (nvml.EnableState, nvml.Return) {
		if n > 0 {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	got, err := Record(lib)
	if err == nil || !strings.Contains(err.Error(), "Shutdown: ERROR_UNKNOWN") {
		t.Errorf("Record error = %v, want the failed Shutdown", err)
	}
	if len(got.Devices) != 1 {
		t.Fatalf("recorded %d devices, want 1", len(got.Devices))
	}
	d := got.Devices[0]
	if diff := cmp.Diff([]uint64{0xff, 0x1}, d.CPUAffinity.Value); diff != "" {
		t.Errorf("CPUAffinity (-want +got):\n%s", diff)
	}
	want := []ReplayNVLink{{Link: 0, State: ok(1), Version: failed[int](notSupported),
		Remote: failed[ReplayPCI](notSupported), RemoteType: failed[int](notSupported),
		Errors: sameLinkErrors(notSupported)}}
	if diff := cmp.Diff(want, d.NVLinks); diff != "" {
		t.Errorf("NVLinks (-want +got):\n%s", diff)
	}

	if _, err := Record(nil); err == nil {
		t.Error("Record(nil) succeeded")
	}
}

func TestAffinityWords(t *testing.T) {
	for _, tc := range []struct {
		in   []uint
		want []uint64
	}{
		{[]uint{}, []uint64{}},
		{[]uint{0, 0, 0}, []uint64{0}},
		{[]uint{0xffff, 0, 0}, []uint64{0xffff}},
		{[]uint{0, 1, 0}, []uint64{0, 1}},
	} {
		if diff := cmp.Diff(tc.want, affinityWords(tc.in)); diff != "" {
			t.Errorf("affinityWords(%v) (-want +got):\n%s", tc.in, diff)
		}
	}
}
