package nvml

import (
	"errors"
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestParseReturn(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    nvml.Return
		wantErr bool
	}{
		{in: "", want: nvml.SUCCESS},
		{in: "SUCCESS", want: nvml.SUCCESS},
		{in: "Success", want: nvml.SUCCESS}, // the probe's "ret"
		{in: "ERROR_NOT_SUPPORTED", want: nvml.ERROR_NOT_SUPPORTED},
		{in: "NOT_SUPPORTED", want: nvml.ERROR_NOT_SUPPORTED},
		{in: "Not Supported", want: nvml.ERROR_NOT_SUPPORTED}, // libnvidia-ml's text
		{in: "GPU is lost", want: nvml.ERROR_GPU_IS_LOST},
		{in: "Insufficient Permissions", want: nvml.ERROR_NO_PERMISSION},
		{in: "NVML Shared Library Not Found", want: nvml.ERROR_LIBRARY_NOT_FOUND},
		{in: "RM has detected an NVML/RM version mismatch", want: nvml.ERROR_LIB_RM_VERSION_MISMATCH}, // no final '.'
		{in: "Unknown Error", want: nvml.ERROR_UNKNOWN},
		{in: "ERROR_RESET_TYPE_NOT_SUPPORTED", want: nvml.ERROR_RESET_TYPE_NOT_SUPPORTED},
		{in: "RETURN_77", want: nvml.Return(77)},
		{in: "Bogus", want: nvml.ERROR_UNKNOWN, wantErr: true},
		{in: "RETURN_x", want: nvml.ERROR_UNKNOWN, wantErr: true},
	} {
		got, err := parseReturn(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("parseReturn(%q) = %d, %v; want %d, error %v", tc.in, int32(got), err, int32(tc.want), tc.wantErr)
		}
	}
}

// TestReturnNames: every name the table writes parses back, and no two
// codes share a name or a text.
func TestReturnNames(t *testing.T) {
	seen := map[string]nvml.Return{}
	for _, e := range append(returnTable, returnInfo{ret: nvml.Return(77)}) {
		name := returnName(e.ret)
		if got, err := parseReturn(name); err != nil || got != e.ret {
			t.Errorf("parseReturn(returnName(%d) = %q) = %d, %v", int32(e.ret), name, int32(got), err)
		}
		for _, key := range []string{squash(e.name), squash(e.text)} {
			if prev, dup := seen[key]; key != "" && dup && prev != e.ret {
				t.Errorf("%q names both %d and %d", key, int32(prev), int32(e.ret))
			}
			seen[key] = e.ret
		}
	}
}

func TestReturnError(t *testing.T) {
	err := fmt.Errorf("GPU 0: %w", retErr(nvml.ERROR_GPU_IS_LOST))
	if !errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		t.Errorf("%v does not wrap ERROR_GPU_IS_LOST", err)
	}
	var r nvml.Return
	if !errors.As(err, &r) || r != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("errors.As(%v) = %v", err, r)
	}
	if got := err.Error(); got != "GPU 0: ERROR_GPU_IS_LOST" {
		t.Errorf("Error() = %q", got)
	}
	if retErr(nvml.SUCCESS) != nil {
		t.Error("retErr(SUCCESS) != nil")
	}
}
