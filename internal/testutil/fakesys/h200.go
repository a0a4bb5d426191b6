package fakesys

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
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

// BuildH200Memory is BuildH200 into an in-memory root.
func BuildH200Memory() (*rootfs.Root, gonvml.Interface, error) {
	r, rf, err := buildH200Tree()
	if err != nil {
		return nil, nil, err
	}
	return r, nvml.NewReplay(*rf), nil
}

// buildH200Tree is BuildH200Memory with the ReplayFile rather than its
// replayer.
func buildH200Tree() (*rootfs.Root, *nvml.ReplayFile, error) {
	m := rootfs.NewMemory("demo:" + H200VM)
	if err := untarMemory(bytes.NewReader(h200Sysfs), m); err != nil {
		return nil, nil, fmt.Errorf("build %s: sysfs.tar.gz: %w", H200VM, err)
	}
	data, err := h200Replay()
	if err != nil {
		return nil, nil, err
	}
	m.File(nvml.ReplayFileName, data)
	// Through the file's own decoding: the probe's conversion is what
	// the file records.
	rf, err := nvml.DecodeReplay("demo:"+H200VM+"/"+nvml.ReplayFileName, data)
	if err != nil {
		return nil, nil, err
	}
	return m.Root(), &rf, nil
}

// h200Replay is the capture's nvml.json, converted from its NVML probe.
func h200Replay() ([]byte, error) {
	rf, err := nvml.ConvertProbe(bytes.NewReader(h200Probe))
	if err != nil {
		return nil, fmt.Errorf("build %s: nvml-probe.json: %w", H200VM, err)
	}
	return marshalReplay(H200VM, rf)
}

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
	data, err := h200Replay()
	if err != nil {
		return err
	}
	p := filepath.Join(dir, "nvml.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("build %s: %w", H200VM, err)
	}
	return nil
}

// untar unpacks a .tar.gz into dir (see walkTar for what it refuses).
func untar(r io.Reader, dir string) error {
	made := map[string]bool{".": true}
	mkdirs := func(rel string) error {
		if made[rel] {
			return nil
		}
		made[rel] = true
		return os.MkdirAll(filepath.Join(dir, rel), 0o755)
	}
	return walkTar(r, func(h *tar.Header, name string, body io.Reader) error {
		full := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			return mkdirs(name)
		case tar.TypeReg:
			if err := mkdirs(path.Dir(name)); err != nil {
				return err
			}
			f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", full, err)
			}
			return nil
		default: // tar.TypeSymlink
			if err := mkdirs(path.Dir(name)); err != nil {
				return err
			}
			return os.Symlink(h.Linkname, full)
		}
	})
}

// untarMemory unpacks a .tar.gz into an in-memory root.
func untarMemory(r io.Reader, m *rootfs.Memory) error {
	return walkTar(r, func(h *tar.Header, name string, body io.Reader) error {
		switch h.Typeflag {
		case tar.TypeDir:
			m.Dir(name)
		case tar.TypeReg:
			b, err := io.ReadAll(body)
			if err != nil {
				return err
			}
			m.File(name, b)
		default: // tar.TypeSymlink
			m.Link(name, h.Linkname)
		}
		return nil
	})
}

// walkTar calls fn for each directory, regular file and symlink of a
// .tar.gz, with its cleaned slash name. It refuses entries and link
// targets that leave the root, entries below a symlink, hard links and
// device files.
func walkTar(r io.Reader, fn func(h *tar.Header, name string, body io.Reader) error) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	links := map[string]bool{}
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
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeReg:
		case tar.TypeSymlink:
			if path.IsAbs(h.Linkname) || !localPath(path.Join(path.Dir(name), h.Linkname)) {
				return fmt.Errorf("%q -> %q: %w", h.Name, h.Linkname, ErrUnsafePath)
			}
			links[name] = true
		default:
			return fmt.Errorf("%q: unsupported tar entry type %q", h.Name, h.Typeflag)
		}
		if err := fn(h, name, tr); err != nil {
			return err
		}
	}
}

// localPath reports whether a cleaned slash path stays inside its root.
func localPath(p string) bool {
	return p != ".." && !strings.HasPrefix(p, "../") && !path.IsAbs(p) && p != ""
}
