package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

// needTool finds a program, failing in CI (testenv.InCI) and skipping elsewhere
// when it is missing.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/bin", "/bin", "/usr/sbin"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				return filepath.Join(dir, name)
			}
		}
		if testenv.InCI() {
			t.Fatalf("%s missing under CI (Debian package %s; make test installs it)", name, pkg)
		}
		t.Skipf("%s not installed (Debian package %s)", name, pkg)
	}
	return p
}

// installedBin is where the unit runs the binary from: where the .deb
// and .rpm put it (deploy/internal/pkgbuild).
const installedBin = "/usr/bin/gpuaffinity"

// buildAgent builds gpuaffinity (the full build, agent included) into
// dir and returns its path.
func buildAgent(t *testing.T, dir string) string {
	t.Helper()
	goTool := needTool(t, "go", "golang")
	bin := filepath.Join(dir, "gpuaffinity")
	build := exec.Command(goTool, "build", "-o", bin, "../cmd/gpuaffinity")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// unitCopy writes gpuaffinity.service into a directory of its own with
// ExecStart pointing at a freshly built gpuaffinity (verify checks that
// the binary exists), and gpuaffinity.socket beside it unchanged.
func unitCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := buildAgent(t, dir)
	unit, err := os.ReadFile("gpuaffinity.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart="+installedBin+" agent ") {
		t.Fatalf("ExecStart no longer runs %s agent", installedBin)
	}
	path := filepath.Join(dir, "gpuaffinity.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), installedBin, bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	socket, err := os.ReadFile("gpuaffinity.socket")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gpuaffinity.socket"), socket, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// verify runs systemd-analyze verify on unit files and fails the test on
// any line about gpuaffinity or a non-zero exit. verify adds each file's
// directory to the unit search path, so the socket finds its service.
func verify(t *testing.T, analyze string, units ...string) {
	t.Helper()
	out, err := exec.Command(analyze, append([]string{"verify"}, units...)...).CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "gpuaffinity") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// systemd-analyze verify has nothing to say about the unit.
func TestUnitVerifies(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	verify(t, analyze, unitCopy(t))
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+) (\S+)`)

// exposure runs systemd-analyze security --offline=true on a unit file.
func exposure(t *testing.T, analyze, unit string) (float64, string) {
	t.Helper()
	out, err := exec.Command(analyze, "security", "--offline=true", "--no-pager", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security %s: %v\n%s", unit, err, out)
	}
	m := exposureRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, string(m[2])
}

// The unit's exposure, next to Debian's node_exporter unit (a common
// exporter unit with no hardening): lower is better, 10 is unprotected.
func TestUnitExposure(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	ours, level := exposure(t, analyze, unitCopy(t))
	t.Logf("gpuaffinity.service: exposure %.1f %s", ours, level)
	if ours > 2.0 {
		t.Errorf("gpuaffinity.service exposure %.1f, want 2.0 or less", ours)
	}
	const ne = "/lib/systemd/system/prometheus-node-exporter.service"
	if _, err := os.Stat(ne); err != nil {
		t.Logf("no %s to compare with", ne)
		return
	}
	theirs, level := exposure(t, analyze, ne)
	t.Logf("prometheus-node-exporter.service (Debian): exposure %.1f %s", theirs, level)
	if ours >= theirs {
		t.Errorf("gpuaffinity.service (%.1f) is no better than node_exporter's (%.1f)", ours, theirs)
	}
}
