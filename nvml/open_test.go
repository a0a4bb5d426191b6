package nvml

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpen(t *testing.T) {
	replayRoot := t.TempDir()
	data, err := json.Marshal(failuresFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(replayRoot, ReplayFileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	badRoot := t.TempDir()
	if err := os.WriteFile(filepath.Join(badRoot, ReplayFileName), []byte(`{"version": 9}`), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, root, source string
		wantLib            bool
		wantErr            string
	}{
		{name: "live", root: "/", source: SourceLive, wantLib: true},
		{name: "live, unclean", root: "/tmp/..//", source: SourceLive, wantLib: true},
		{name: "replay", root: replayRoot, source: SourceReplay, wantLib: true},
		{name: "replay, trailing slash", root: replayRoot + "/", source: SourceReplay, wantLib: true},
		{name: "no nvml.json", root: t.TempDir(), source: SourceNone},
		{name: "missing root", root: filepath.Join(t.TempDir(), "nope"), source: SourceNone},
		{name: "bad nvml.json", root: badRoot, source: SourceNone, wantErr: filepath.Join(badRoot, ReplayFileName)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib, source, err := Open(tc.root)
			if source != tc.source || (lib != nil) != tc.wantLib {
				t.Errorf("Open(%q) = %v, %q; want source %q, a library %v", tc.root, lib, source, tc.source, tc.wantLib)
			}
			if (err != nil) != (tc.wantErr != "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Open(%q) error = %v, want one naming %q", tc.root, err, tc.wantErr)
			}
		})
	}

	lib, _, _ := Open(replayRoot)
	if got := Read(lib); len(got.GPUs) != 3 {
		t.Errorf("Read(Open(replay)) = %d GPUs, want 3", len(got.GPUs))
	}
}

// TestOpenLive reads the live library: on a host without the NVIDIA driver
// (CI, laptops) Read must say it is not found, never crash; on a GPU host
// it must find GPUs.
func TestOpenLive(t *testing.T) {
	lib, _, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	got := Read(lib)
	if !got.Available {
		if !errors.Is(got.Err, ErrLibraryNotFound) && !errors.Is(got.Err, ErrUnavailable) {
			t.Errorf("live Read: Err = %v, want ErrLibraryNotFound or ErrUnavailable", got.Err)
		}
		t.Logf("no live NVML here: %v", got.Err)
		return
	}
	if len(got.GPUs) == 0 {
		t.Errorf("live NVML answered but listed no GPUs: %+v", got)
	}
	for _, g := range got.GPUs {
		t.Logf("GPU %d %s %s %s state %s", g.Index, g.BusID, g.Name, g.UUID, g.State)
	}
}
