package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	gpunvml "github.com/gpuaffinity/gpuaffinity/nvml"
)

// readWithFaults is readBounded plus what only real sysfs does: unpopulated
// GID entries read as EINVAL, and one counter vanishes between the listing
// and the read (a NIC unplugged mid-snapshot).
func readWithFaults(root *os.Root, name string, limit int64) ([]byte, error) {
	switch {
	case strings.HasSuffix(name, "/gids/2"), strings.HasSuffix(name, "/gid_attrs/types/2"):
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EINVAL}
	case strings.HasSuffix(name, "/counters/port_xmit_data"):
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOENT}
	}
	return readBounded(root, name, limit)
}

// walkTree returns every path below dir: "d" for a directory, "f:"+content
// for a file, "l:"+text for a link.
func walkTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			text, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "l:" + text
		case d.IsDir():
			out[rel] = "d"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "f:" + string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// snapshotWithFaults snapshots opts into a fresh directory through
// readWithFaults and returns the directory, its contents and the report.
func snapshotWithFaults(t *testing.T, opts Options) (string, map[string]string, Report) {
	t.Helper()
	tr, rep, err := collect(opts, readWithFaults)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := filepath.Join(t.TempDir(), "snap")
	if err := tr.writeDir(out); err != nil {
		t.Fatalf("writeDir: %v", err)
	}
	return out, walkTree(t, out), rep
}

func TestSnapshotCopiesAllowlist(t *testing.T) {
	f := buildFakeRoot(t)
	_, got, rep := snapshotWithFaults(t, Options{Root: f.dir})

	for p, content := range f.want {
		if got[p] != "f:"+content {
			t.Errorf("%s: got %.60q, want file %.60q", p, got[p], content)
		}
	}
	for p, text := range f.wantLinks {
		if got[p] != "l:"+text {
			t.Errorf("%s: got %q, want link %q", p, got[p], text)
		}
	}
	for _, d := range f.wantDirs {
		if got[d] != "d" {
			t.Errorf("%s: got %q, want an (empty) directory", d, got[d])
		}
		for p := range got {
			if strings.HasPrefix(p, d+"/") {
				t.Errorf("%s: want empty, holds %s", d, p)
			}
		}
	}
	for _, p := range f.forbidden {
		if v, ok := got[p]; ok {
			t.Errorf("%s: must not be in the snapshot, got %.40q", p, v)
		}
	}
	// Nothing beyond what was asked for.
	var files, links, dirs int
	for p, v := range got {
		switch {
		case v == "d":
			dirs++
		case strings.HasPrefix(v, "l:"):
			links++
			if _, ok := f.wantLinks[p]; !ok {
				t.Errorf("%s: unexpected link %q", p, v)
			}
		default:
			files++
			if _, ok := f.want[p]; !ok && p != gpunvml.ReplayFileName {
				t.Errorf("%s: unexpected file", p)
			}
			if strings.Contains(v, "outside-secret") {
				t.Errorf("%s: holds a file from outside the root", p)
			}
		}
	}

	wantSkipped := map[string]int{
		"EINVAL":            4, // gids/2 and gid_attrs/types/2 on two ports
		"write-only":        1, // hugepages demote
		"link outside root": 3, // class/net/evil, class/net/abs, numa_node
	}
	if diff := cmp.Diff(wantSkipped, rep.Skipped); diff != "" {
		t.Errorf("Skipped (-want +got):\n%s", diff)
	}
	var vanished int
	for _, w := range rep.Warnings {
		if strings.Contains(w, "port_xmit_data") && strings.Contains(w, "changed while") {
			vanished++
		}
	}
	if vanished != 2 || len(rep.Warnings) != 5 {
		t.Errorf("Warnings: want 2 vanished counters and 3 links not followed, got %q", rep.Warnings)
	}
	if rep.Files != files || rep.Links != links || rep.Dirs != dirs {
		t.Errorf("Report counts files/links/dirs = %d/%d/%d, tree has %d/%d/%d", rep.Files, rep.Links, rep.Dirs, files, links, dirs)
	}
	if want := filepath.Join(f.dir, "nvml.json"); rep.NVML != want {
		t.Errorf("Report.NVML = %q, want %q", rep.NVML, want)
	}
	var nf gpunvml.ReplayFile
	if err := json.Unmarshal([]byte(strings.TrimPrefix(got["nvml.json"], "f:")), &nf); err != nil {
		t.Fatalf("nvml.json: %v", err)
	}
	if len(nf.Devices) != 1 || nf.Devices[0].UUID.Value != fakeUUID || nf.Devices[0].PCI.Value.BusID != "00000000:04:00.0" {
		t.Errorf("nvml.json devices = %+v, want the one GPU of the source's nvml.json", nf.Devices)
	}
}

func TestWriteDirAndTarGzAgree(t *testing.T) {
	f := buildFakeRoot(t)
	opts := Options{Root: f.dir}

	dir := filepath.Join(t.TempDir(), "snap")
	repDir, err := WriteDir(opts, dir)
	if err != nil {
		t.Fatalf("WriteDir: %v", err)
	}
	var tgz1, tgz2 bytes.Buffer
	repTar, err := WriteTarGz(opts, &tgz1)
	if err != nil {
		t.Fatalf("WriteTarGz: %v", err)
	}
	if _, err := WriteTarGz(opts, &tgz2); err != nil {
		t.Fatalf("WriteTarGz: %v", err)
	}
	if !bytes.Equal(tgz1.Bytes(), tgz2.Bytes()) {
		t.Errorf("two snapshots of one root differ (%d and %d bytes)", tgz1.Len(), tgz2.Len())
	}
	if diff := cmp.Diff(repDir, repTar); diff != "" {
		t.Errorf("reports differ (-dir +tar):\n%s", diff)
	}

	extracted := t.TempDir()
	if err := Extract(bytes.NewReader(tgz1.Bytes()), extracted); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if diff := cmp.Diff(walkTree(t, dir), walkTree(t, extracted)); diff != "" {
		t.Errorf("WriteDir and WriteTarGz+Extract differ (-dir +tar):\n%s", diff)
	}

	// The tarball is sorted, parents first, with fixed owners and times.
	zr, err := gzip.NewReader(bytes.NewReader(tgz1.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		names = append(names, name)
		seen[name] = true
		if parent := filepath.Dir(name); parent != "." && !seen[parent] {
			t.Errorf("%s comes before its directory", name)
		}
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v uid %d gid %d %q/%q, want all zero", name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		wantMode := map[byte]int64{tar.TypeDir: 0o755, tar.TypeReg: 0o644, tar.TypeSymlink: 0o777}[h.Typeflag]
		if h.Mode != wantMode {
			t.Errorf("%s: mode %o, want %o", name, h.Mode, wantMode)
		}
	}
	if !slices.IsSortedFunc(names, compareSlashPath) {
		t.Errorf("tar entries are not sorted by path")
	}
}

func TestReportString(t *testing.T) {
	r := Report{Files: 3, Links: 2, Dirs: 1, Skipped: map[string]int{"write-only": 1, "EINVAL": 5}, Warnings: []string{"x"}, NVML: "Options.NVML"}
	want := "3 files, 2 links, 1 dirs; skipped 5 EINVAL, 1 write-only; 1 warnings; nvml.json from Options.NVML"
	if got := r.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestWriteDirRefusesNonEmpty(t *testing.T) {
	f := buildFakeRoot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := WriteDir(Options{Root: f.dir}, dir)
	if !errors.Is(err, errNotEmpty) || !strings.Contains(err.Error(), dir) {
		t.Errorf("WriteDir into a non-empty dir: err = %v, want errNotEmpty naming %s", err, dir)
	}
}

func TestSnapshotOfSnapshotIsIdentical(t *testing.T) {
	// A snapshot is a root too; snapshotting it again changes nothing,
	// which is what lets a scrubbed snapshot be re-taken from the raw one.
	f := buildFakeRoot(t)
	first := filepath.Join(t.TempDir(), "first")
	if _, err := WriteDir(Options{Root: f.dir}, first); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(t.TempDir(), "second")
	rep, err := WriteDir(Options{Root: first}, second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(walkTree(t, first), walkTree(t, second)); diff != "" {
		t.Errorf("snapshot of a snapshot differs (-first +second):\n%s", diff)
	}
	if len(rep.Warnings) != 0 {
		t.Errorf("warnings on a snapshot's snapshot: %q", rep.Warnings)
	}
}

func TestOversizeFileIsSkipped(t *testing.T) {
	f := newFakeRoot(t)
	f.write("sys/devices/system/cpu/online", strings.Repeat("0,", attrLimit), 0o444)
	f.write("proc/cpuinfo", strings.Repeat("x", attrLimit*2), 0o444) // under procLimit
	_, got, rep := snapshotWithFaults(t, Options{Root: f.dir})
	if _, ok := got["sys/devices/system/cpu/online"]; ok {
		t.Errorf("a file over %d bytes was copied", attrLimit)
	}
	if _, ok := got["proc/cpuinfo"]; !ok {
		t.Errorf("proc/cpuinfo under its 4 MiB bound was not copied")
	}
	if rep.Skipped["larger than 65536 bytes"] != 1 {
		t.Errorf("Skipped = %v, want one larger than 65536 bytes", rep.Skipped)
	}
}

func TestMissingRootFails(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := WriteTarGz(Options{Root: missing}, io.Discard)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("err = %v, want ErrNotExist naming %s", err, missing)
	}
}
