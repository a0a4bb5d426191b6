package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The GB200 fixtures through the command: the failed tray fails
// gpu.fabric (naming GPU 2 and the mask fields) and gpu.imex (with the
// mknod hint); a healthy tray whose channel node was removed fails
// gpu.imex under pretrain and warns under inference (a single-node job
// never reaches NCCL's MNNVL setup), exit 0.
func TestCheckFabricIMEX(t *testing.T) {
	root := checkRoot(t, "gb200-nvl72-fabric-failed")
	out, code := runCheck(t, "--root", root, "--interval", "0", "--only", "gpu.fabric,gpu.imex")
	for _, w := range []string{
		"FAIL  gpu.fabric          GPU 2 (0018:01:00.0): fabric registration completed with error ERROR_INSUFFICIENT_RESOURCES",
		"degraded_bw=true, incorrect_configuration=insufficient_nvlinks",
		"FAIL  gpu.imex            no usable IMEX channel",
		"hint: as root: mkdir -p /dev/nvidia-caps-imex-channels && mknod /dev/nvidia-caps-imex-channels/channel0 c 234 0",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("failed tray: output lacks %q:\n%s", w, out)
		}
	}
	if code != 1 {
		t.Errorf("failed tray: exit %d", code)
	}

	root = checkRoot(t, "gb200-nvl72-tray")
	if out, code := runCheck(t, "--root", root, "--interval", "0", "--only", "gpu.fabric,gpu.imex"); code != 0 ||
		!strings.Contains(out, "PASS  gpu.fabric") || !strings.Contains(out, "PASS  gpu.imex") {
		t.Errorf("healthy tray: exit %d\n%s", code, out)
	}
	if err := os.Remove(filepath.Join(root, "dev/nvidia-caps-imex-channels/channel0")); err != nil {
		t.Fatal(err)
	}
	if out, code := runCheck(t, "--root", root, "--interval", "0", "--only", "gpu.imex"); code != 1 || !strings.Contains(out, "FAIL  gpu.imex") {
		t.Errorf("pretrain without channel: exit %d\n%s", code, out)
	}
	if out, code := runCheck(t, "--root", root, "--interval", "0", "--only", "gpu.imex", "--profile", "inference"); code != 0 || !strings.Contains(out, "WARN  gpu.imex") {
		t.Errorf("inference without channel: exit %d\n%s", code, out)
	}
}
