package discover

import (
	"archive/tar"
	"compress/bzip2"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// extractCapture unpacks one of hwloc's test captures (a .tar.bz2 of
// sys/ and proc/, links kept) under dir and returns its root. Only
// regular files, directories and relative links that stay inside the
// capture are made.
func extractCapture(t *testing.T, archive, dir string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(bzip2.NewReader(f))
	top := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") {
			t.Fatalf("%s: entry %q outside the capture", archive, h.Name)
		}
		if top == "" {
			top, _, _ = strings.Cut(name, string(filepath.Separator))
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(io.LimitReader(tr, 1<<20)); err == nil {
					err = os.WriteFile(p, b, 0o644)
				}
			}
		case tar.TypeSymlink:
			if filepath.IsAbs(h.Linkname) {
				continue
			}
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.Symlink(h.Linkname, p)
			}
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", archive, h.Name, err)
		}
	}
	return filepath.Join(dir, top)
}

// A real capture without a PCI bus in sysfs and with NUL-terminated
// cpulists (testdata/hwloc/README.md): discovery answers, with the NUMA
// layout hwloc's own expected output gives it, and says it could not
// place GPUs or NICs.
func TestHwlocCaptureWithoutPCIBus(t *testing.T) {
	root := extractCapture(t, filepath.Join("testdata", "hwloc", "128arm-2pa2n8cluster4co.tar.bz2"), t.TempDir())
	n, err := Discover(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if !n.NoPCIBus || !hasWarning(n, "no PCI bus in sysfs") || len(n.GPUs) != 0 {
		t.Errorf("NoPCIBus %v, %d GPUs, warnings %q", n.NoPCIBus, len(n.GPUs), n.Warnings)
	}
	want := []string{"0-31", "32-63", "64-95", "96-127"}
	if len(n.NUMANodes) != len(want) {
		t.Fatalf("NUMA nodes %+v, want 4", n.NUMANodes)
	}
	for i, w := range want {
		if n.NUMANodes[i].ID != i || n.NUMANodes[i].CPUs.String() != w {
			t.Errorf("NUMA node %d: %d %s, want %d %s", i, n.NUMANodes[i].ID, n.NUMANodes[i].CPUs, i, w)
		}
	}
	if n.CPU.Online.String() != "0-127" || hasWarning(n, "invalid cpu set") {
		t.Errorf("online %s, warnings %q", n.CPU.Online, n.Warnings)
	}
}
