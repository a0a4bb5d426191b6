// Package atomicfile writes a file so that readers see the old content or
// the new one, never a part: a temporary file in the same directory,
// created with O_CREAT|O_EXCL|O_NOFOLLOW, written, fsynced and renamed over
// the target (the directory is fsynced too, so the rename survives a crash).
//
// The rename replaces whatever is at the target, a symlink itself included,
// never what a symlink points at, so a link planted at the target cannot
// redirect the write. Every step goes through one open handle on the
// directory (an os.Root), and a directory another user could race in is
// refused before anything is written: one writable by others without the
// sticky bit, or one owned by a user other than us or root (ErrUnsafeDir).
package atomicfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafeDir is wrapped by the error for a destination directory that
// another user could change under the write: writable by others without the
// sticky bit, or owned by a user other than us or root.
var ErrUnsafeDir = errors.New("unsafe destination directory")

// Write replaces path with data.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	})
}

// WriteFunc replaces path with what fill writes, as Write does. When fill
// fails, nothing is renamed and the temporary file is removed; fill's error
// is returned as is, so a caller can tell its own error from the write's.
func WriteFunc(path string, perm os.FileMode, fill func(w io.Writer) error) (err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer root.Close()
	fi, err := root.Stat(".")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := CheckDir(dir, fi); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, tmp, err := createTemp(root, "."+base+".tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = root.Rename(tmp, base); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := root.Open("."); err == nil {
		d.Sync() // best effort: some file systems refuse to sync a directory
		d.Close()
	}
	return nil
}

// createTemp creates a new file named prefix plus a random suffix in root,
// mode 0600, refusing to reuse or follow anything already there.
func createTemp(root *os.Root, prefix string) (*os.File, string, error) {
	for range 100 {
		name := prefix + rand.Text()
		f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("create a temporary file: %w", fs.ErrExist)
}

// CheckDir refuses a directory, described by fi, that another user could
// change under a write: writable by others without the sticky bit (anyone
// could rename or remove what is in it), or owned by a user other than us
// or root. The error names dir and wraps ErrUnsafeDir.
func CheckDir(dir string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	if fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("directory %s is writable by others without the sticky bit: %w", dir, ErrUnsafeDir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := int(st.Uid); uid != 0 && uid != os.Geteuid() {
			return fmt.Errorf("directory %s is owned by uid %d, neither us (uid %d) nor root: %w", dir, uid, os.Geteuid(), ErrUnsafeDir)
		}
	}
	return nil
}
