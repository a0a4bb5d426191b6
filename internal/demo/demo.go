// Package demo holds the example machines of `gpuaffinity ... --demo
// NAME`: one prebuilt image per machine (images/NAME.img.gz, embedded),
// the tree of sys/, proc/ and the rest of a fake root with the machine's
// NVML answers, and loads one into memory (Memory) or writes it into a
// directory (Write) for tools that read a root from disk.
//
// It is the runtime half of the fixtures: the images are written by go
// generate ./internal/testutil/fakesys from the YAML specs and the H200
// capture there (the builder, the specs and their hand-written
// expectations stay test-only, never linked into the binary), and
// fakesys's tests fail while an image differs from what its spec builds.
//
// # Image format
//
// An image is gzip of (every integer a uvarint, every string or byte
// run a uvarint length then its bytes):
//
//	Magic
//	content count, then each content (a content shared by several files
//	  is written once)
//	node count, then per node, depth first in name order: its kind
//	  (NodeDir, NodeFile or NodeLink, one byte), its parent (the index of
//	  an earlier directory node; the root is node 0 and is not written),
//	  its name, and a file's content index or a link's target
//	the NVML answers, an nvml.ReplayFile in package compact's form
//	  (length 0: a machine without NVML)
//
// The tree holds directories, regular files and relative symlinks only:
// what the fixture builder writes (modes 0755 and 0644 on disk, as
// Write gives them). nvml.json is not in the tree; it is made from the
// answers.
package demo

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

//go:embed images/*.img.gz
var imageFS embed.FS

// Magic opens an image (before compression). Change the number with the
// format.
const Magic = "gpuaffinity-machine-image 1\n"

// Node kinds in an image.
const (
	NodeDir  = 'd'
	NodeFile = 'f'
	NodeLink = 'l'
)

// ErrUnknownMachine is wrapped when a name is not one of Machines().
var ErrUnknownMachine = errors.New("unknown machine")

// ErrImage is wrapped by every error of a malformed image.
var ErrImage = errors.New("malformed machine image")

// Machines returns the name of every example machine, sorted: one per
// embedded image.
func Machines() []string {
	var names []string
	entries, _ := fs.ReadDir(imageFS, "images")
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".img.gz"); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Raw returns machine name's image, decompressed.
func Raw(name string) ([]byte, error) {
	if !slices.Contains(Machines(), name) {
		return nil, fmt.Errorf("machine %q: %w", name, ErrUnknownMachine)
	}
	gz, err := imageFS.ReadFile("images/" + name + ".img.gz")
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", name, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", name, err)
	}
	var buf bytes.Buffer
	if len(gz) >= 4 {
		// gzip's trailer holds the size: one buffer, no regrowth.
		buf.Grow(min(int(binary.LittleEndian.Uint32(gz[len(gz)-4:])), 64<<20) + 1)
	}
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, fmt.Errorf("image %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// Memory loads machine name into an in-memory root named "demo:"+name,
// with the replay of its NVML answers (nil for a machine without NVML).
// The root has nvml.json too, made when read.
func Memory(name string) (*rootfs.Root, gonvml.Interface, error) {
	m, rf, err := load(name)
	if err != nil {
		return nil, nil, err
	}
	var lib gonvml.Interface
	if rf != nil {
		m.LazyFile(nvml.ReplayFileName, func() []byte {
			data, _ := nvml.EncodeReplay(*rf) // a ReplayFile always encodes
			return data
		})
		lib = nvml.NewReplay(*rf)
	}
	return m.Root(), lib, nil
}

// load decodes machine name's image.
func load(name string) (*rootfs.Memory, *nvml.ReplayFile, error) {
	raw, err := Raw(name)
	if err != nil {
		return nil, nil, err
	}
	m, rf, err := Decode(name, raw)
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: %w", name, err)
	}
	return m, rf, nil
}
