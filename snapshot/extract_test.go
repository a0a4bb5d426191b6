package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// tarGzOf is tarOf, gzip-compressed, as a snapshot is.
func tarGzOf(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(tarOf(t, entries...)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestExtractResolvesLinks: a link whose text looks inside but that leaves
// the root once the archive's other links resolve is refused, naming it,
// and no link is made.
func TestExtractResolvesLinks(t *testing.T) {
	// up -> . makes up/up/.../up the root itself; as many ".." then climb
	// that many directories above it, to / for any real depth.
	deep := strings.Repeat("up/", 64) + strings.Repeat("../", 64) + "dev/zero"
	link := func(name, text string) tarEntry { return tarEntry{name: name, typ: tar.TypeSymlink, linkname: text} }
	dir := func(name string) tarEntry { return tarEntry{name: name, typ: tar.TypeDir} }
	tests := []struct {
		name    string
		bad     string // the entry the error must name
		entries []tarEntry
	}{
		{"finding: up -> . and nvml.json -> up/.../../dev/zero", "nvml.json", []tarEntry{
			link("up", "."), link("nvml.json", deep),
		}},
		{"nvml.json first, up after", "nvml.json", []tarEntry{
			link("nvml.json", deep), link("up", "."),
		}},
		{"one up", "sys/x", []tarEntry{
			dir("sys/"), link("sys/up", "."), link("sys/x", "up/up/../../dev/zero"),
		}},
		{"link to a dir, then ..", "sys/a/x", []tarEntry{
			dir("sys/a/"), dir("sys/b/c/"), link("sys/a/down", "../b/c"),
			link("sys/a/x", "down/../../../../etc/passwd"),
		}},
		{"chain of links", "e", []tarEntry{
			dir("a/b/c/"), link("l1", "a/b/c"), link("l2", "l1"), link("l3", "l2"),
			link("e", "l3/../../../../outside"),
		}},
		{"chain through a link to an outside link", "d/out", []tarEntry{
			dir("d/"), link("d/out", "../.."), link("x", "d/out/../d"),
		}},
		{"absolute link in a chain", "d/abs", []tarEntry{
			dir("d/"), link("d/abs", "/etc"), link("x", "d/abs"),
		}},
		{"absolute target", "sys/x", []tarEntry{link("sys/x", "/dev/zero")}},
		{"dot-dot chain", "a/b/x", []tarEntry{link("a/b/x", "../../../dev/zero")}},
		{"missing component then ..", "x", []tarEntry{link("x", "missing/../../dev/zero")}},
		{"loop", "a", []tarEntry{link("a", "b"), link("b", "a")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "root")
			err := Extract(bytes.NewReader(tarGzOf(t, tc.entries...)), root)
			if err == nil {
				t.Fatal("Extract accepted it")
			}
			if !errors.Is(err, ErrUnsafeEntry) || !strings.Contains(err.Error(), filepath.Join(root, tc.bad)) {
				t.Errorf("err = %v, want ErrUnsafeEntry naming %s", err, filepath.Join(root, tc.bad))
			}
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type()&fs.ModeSymlink != 0 {
					t.Errorf("link made: %s", p)
				}
				return nil
			})
		})
	}
}

// TestExtractResolvesLinksAlreadyThere: a link already in the target dir
// is followed too.
func TestExtractResolvesLinksAlreadyThere(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	data := tarGzOf(t, tarEntry{name: "x", typ: tar.TypeSymlink, linkname: "out/../dev/zero"})
	err := Extract(bytes.NewReader(data), root)
	if !errors.Is(err, ErrUnsafeEntry) || !strings.Contains(err.Error(), filepath.Join(root, "x")) {
		t.Errorf("err = %v, want ErrUnsafeEntry naming %s", err, filepath.Join(root, "x"))
	}
	if _, err := os.Lstat(filepath.Join(root, "x")); err == nil {
		t.Error("link made")
	}
}

// TestExtractKeepsInsideLinks: links that resolve inside the root, through
// other links, before their target is extracted, or dangling without
// climbing out, are made with their exact text.
func TestExtractKeepsInsideLinks(t *testing.T) {
	link := func(name, text string) tarEntry { return tarEntry{name: name, typ: tar.TypeSymlink, linkname: text} }
	data := tarGzOf(t,
		link("sys/bus/pci/devices/0000:01:00.0", "../../../devices/pci0000:00/0000:01:00.0"),
		link("sys/class/net/eth0", "../../bus/pci/devices/0000:01:00.0/net/eth0"),
		tarEntry{name: "sys/devices/pci0000:00/0000:01:00.0/net/eth0/address", typ: tar.TypeReg, body: "aa\n"},
		link("sys/devices/pci0000:00/0000:01:00.0/driver", "../../../bus/pci/drivers/mlx5_core"),
		link("up", "."),
		link("self", "up/up/up/sys/../sys/class/net/eth0/../eth0"),
		link("dangling", "sys/missing/deeper/../x"),
	)
	root := t.TempDir()
	if err := Extract(bytes.NewReader(data), root); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	for _, p := range []string{"sys/class/net/eth0/address", "self/address"} {
		if b, err := os.ReadFile(filepath.Join(root, p)); err != nil || string(b) != "aa\n" {
			t.Errorf("%s = %q, %v", p, b, err)
		}
	}
	if got, err := os.Readlink(filepath.Join(root, "dangling")); err != nil || got != "sys/missing/deeper/../x" {
		t.Errorf("dangling = %q, %v", got, err)
	}
}
