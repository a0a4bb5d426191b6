package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// Every command on a root whose every file is a FIFO or a link to
// /dev/zero returns (an error, or a degraded answer), within a deadline,
// and never panics.
func TestCommandsOnHostileRoot(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	root := fakesystest.Root(t, "dgx-h100")
	n := 0
	for _, top := range []string{"sys", "proc"} {
		filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			os.Remove(p)
			if n%2 == 0 {
				err = syscall.Mkfifo(p, 0o644)
			} else {
				err = os.Symlink("/dev/zero", p)
			}
			n++
			if err != nil {
				t.Fatal(err)
			}
			return nil
		})
	}
	nv := filepath.Join(root, "nvml.json")
	os.Remove(nv)
	if err := syscall.Mkfifo(nv, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{
		{"topo", "-o", "json"},
		{"env", "--local-rank", "0"},
		{"cpumap"},
		{"gres"},
		{"nccl-topo", "-f", out},
		{"cufile", "-f", out},
		{"check", "--interval", "1ms"},
	} {
		args = append(args, "--root", root)
		done := make(chan error, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- nil
					t.Errorf("%s: panic: %v", strings.Join(args, " "), p)
				}
			}()
			_, _, err := runErr(t, args...)
			done <- err
		}()
		select {
		case err := <-done:
			t.Logf("%s: %v", args[0], err)
		case <-time.After(60 * time.Second):
			t.Fatalf("%s on a root of %d FIFOs and /dev/zero links does not return", strings.Join(args, " "), n)
		}
	}
}

// A root without a PCI bus in sysfs (a partial mount of /sys, a kernel
// built without PCI): topo answers with the CPUs and a warning naming the
// missing bus, cpumap and check fail saying what they could not see.
func TestCommandsWithoutPCIBus(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	if err := os.RemoveAll(filepath.Join(root, "sys/bus/pci")); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runErr(t, "topo", "--root", root)
	if err != nil || !strings.Contains(out, "no PCI bus in sysfs") || !strings.Contains(out, "No GPUs or NICs found") {
		t.Errorf("topo: %v\n%s%s", err, out, stderr)
	}
	js, _, err := runErr(t, "topo", "-o", "json", "--root", root)
	if err != nil || !strings.Contains(js, `"no_pci_bus": true`) {
		t.Errorf("topo -o json: %v, no no_pci_bus", err)
	}
	if _, _, err := runErr(t, "cpumap", "--root", root); err == nil || !strings.Contains(err.Error(), "no PCI bus in sysfs") {
		t.Errorf("cpumap: %v, want an error naming the missing bus", err)
	}
	out, _, err = runErr(t, "check", "--root", root)
	if err == nil || !strings.Contains(out, "gpu.count           no PCI bus in sysfs") {
		t.Errorf("check: %v\n%s", err, out)
	}
}
