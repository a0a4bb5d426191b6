package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// snapshot --demo writes the example machine --demo reads: topo reads the
// same node from the directory as from memory. A directory with files in
// it is refused.
func TestSnapshotDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p5")
	if _, errOut, err := runErr(t, "snapshot", "--demo", "aws-p5", "-f", dir); err != nil || !strings.Contains(errOut, "aws-p5 written to "+dir) {
		t.Fatalf("snapshot --demo: %v\n%s", err, errOut)
	}
	for _, f := range []string{"nvml.json", "sys/bus/pci/devices", "proc/cpuinfo"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the written root has no %s: %v", f, err)
		}
	}
	fromDir := mustRun(t, "topo", "-o", "json", "--root", dir)
	fromMemory := mustRun(t, "topo", "-o", "json", "--demo", "aws-p5")
	if strings.ReplaceAll(fromMemory, "demo:aws-p5", dir) != fromDir {
		t.Errorf("topo of the written root differs from topo --demo aws-p5")
	}
	if _, _, err := runErr(t, "snapshot", "--demo", "aws-p5", "-f", dir); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("snapshot --demo into a full directory: %v", err)
	}
}
