package fakesys

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// The real capture of a one-GPU H200 KVM guest (../shared/fixtures/h200-vm),
// copied byte for byte.
var (
	//go:embed testdata/h200-vm/sysfs.tar.gz
	h200Sysfs []byte
	//go:embed testdata/h200-vm/nvml-probe.json
	h200Probe []byte
)

// ErrUnsafePath is wrapped when an archive entry would land outside the
// target directory.
var ErrUnsafePath = errors.New("archive path escapes the target directory")

// BuildH200 writes the h200-vm capture into dir: its sys/ and proc/ trees
// as captured (symlinks kept, modes made writable so that temp dirs can be
// removed) and dir/nvml.json converted from the NVML probe.
func BuildH200(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("build %s: %w", H200VM, err)
	}
	if err := untar(bytes.NewReader(h200Sysfs), dir); err != nil {
		return fmt.Errorf("build %s: sysfs.tar.gz: %w", H200VM, err)
	}
	rf, err := nvml.ConvertProbe(bytes.NewReader(h200Probe))
	if err != nil {
		return fmt.Errorf("build %s: nvml-probe.json: %w", H200VM, err)
	}
	data, err := json.MarshalIndent(rf, "", "  ")
	if err != nil {
		return fmt.Errorf("build %s: nvml.json: %w", H200VM, err)
	}
	p := filepath.Join(dir, "nvml.json")
	if err := os.WriteFile(p, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("build %s: %w", H200VM, err)
	}
	return nil
}

// untar unpacks a .tar.gz into dir. It keeps symlinks, refuses entries
// and link targets that leave dir, entries below a symlink, hard links
// and device files.
func untar(r io.Reader, dir string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	links := map[string]bool{}
	made := map[string]bool{".": true}
	mkdirs := func(rel string) error {
		if made[rel] {
			return nil
		}
		made[rel] = true
		return os.MkdirAll(filepath.Join(dir, rel), 0o755)
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if !localPath(name) {
			return fmt.Errorf("%q: %w", h.Name, ErrUnsafePath)
		}
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			if links[p] {
				return fmt.Errorf("%q lies below symlink %q: %w", h.Name, p, ErrUnsafePath)
			}
		}
		full := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := mkdirs(name); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := mkdirs(path.Dir(name)); err != nil {
				return err
			}
			f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", full, err)
			}
		case tar.TypeSymlink:
			if path.IsAbs(h.Linkname) || !localPath(path.Join(path.Dir(name), h.Linkname)) {
				return fmt.Errorf("%q -> %q: %w", h.Name, h.Linkname, ErrUnsafePath)
			}
			if err := mkdirs(path.Dir(name)); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, full); err != nil {
				return err
			}
			links[name] = true
		default:
			return fmt.Errorf("%q: unsupported tar entry type %q", h.Name, h.Typeflag)
		}
	}
}

// localPath reports whether a cleaned slash path stays inside its root.
func localPath(p string) bool {
	return p != ".." && !strings.HasPrefix(p, "../") && !path.IsAbs(p) && p != ""
}
