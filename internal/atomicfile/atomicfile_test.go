package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "nccl-topo.xml")
	if err := Write(p, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two\n" {
		t.Fatalf("content %q, %v", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if err := Write(filepath.Join(dir, "missing", "x"), nil, 0o644); err == nil {
		t.Error("want an error for a missing directory")
	}
}

// TestWriteReplacesPlantedLink: a symlink planted at the target is replaced
// by the new file, and what it pointed at is left as it was.
func TestWriteReplacesPlantedLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "out.tar.gz")
	if err := os.Symlink("victim", p); err != nil {
		t.Fatal(err)
	}
	if err := WriteFunc(p, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, "new\n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("victim = %q, want it untouched", b)
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s: %v, %v; want a regular file", p, fi.Mode(), err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Errorf("content %q", b)
	}
}

// TestWriteFuncError: fill's error comes back as is, and nothing is left.
func TestWriteFuncError(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	boom := errors.New("boom")
	if err := WriteFunc(p, 0o644, func(io.Writer) error { return boom }); err != boom {
		t.Errorf("err = %v, want boom", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestWriteRefusesUnsafeDir: a directory others can write without the
// sticky bit, or one owned by another user, is refused with an error that
// names it; a sticky world-writable one (/tmp) is fine.
func TestWriteRefusesUnsafeDir(t *testing.T) {
	t.Run("others-writable", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "shared")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		err := Write(filepath.Join(dir, "x"), []byte("x"), 0o644)
		if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "directory "+dir+" ") {
			t.Errorf("err = %v, want ErrUnsafeDir naming %s", err, dir)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("wrote into it: %v", entries)
		}
	})
	t.Run("sticky", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tmp")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		if err := Write(filepath.Join(dir, "x"), []byte("x"), 0o644); err != nil {
			t.Errorf("sticky dir: %v", err)
		}
	})
	t.Run("other owner", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to chown")
		}
		dir := filepath.Join(t.TempDir(), "theirs")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Skip(err)
		}
		err := Write(filepath.Join(dir, "x"), []byte("x"), 0o644)
		if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), dir) {
			t.Errorf("err = %v, want ErrUnsafeDir naming %s", err, dir)
		}
	})
}
