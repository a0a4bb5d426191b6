package ociimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The release the manifests under deploy/ and the Helm chart name; the
// image Build makes is tagged Repository:Release unless told otherwise.
const (
	Repository = "ghcr.io/gpuaffinity/gpuaffinity"
	Release    = "v0.1.0"
)

// BinDir is where the binaries go in the image; Entrypoint is the first.
const BinDir = "/usr/bin"

// Spec is what goes into the image.
type Spec struct {
	// Binaries are host paths of the programs, installed in BinDir by
	// their base names. The first is the entrypoint (the DaemonSet gives
	// only args: agent, --root=/, ...).
	Binaries []string
	// Version and Revision become the OCI version and revision labels.
	Version, Revision string
	// Created is the image's creation time and every file's mtime; the
	// zero value is the Unix epoch, so that the same binaries give the
	// same image digest.
	Created time.Time
	// Loader finds the binaries' shared libraries; its zero value reads
	// this host's.
	Loader Loader
}

// Build assembles the image: a layer with the shared libraries the
// binaries load (and the directories and symbolic links on their
// paths), a layer with the binaries, and a config with the entrypoint,
// labels and platform read from the first binary's ELF header.
func Build(s Spec) (v1.Image, error) {
	if len(s.Binaries) == 0 {
		return nil, fmt.Errorf("ociimage: no binaries")
	}
	if s.Created.IsZero() {
		s.Created = time.Unix(0, 0)
	}
	s.Created = s.Created.UTC()
	arch, err := platform(s.Binaries[0])
	if err != nil {
		return nil, err
	}

	libs := newTree(s.Loader.Root)
	bins := newTree("")
	for _, b := range s.Binaries {
		paths, err := s.Loader.Libraries(b)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if err := libs.addPath(p, 0); err != nil {
				return nil, err
			}
		}
		if err := bins.addFile(path.Join(BinDir, filepath.Base(b)), b); err != nil {
			return nil, err
		}
	}
	// /tmp for the few commands that want a scratch directory (topo
	// --demo on a machine without the embedded image); the DaemonSet's
	// root file system is read-only and needs none.
	libs.dir("/tmp", 0o1777|fs.ModeDir|fs.ModeSticky)

	var layers []v1.Layer
	for _, t := range []*tree{libs, bins} {
		data, err := t.tar(s.Created)
		if err != nil {
			return nil, err
		}
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		})
		if err != nil {
			return nil, fmt.Errorf("ociimage: layer: %w", err)
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: s.Created}
	cf.Config = v1.Config{
		Entrypoint: []string{path.Join(BinDir, filepath.Base(s.Binaries[0]))},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir: "/",
		Labels:     Labels(s.Version, s.Revision, s.Created),
		ExposedPorts: map[string]struct{}{
			"19400/tcp": {},
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	return img, nil
}

// Labels are the image's OCI annotations (image-spec annotations.md).
func Labels(version, revision string, created time.Time) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "gpuaffinity",
		"org.opencontainers.image.description": "Per-node agent for GPU servers: GPU/NIC topology, NCCL environment, health gate, Prometheus metrics",
		"org.opencontainers.image.source":      "https://github.com/gpuaffinity/gpuaffinity",
		"org.opencontainers.image.url":         "https://github.com/gpuaffinity/gpuaffinity",
		"org.opencontainers.image.licenses":    "Apache-2.0", // SPDX, as LICENSE
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
	}
}

// Write writes img as a docker-archive tarball tagged ref, the form
// `podman load` and `docker load` read. The file is replaced by rename.
func Write(file, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("ociimage: tag %q: %w", ref, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(tag, img, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("ociimage: %s: %w", file, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("ociimage: %s: %w", file, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	return nil
}

// platform is the OCI architecture of an ELF program.
func platform(prog string) (string, error) {
	f, err := elf.Open(prog)
	if err != nil {
		return "", fmt.Errorf("ociimage: %s: %w", prog, err)
	}
	defer f.Close()
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_PPC64:
		if f.ByteOrder == binary.LittleEndian {
			return "ppc64le", nil
		}
	}
	return "", fmt.Errorf("ociimage: %s: ELF machine %v has no OCI architecture here", prog, f.Machine)
}

// tree is a layer's files: image path → entry.
type tree struct {
	root    string // host root the image paths are read from
	entries map[string]entry
}

type entry struct {
	mode   fs.FileMode
	host   string // regular file: where its bytes are
	target string // symbolic link
}

func newTree(root string) *tree {
	if root == "" {
		root = "/"
	}
	return &tree{root: root, entries: map[string]entry{}}
}

func (t *tree) hostPath(p string) string { return filepath.Join(t.root, p) }

func (t *tree) dir(p string, mode fs.FileMode) {
	if _, ok := t.entries[p]; !ok {
		t.entries[p] = entry{mode: mode}
	}
}

// parents adds the directories above p.
func (t *tree) parents(p string) {
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		t.dir(d, fs.ModeDir|0o755)
	}
}

// addFile puts the host file at image path p.
func (t *tree) addFile(p, host string) error {
	fi, err := os.Stat(host)
	if err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("ociimage: %s: not a regular file", host)
	}
	t.parents(p)
	t.entries[p] = entry{mode: fi.Mode().Perm(), host: host}
	return nil
}

// addPath adds the file at p (a path within the tree's root) as the
// root holds it: each symbolic link met on the way is added as a link
// and followed, so that p resolves in the image as it does on the host
// (on a merged-/usr system, /lib64/ld-linux-x86-64.so.2 is /lib64, a
// link to usr/lib64, holding a link to the loader in
// /lib/x86_64-linux-gnu, itself under the link /lib).
func (t *tree) addPath(p string, links int) error {
	if links > 40 { // Linux's MAXSYMLINKS
		return fmt.Errorf("ociimage: %s: too many levels of symbolic links", t.hostPath(p))
	}
	p = path.Clean(p)
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		fi, err := os.Lstat(t.hostPath(next))
		if err != nil {
			return fmt.Errorf("ociimage: %w", err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(t.hostPath(next))
			if err != nil {
				return fmt.Errorf("ociimage: %w", err)
			}
			t.parents(next)
			t.entries[next] = entry{mode: fs.ModeSymlink | 0o777, target: target}
			resolved := target
			if !path.IsAbs(target) {
				resolved = path.Join(cur, target)
			}
			return t.addPath(path.Join(append([]string{resolved}, parts[i+1:]...)...), links+1)
		case i == len(parts)-1:
			return t.addFile(next, t.hostPath(next))
		case fi.IsDir():
			t.dir(next, fs.ModeDir|fi.Mode().Perm())
		default:
			return fmt.Errorf("ociimage: %s: not a directory", t.hostPath(next))
		}
		cur = next
	}
	return nil
}

// tar writes the tree as an uncompressed layer, in path order (parents
// before children), owned by root, every mtime the given time.
func (t *tree) tar(mtime time.Time) ([]byte, error) {
	paths := make([]string, 0, len(t.entries))
	for p := range t.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := t.entries[p]
		h := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    int64(e.mode.Perm()),
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		switch {
		case e.mode.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.mode&fs.ModeSymlink != 0:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.target
		default:
			data, err := os.ReadFile(e.host)
			if err != nil {
				return nil, fmt.Errorf("ociimage: %w", err)
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return nil, fmt.Errorf("ociimage: %s: %w", p, err)
			}
			if _, err := tw.Write(data); err != nil {
				return nil, fmt.Errorf("ociimage: %s: %w", p, err)
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("ociimage: %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	return buf.Bytes(), nil
}
