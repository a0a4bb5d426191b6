package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File is one file of a WriteFiles generation.
type File struct {
	// Name is the file's name in the directory: one element, no '/'.
	Name string
	// Data is its new content; Perm its mode.
	Data []byte
	Perm os.FileMode
	// Remove says the file must not exist in the new generation (an
	// older one's file a reader must not take as current): it is
	// removed, at its place in the order, and Data is not used.
	Remove bool
}

// WriteFiles replaces several files in dir as one generation: each is
// first written in full to a temporary file beside it
// (".<name>.tmp-<random>", as Write names them) and fsynced; only when
// all are written are they renamed into place, in the order given (a
// reader that checks the last file's generation names it last), and the
// directory is fsynced. A write that fails part way (disk full) renames
// nothing and removes its temporary files: every file stays as it was.
// Once the renames have begun, a failed one does not stop the others;
// their errors (and the directory's fsync) are returned joined.
//
// dir is checked as a write destination (CheckDir ForWrite) through the
// handle every step uses; a caller whose readers need more (ForReaders)
// checks that too.
func WriteFiles(dir string, files []File) (err error) {
	for _, f := range files {
		if f.Name == "" || f.Name == "." || f.Name == ".." || filepath.Base(f.Name) != f.Name {
			return fmt.Errorf("write %s: %q is not a file name", dir, f.Name)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	defer root.Close()
	fi, err := root.Stat(".")
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if _, err := CheckDir(dir, fi, ForWrite); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	temps := make(map[string]string, len(files))
	defer func() {
		for _, tmp := range temps {
			root.Remove(tmp)
		}
	}()
	for _, f := range files {
		if f.Remove {
			continue
		}
		tmp, err := writeTemp(root, f)
		if tmp != "" {
			temps[f.Name] = tmp
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(dir, f.Name), err)
		}
	}
	var errs []error
	for _, f := range files {
		if f.Remove {
			if err := root.Remove(f.Name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(dir, f.Name), err))
			}
			continue
		}
		if err := root.Rename(temps[f.Name], f.Name); err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", filepath.Join(dir, f.Name), err))
			continue
		}
		delete(temps, f.Name)
	}
	if d, err := root.Open("."); err == nil {
		if err := d.Sync(); err != nil { // the renames themselves
			errs = append(errs, fmt.Errorf("sync %s: %w", dir, err))
		}
		d.Close()
	}
	return errors.Join(errs...)
}

// writeTemp writes f's data to a new temporary file beside it, with f's
// mode, fsynced and closed, and returns its name (also when it fails
// after creating it, so that the caller removes it).
func writeTemp(root *os.Root, f File) (string, error) {
	fh, tmp, err := createTemp(root, "."+f.Name+".tmp-")
	if err != nil {
		return "", err
	}
	_, err = fh.Write(f.Data)
	if err == nil {
		err = fh.Chmod(f.Perm)
	}
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return tmp, err
}
