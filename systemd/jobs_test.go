package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The job audit's drop-in sets ProtectProc=default and nothing else: it
// must not loosen what the audit does not need (README.md, "Job audit").
func TestJobsDropInSetsOnlyProtectProc(t *testing.T) {
	want := unitFile{"Service": {"ProtectProc": {"default"}}}
	if diff := cmp.Diff(want, readUnit(t, "jobs.conf")); diff != "" {
		t.Errorf("jobs.conf (-want +got):\n%s", diff)
	}
	if got := readUnit(t, "gpuaffinity.service")["Service"]["ProtectProc"]; !cmp.Equal(got, []string{"invisible"}) {
		t.Errorf("gpuaffinity.service ProtectProc %q, want invisible: the unit keeps other users' processes hidden by default", got)
	}
}

var protectProcRE = regexp.MustCompile(`(?m)^\s*(\S+) ProtectProc=`)

// With the drop-in in gpuaffinity.service.d beside the unit, systemd
// loads it (systemd-analyze security's ProtectProc line turns from ✓ to
// ✗), verify stays silent and the exposure stays at 2.0 or less. The
// unit runs this test's binary, which exists (verify checks that):
// nothing here depends on the program.
func TestJobsDropInLoads(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile("gpuaffinity.service")
	if err != nil {
		t.Fatal(err)
	}
	dropIn, err := os.ReadFile("jobs.conf")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "gpuaffinity.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), installedBin, self)), 0o644); err != nil {
		t.Fatal(err)
	}
	protectProc := func() string {
		out, err := exec.Command(analyze, "security", "--offline=true", "--no-pager", path).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze security: %v\n%s", err, out)
		}
		m := protectProcRE.FindSubmatch(out)
		if m == nil {
			t.Fatalf("no ProtectProc line in:\n%s", out)
		}
		return string(m[1])
	}
	if got := protectProc(); got != "✓" {
		t.Errorf("the unit alone: ProtectProc %s, want ✓", got)
	}
	if err := os.Mkdir(path+".d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path+".d", "jobs.conf"), dropIn, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := protectProc(); got != "✗" {
		t.Errorf("with jobs.conf: ProtectProc %s, want ✗ (the drop-in not loaded?)", got)
	}
	verify(t, analyze, path)
	v, level := exposure(t, analyze, path)
	t.Logf("gpuaffinity.service with jobs.conf: exposure %.1f %s", v, level)
	if v > 2.0 {
		t.Errorf("exposure with jobs.conf %.1f, want 2.0 or less", v)
	}
}
