package fakesystest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRoot(t *testing.T) {
	root := Root(t, "dgx-h100")
	for _, p := range []string{"sys/bus/pci/devices", "proc/cpuinfo", "nvml.json"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("root of dgx-h100: %v", err)
		}
	}
}
