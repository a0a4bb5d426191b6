package snapshot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
)

// TestWriteTarGzFileReplacesPlantedLink: `snapshot -f out.tar.gz` with
// out.tar.gz -> victim planted beside it replaces the link with the archive
// and leaves victim as it was.
func TestWriteTarGzFileReplacesPlantedLink(t *testing.T) {
	f := buildFakeRoot(t)
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.tar.gz")
	if err := os.Symlink("victim", out); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteTarGzFile(Options{Root: f.dir}, out); err != nil {
		t.Fatalf("WriteTarGzFile: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("victim = %.40q, want it untouched", b)
	}
	fi, err := os.Lstat(out)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Fatalf("%s: %v, %v; want a regular 0644 file", out, fi.Mode(), err)
	}
	var want bytes.Buffer
	if _, err := WriteTarGz(Options{Root: f.dir}, &want); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s differs from WriteTarGz's stream", out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// TestSnapshotOutputRefusesUnsafeDir: a destination another user could race
// in is refused, with an error naming it, and nothing is written there.
func TestSnapshotOutputRefusesUnsafeDir(t *testing.T) {
	f := buildFakeRoot(t)
	opts := Options{Root: f.dir}
	mkdir := func(t *testing.T, mode os.FileMode, uid int) string {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if uid >= 0 {
			if os.Geteuid() != 0 {
				t.Skip("needs root to chown")
			}
			if err := os.Chown(dir, uid, uid); err != nil {
				t.Skip(err)
			}
		}
		return dir
	}
	empty := func(t *testing.T, dir string) {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("wrote into %s: %v", dir, entries)
		}
	}
	t.Run("tar.gz in a 0777 dir", func(t *testing.T) {
		dir := mkdir(t, 0o777, -1)
		_, err := WriteTarGzFile(opts, filepath.Join(dir, "out.tar.gz"))
		if !errors.Is(err, atomicfile.ErrUnsafeDir) || !strings.Contains(err.Error(), "directory "+dir+" ") {
			t.Errorf("err = %v, want ErrUnsafeDir naming %s", err, dir)
		}
		empty(t, dir)
	})
	t.Run("tar.gz in a sticky 01777 dir", func(t *testing.T) {
		dir := mkdir(t, 0o777|os.ModeSticky, -1)
		if _, err := WriteTarGzFile(opts, filepath.Join(dir, "out.tar.gz")); err != nil {
			t.Errorf("sticky dir: %v", err)
		}
	})
	t.Run("tar.gz in another user's dir", func(t *testing.T) {
		dir := mkdir(t, 0o755, 65534)
		_, err := WriteTarGzFile(opts, filepath.Join(dir, "out.tar.gz"))
		if !errors.Is(err, atomicfile.ErrUnsafeDir) || !strings.Contains(err.Error(), dir) {
			t.Errorf("err = %v, want ErrUnsafeDir naming %s", err, dir)
		}
		empty(t, dir)
	})
	t.Run("DIR owned by another user", func(t *testing.T) {
		dir := mkdir(t, 0o755, 65534)
		_, err := WriteDir(opts, dir)
		if !errors.Is(err, errUnsafeOutput) || !strings.Contains(err.Error(), dir) {
			t.Errorf("err = %v, want errUnsafeOutput naming %s", err, dir)
		}
		empty(t, dir)
	})
	t.Run("DIR is a symlink", func(t *testing.T) {
		base := t.TempDir()
		target := filepath.Join(base, "elsewhere")
		if err := os.Mkdir(target, 0o755); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(base, "snap")
		if err := os.Symlink("elsewhere", dir); err != nil {
			t.Fatal(err)
		}
		_, err := WriteDir(opts, dir)
		if !errors.Is(err, errUnsafeOutput) || !strings.Contains(err.Error(), dir) {
			t.Errorf("err = %v, want errUnsafeOutput naming %s", err, dir)
		}
		empty(t, target)
	})
}
