package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nvmlInitErrors is every answer but SUCCESS that nvmlInit can give, by
// the names of nvml.h's nvmlReturn_t (go-nvml's Return constants):
// whatever NVML answers, the GPUs it could not see must not pass.
var nvmlInitErrors = []string{
	"ERROR_UNINITIALIZED", "ERROR_INVALID_ARGUMENT", "ERROR_NOT_SUPPORTED", "ERROR_NO_PERMISSION",
	"ERROR_ALREADY_INITIALIZED", "ERROR_NOT_FOUND", "ERROR_INSUFFICIENT_SIZE", "ERROR_INSUFFICIENT_POWER",
	"ERROR_DRIVER_NOT_LOADED", "ERROR_TIMEOUT", "ERROR_IRQ_ISSUE", "ERROR_LIBRARY_NOT_FOUND",
	"ERROR_FUNCTION_NOT_FOUND", "ERROR_CORRUPTED_INFOROM", "ERROR_GPU_IS_LOST", "ERROR_RESET_REQUIRED",
	"ERROR_OPERATING_SYSTEM", "ERROR_LIB_RM_VERSION_MISMATCH", "ERROR_IN_USE", "ERROR_MEMORY",
	"ERROR_NO_DATA", "ERROR_VGPU_ECC_NOT_SUPPORTED", "ERROR_INSUFFICIENT_RESOURCES", "ERROR_FREQ_NOT_SUPPORTED",
	"ERROR_ARGUMENT_VERSION_MISMATCH", "ERROR_DEPRECATED", "ERROR_NOT_READY", "ERROR_GPU_NOT_FOUND",
	"ERROR_INVALID_STATE", "ERROR_RESET_TYPE_NOT_SUPPORTED", "ERROR_UNKNOWN",
}

// TestCheckNVMLInitFailure: a root with GPUs on the bus whose nvml.json
// replays a failed nvmlInit (a driver upgraded without a reboot answers
// ERROR_LIB_RM_VERSION_MISMATCH) is unhealthy: gpu.visible fails naming
// NVML's answer, check exits 1, and --slurm-resume leaves the node
// drained.
func TestCheckNVMLInitFailure(t *testing.T) {
	root := checkRoot(t, "dgx-h100")
	log := stubScontrol(t, "gpuaffinity: gpu.visible: earlier failure")
	for _, name := range nvmlInitErrors {
		if err := os.WriteFile(filepath.Join(root, "nvml.json"), []byte(fmt.Sprintf(`{"version":1,"init":%q}`, name)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := runCheck(t, "--root", root, "--interval", "0", "--slurm-resume", "--slurm-node", "gpu-01")
		if code != checkExitUnhealthy || !strings.Contains(out, "gpu.visible") || !strings.Contains(out, name) {
			t.Errorf("%s: exit %d, output:\n%s", name, code, out)
		}
		if strings.Contains(out, "healthy\n") && !strings.Contains(out, "unhealthy") {
			t.Errorf("%s: called healthy:\n%s", name, out)
		}
	}
	if got := readLog(log); strings.Contains(got, "resume") {
		t.Errorf("scontrol calls with NVML failing:\n%s", got)
	}

	// An --expect holding 18 NVLinks per GPU cannot be verified either.
	exp := filepath.Join(t.TempDir(), "expect.yaml")
	writeFile(t, exp, "gpus:\n  count: 8\n  nvlinks_per_gpu: 18\nnics:\n  compute_count: 8\n")
	out, code := runCheck(t, "--root", root, "--interval", "0", "--expect", exp, "-o", "json")
	if code != checkExitUnhealthy || !strings.Contains(out, `"id": "nvlink.active",
      "verdict": "fail"`) || !strings.Contains(out, "cannot verify") {
		t.Errorf("--expect with NVML failing: exit %d\n%s", code, out)
	}

	// A corrupt nvml.json is a failure too, not "no nvml.json".
	writeFile(t, filepath.Join(root, "nvml.json"), `{"version":1,"devices":[`)
	if out, code := runCheck(t, "--root", root, "--interval", "0"); code != checkExitUnhealthy || !strings.Contains(out, "nvml.json") {
		t.Errorf("corrupt nvml.json: exit %d\n%s", code, out)
	}
	// No nvml.json at all in a replayed root: nothing of NVML was
	// captured; gpu.visible skips and says so.
	os.Remove(filepath.Join(root, "nvml.json"))
	if out, code := runCheck(t, "--root", root, "--interval", "0", "--only", "gpu.visible"); code != 0 || !strings.Contains(out, "NVML not captured") {
		t.Errorf("no nvml.json: exit %d\n%s", code, out)
	}
}
