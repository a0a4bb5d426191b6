package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The launch-path build (-tags omit_agent) links no metrics library, and
// its agent command runs gpuaffinity-agent from beside it with the same
// arguments; without one it says what to install.
func TestLeanBuildRunsAgentBinary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "omit_agent", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/prometheus/") || strings.HasSuffix(dep, "/gpuaffinity/exporter") {
			t.Errorf("the omit_agent build links %s", dep)
		}
	}
	dir := t.TempDir()
	lean := filepath.Join(dir, "gpuaffinity")
	for _, b := range []struct{ out, tags string }{{lean, "omit_agent"}, {filepath.Join(dir, "gpuaffinity-agent"), ""}} {
		if out, err := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %q: %v\n%s", b.tags, err, out)
		}
	}
	env := append(os.Environ(), "PATH=/nonexistent")
	cmd := exec.Command(lean, "--log-level", "error", "agent", "--demo", "list")
	cmd.Env = env
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "dgx-h100") {
		t.Errorf("lean `agent --demo list`: %v\n%s", err, got)
	}
	os.Remove(filepath.Join(dir, "gpuaffinity-agent"))
	cmd = exec.Command(lean, "agent", "--demo", "list")
	cmd.Env = env
	got, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(got), "install gpuaffinity-agent beside it") {
		t.Errorf("lean `agent` without gpuaffinity-agent: %v\n%s", err, got)
	}
}
