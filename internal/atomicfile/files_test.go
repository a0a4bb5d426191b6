package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = string(b)
	}
	return got
}

// TestWriteFiles: a generation replaces the files, removes the ones
// marked Remove, gives each its mode, and leaves no temporary file.
func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"env": "old env\n", "stale": "old\n", "other": "not ours\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	err := WriteFiles(dir, []File{
		{Name: "env", Data: []byte("new env\n"), Perm: 0o644},
		{Name: "stale", Remove: true},
		{Name: "gone", Remove: true}, // not there: fine
		{Name: "topology.json", Data: []byte("{}\n"), Perm: 0o640},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"env": "new env\n", "other": "not ours\n", "topology.json": "{}\n"}
	if got := readAll(t, dir); len(got) != len(want) || got["env"] != want["env"] || got["other"] != want["other"] || got["topology.json"] != want["topology.json"] {
		t.Errorf("dir holds %q, want %q", got, want)
	}
	for name, perm := range map[string]os.FileMode{"env": 0o644, "topology.json": 0o640} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != perm {
			t.Errorf("%s: mode %v, %v; want %v", name, fi.Mode(), err, perm)
		}
	}
}

// TestWriteFilesPartWay: a generation that fails part way (here the
// second file's temporary name is too long for the file system, as a
// full disk fails a write) renames nothing, leaves every old file as it
// was and no temporary file behind.
func TestWriteFilesPartWay(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("n", 250) // fits; ".<long>.tmp-<random>" does not
	old := map[string]string{"env": "old env\n", "stale": "old\n", long: "old long\n"}
	for name, data := range old {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := WriteFiles(dir, []File{
		{Name: "env", Data: []byte("new env\n"), Perm: 0o644},
		{Name: "stale", Remove: true},
		{Name: long, Data: []byte("new long\n"), Perm: 0o644},
		{Name: "topology.json", Data: []byte("{}\n"), Perm: 0o644},
	})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, long)) {
		t.Fatalf("err = %v, want one naming the file that failed", err)
	}
	got := readAll(t, dir)
	if len(got) != len(old) {
		t.Errorf("dir holds %d files, want the %d old ones: %q", len(got), len(old), got)
	}
	for name, data := range old {
		if got[name] != data {
			t.Errorf("%.20s = %q, want the old %q", name, got[name], data)
		}
	}
}

// TestWriteFilesRefuses: an unsafe directory and a name that is not one
// element are refused before anything is written.
func TestWriteFilesRefuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(dir, []File{{Name: "x", Data: []byte("x")}}); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), dir) {
		t.Errorf("others-writable dir: err = %v, want ErrUnsafeDir naming %s", err, dir)
	}
	os.Chmod(dir, 0o755)
	for _, name := range []string{"", ".", "..", "a/b", "../x"} {
		if err := WriteFiles(dir, []File{{Name: name, Data: []byte("x")}}); err == nil {
			t.Errorf("name %q: no error", name)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote into it: %v", entries)
	}
}

// TestCheckDirRules: the two rules differ where they must: a sticky
// /tmp is a fine destination for a write but no place for files other
// users trust; a group-writable directory is refused for readers.
func TestCheckDirRules(t *testing.T) {
	for _, tc := range []struct {
		mode              os.FileMode
		forWrite, readers bool // accepted
	}{
		{0o755, true, true},
		{0o700, true, true},
		{0o775, true, false},
		{0o777 | os.ModeSticky, true, false},
		{0o777, false, false},
	} {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, tc.mode); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := CheckDir(dir, fi, ForWrite); (err == nil) != tc.forWrite || err != nil && !errors.Is(err, ErrUnsafeDir) {
			t.Errorf("%v ForWrite: %v", tc.mode, err)
		}
		if _, err := CheckDir(dir, fi, ForReaders); (err == nil) != tc.readers || err != nil && !errors.Is(err, ErrUntrusted) {
			t.Errorf("%v ForReaders: %v", tc.mode, err)
		}
	}
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(f, 0o664)
	fi, _ := os.Stat(f)
	if err := CheckFile(f, fi, 0); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "writable by its group or others (mode 0664)") {
		t.Errorf("group-writable file: %v", err)
	}
}
