// Package atomicfile writes a file so that readers see the old content or
// the new one, never a part: a temporary file in the same directory,
// created with O_CREAT|O_EXCL|O_NOFOLLOW, written, fsynced and renamed over
// the target (the directory is fsynced too, so the rename survives a crash).
// WriteFiles does the same for several files as one generation.
//
// The rename replaces whatever is at the target, a symlink itself included,
// never what a symlink points at, so a link planted at the target cannot
// redirect the write. Every step goes through one open handle on the
// directory (an os.Root), and a directory another user could race in is
// refused before anything is written: one writable by others without the
// sticky bit, or one owned by a user other than us or root (ErrUnsafeDir).
//
// It also holds the one rule for which directories are trusted (CheckDir):
// a destination of a write, or a directory whose files other users'
// programs act on (the agent's state directory), which must be more
// strictly ours.
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
	if _, err := CheckDir(dir, fi, ForWrite); err != nil {
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

// Trust is what a directory is checked for (CheckDir). The rules differ
// on purpose: a file written for a person may land in /tmp, but files
// that launchers on every rank act on without looking (the agent's
// state directory: environment, bindings) must come from a directory no
// other user could have written at all.
type Trust int

const (
	// ForWrite is a destination of Write, WriteFunc and WriteFiles: no
	// other user may rename, remove or replace what is in it during the
	// write. It is writable by others only with the sticky bit (as
	// /tmp), and owned by us or root. Refusals wrap ErrUnsafeDir.
	ForWrite Trust = iota
	// ForReaders is a directory whose files other users' programs trust
	// (the agent's state directory, which cache.Load reads for env and
	// cpumap): writable by its owner alone (not by its group, not a
	// sticky /tmp), owned by root or us, or by another user where the
	// parent is root's alone (systemd's RuntimeDirectory= of a
	// DynamicUser= agent), so that user could not have made it itself
	// somewhere shared. Refusals wrap ErrUntrusted.
	ForReaders
)

// ErrUntrusted is wrapped when a directory (CheckDir ForReaders) or a
// file in it (CheckFile) could have been written by another user.
var ErrUntrusted = errors.New("not trusted")

// CheckDir checks directory dir, described by fi (its Stat, taken through
// the handle the caller goes on to use), against rule t, and returns its
// owner's uid (0 where the file system gives none), which CheckFile
// matches the files in it against. The error names dir.
func CheckDir(dir string, fi fs.FileInfo, t Trust) (uint32, error) {
	if t == ForReaders {
		return checkReaders(dir, fi)
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("%s: not a directory", dir)
	}
	if fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return 0, fmt.Errorf("directory %s is writable by others without the sticky bit: %w", dir, ErrUnsafeDir)
	}
	owner, ok := ownerOf(fi)
	if ok && owner != 0 && owner != uint32(os.Geteuid()) {
		return 0, fmt.Errorf("directory %s is owned by uid %d, neither us (uid %d) nor root: %w", dir, owner, os.Geteuid(), ErrUnsafeDir)
	}
	return owner, nil
}

// checkReaders is CheckDir's ForReaders rule.
func checkReaders(dir string, fi fs.FileInfo) (uint32, error) {
	if !fi.IsDir() {
		return 0, fmt.Errorf("%s: %w: not a directory", dir, ErrUntrusted)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return 0, fmt.Errorf("%s: %w: the directory is writable by its group or others (mode %04o)", dir, ErrUntrusted, perm)
	}
	owner, ok := ownerOf(fi)
	if !ok || owner == 0 || owner == uint32(os.Geteuid()) {
		return owner, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	parent := filepath.Dir(abs)
	pfi, err := os.Stat(parent)
	if err != nil {
		return 0, err
	}
	if pOwner, _ := ownerOf(pfi); pOwner != 0 || pfi.Mode().Perm()&0o022 != 0 || pfi.Mode()&fs.ModeSticky != 0 {
		return 0, fmt.Errorf("%s: %w: the directory is owned by uid %d, not by root or this user (uid %d), and its parent %s is not root's alone",
			dir, ErrUntrusted, owner, os.Geteuid(), parent)
	}
	return owner, nil
}

// CheckFile checks a file, described by fi, in a directory CheckDir
// passed ForReaders: owned by root, us or the directory's owner
// (dirOwner), and writable by neither its group nor others. The error
// names path and wraps ErrUntrusted.
func CheckFile(path string, fi fs.FileInfo, dirOwner uint32) error {
	if owner, ok := ownerOf(fi); ok && owner != 0 && owner != uint32(os.Geteuid()) && owner != dirOwner {
		return fmt.Errorf("%s: %w: the file is owned by uid %d, not by root, this user (uid %d) or the directory's owner (uid %d)",
			path, ErrUntrusted, owner, os.Geteuid(), dirOwner)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s: %w: the file is writable by its group or others (mode %04o)", path, ErrUntrusted, perm)
	}
	return nil
}

func ownerOf(fi fs.FileInfo) (uint32, bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid, true
	}
	return 0, false
}
