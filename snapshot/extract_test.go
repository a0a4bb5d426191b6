package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// tarEntry is one entry for tarOf.
type tarEntry struct {
	name     string
	typ      byte
	body     string
	linkname string
	mode     int64
}

// tarOf builds an uncompressed tar of entries, in order.
func tarOf(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.linkname, Mode: mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractRefusesUnsafeEntries(t *testing.T) {
	tests := []struct {
		name    string
		entries []tarEntry
	}{
		{"absolute name", []tarEntry{{name: "/tmp/evil", typ: tar.TypeReg, body: "x"}}},
		{"dot-dot name", []tarEntry{{name: "../evil", typ: tar.TypeReg, body: "x"}}},
		{"dot-dot inside name", []tarEntry{{name: "sys/../../evil", typ: tar.TypeReg, body: "x"}}},
		{"absolute link target", []tarEntry{{name: "sys/class/net/eth0", typ: tar.TypeSymlink, linkname: "/etc"}}},
		{"link climbing out", []tarEntry{{name: "sys/class/net/eth0", typ: tar.TypeSymlink, linkname: "../../../../outside"}}},
		// "l" -> "." is inside; "l/up" -> ".." looks inside when read from
		// "l" but lands above the root once "l" resolves.
		{"entry beneath a link", []tarEntry{
			{name: "l", typ: tar.TypeSymlink, linkname: "."},
			{name: "l/up", typ: tar.TypeSymlink, linkname: ".."},
		}},
		{"file beneath a link", []tarEntry{
			{name: "sub/", typ: tar.TypeDir},
			{name: "l", typ: tar.TypeSymlink, linkname: "sub"},
			{name: "l/f", typ: tar.TypeReg, body: "x"},
		}},
		{"file over a link", []tarEntry{
			{name: "l", typ: tar.TypeSymlink, linkname: "target"},
			{name: "l", typ: tar.TypeReg, body: "x"},
		}},
		{"hard link", []tarEntry{{name: "h", typ: tar.TypeLink, linkname: "etc/passwd"}}},
		{"device node", []tarEntry{{name: "dev/sda", typ: tar.TypeBlock}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "root")
			err := Extract(bytes.NewReader(tarOf(t, tc.entries...)), dir)
			if err == nil {
				t.Fatal("Extract accepted it")
			}
			if !errors.Is(err, ErrUnsafeEntry) {
				t.Errorf("err = %v, want ErrUnsafeEntry", err)
			}
			// Nothing was written beside the root.
			names, _ := os.ReadDir(base)
			if len(names) != 1 {
				t.Errorf("Extract wrote beside its root: %v", names)
			}
			if _, err := os.Lstat(filepath.Join(dir, "target")); err == nil {
				t.Errorf("a file was written through a link")
			}
		})
	}
}

func TestExtractNormalizes(t *testing.T) {
	// As real captures are: "./" prefixes, read-only modes, folders listed
	// after their contents, links inside the root.
	data := tarOf(t,
		tarEntry{name: "./sys/devices/pci0000:00/0000:00:06.0/vendor", typ: tar.TypeReg, body: "0x10de\n", mode: 0o444},
		tarEntry{name: "./sys/bus/pci/devices/0000:00:06.0", typ: tar.TypeSymlink, linkname: "../../../devices/pci0000:00/0000:00:06.0"},
		tarEntry{name: "./sys/devices/pci0000:00/", typ: tar.TypeDir, mode: 0o555},
		tarEntry{name: "./", typ: tar.TypeDir, mode: 0o555},
	)
	dir := t.TempDir()
	if err := Extract(bytes.NewReader(data), dir); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "sys/bus/pci/devices/0000:00:06.0/vendor"))
	if err != nil || string(got) != "0x10de\n" {
		t.Errorf("vendor through the bus link = %q, %v", got, err)
	}
	for p, want := range map[string]os.FileMode{
		"sys/devices/pci0000:00":                     os.ModeDir | 0o755,
		"sys/devices/pci0000:00/0000:00:06.0/vendor": 0o644,
	} {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
}
