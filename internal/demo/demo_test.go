package demo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// An unknown name, or one that tries to leave the image directory, is
// ErrUnknownMachine with the message cmd has always printed.
func TestUnknownMachine(t *testing.T) {
	for _, name := range []string{"", "nope", "../demo", "images/dgx-h100", "dgx-h100.img.gz"} {
		_, _, err := Memory(name)
		if !errors.Is(err, ErrUnknownMachine) {
			t.Errorf("Memory(%q): %v; want ErrUnknownMachine", name, err)
			continue
		}
		if want := `machine "` + name + `": unknown machine`; err.Error() != want {
			t.Errorf("Memory(%q): %q; want %q", name, err, want)
		}
		if err := Write(name, t.TempDir()); !errors.Is(err, ErrUnknownMachine) {
			t.Errorf("Write(%q): %v; want ErrUnknownMachine", name, err)
		}
	}
}

// Every image loads; a machine with NVML answers has its replayer and an
// nvml.json that Write puts on disk byte for byte.
func TestMachines(t *testing.T) {
	names := Machines()
	if len(names) < 30 {
		t.Fatalf("%d machines: %v", len(names), names)
	}
	for _, name := range names {
		r, lib, err := Memory(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := r.Stat("sys"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if lib == nil {
			if _, err := r.Stat(nvml.ReplayFileName); err == nil {
				t.Errorf("%s: nvml.json without NVML answers", name)
			}
		}
	}
	dir := t.TempDir()
	if err := Write("dgx-h100", dir); err != nil {
		t.Fatal(err)
	}
	r, lib, err := Memory("dgx-h100")
	if err != nil || lib == nil {
		t.Fatalf("dgx-h100: %v, NVML %v", err, lib != nil)
	}
	want, err := r.ReadFile(nvml.ReplayFileName, nvml.MaxReplayFileSize)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, nvml.ReplayFileName))
	if err != nil || string(got) != string(want) {
		t.Errorf("nvml.json on disk differs from the in-memory root's (%v)", err)
	}
}
