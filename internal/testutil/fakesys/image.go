package fakesys

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/compact"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// Every embedded machine, prebuilt: images/<name>.img.gz is the tree
// BuildMachineMemory would build from the spec (or the capture), and its
// NVML answers, so that --demo loads a machine in a millisecond instead
// of building thousands of files from YAML each time. go generate
// ./internal/testutil/fakesys writes them; TestImagesMatchSpecs fails while one
// differs from what its spec builds.
//
//go:generate go run ./internal/genimages -o images
//go:embed images
var imageFS embed.FS

// imageMagic opens an image (before compression).
const imageMagic = "gpuaffinity-machine-image 1\n"

// Node kinds in an image.
const (
	imgDir  = 'd'
	imgFile = 'f'
	imgLink = 'l'
)

// BuildImage builds machine name from its spec (or capture) and returns
// its image, compressed, as images/<name>.img.gz holds it.
func BuildImage(name string) ([]byte, error) {
	r, rf, err := buildMachineTree(name)
	if err != nil {
		return nil, err
	}
	raw, err := encodeImage(r, rf)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", name, err)
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// buildMachineTree is BuildMachineMemory from the spec or capture,
// without the image, and with the ReplayFile rather than its replayer.
func buildMachineTree(name string) (*rootfs.Root, *nvml.ReplayFile, error) {
	if name == H200VM {
		return buildH200Tree()
	}
	s, err := Machine(name)
	if err != nil {
		return nil, nil, err
	}
	t, rf, err := buildTree(s)
	if err != nil {
		return nil, nil, err
	}
	m := t.memory("demo:" + s.Name)
	return m.Root(), rf, nil
}

// encodeImage writes the tree under r (every directory, file and link,
// depth first in name order; nvml.json at the top is left out, being
// made from rf) and rf, uncompressed:
//
//	magic
//	uvarint contents, then each uvarint-prefixed (a content shared by
//	  several files is written once)
//	uvarint nodes, then per node: kind, uvarint parent (index of an
//	  earlier directory node; the root is node 0 and is not written),
//	  uvarint-prefixed name, and a file's uvarint content index or a
//	  link's uvarint-prefixed target
//	uvarint-prefixed rf in package compact's form (length 0: no NVML)
func encodeImage(r *rootfs.Root, rf *nvml.ReplayFile) ([]byte, error) {
	var nodes, contents bytes.Buffer
	uv := func(b *bytes.Buffer, v int) { b.Write(binary.AppendUvarint(nil, uint64(v))) }
	str := func(b *bytes.Buffer, s string) { uv(b, len(s)); b.WriteString(s) }
	content := map[string]int{}
	n := 0
	var walk func(rel string, idx int) error
	walk = func(rel string, idx int) error {
		entries, err := r.ReadDir(rel)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := path.Join(rel, e.Name())
			if p == nvml.ReplayFileName {
				continue
			}
			n++
			me := n
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				target, err := r.Readlink(p)
				if err != nil {
					return err
				}
				nodes.WriteByte(imgLink)
				uv(&nodes, idx)
				str(&nodes, e.Name())
				str(&nodes, target)
			case e.IsDir():
				nodes.WriteByte(imgDir)
				uv(&nodes, idx)
				str(&nodes, e.Name())
				if err := walk(p, me); err != nil {
					return err
				}
			default:
				data, err := r.ReadFile(p, 64<<20)
				if err != nil {
					return err
				}
				ci, ok := content[string(data)]
				if !ok {
					ci = len(content)
					content[string(data)] = ci
					str(&contents, string(data))
				}
				nodes.WriteByte(imgFile)
				uv(&nodes, idx)
				str(&nodes, e.Name())
				uv(&nodes, ci)
			}
		}
		return nil
	}
	if err := walk(".", 0); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString(imageMagic)
	uv(&out, len(content))
	out.Write(contents.Bytes())
	uv(&out, n)
	out.Write(nodes.Bytes())
	var answers []byte
	if rf != nil {
		var err error
		if answers, err = compact.Append(nil, *rf); err != nil {
			return nil, fmt.Errorf("nvml answers: %w", err)
		}
	}
	uv(&out, len(answers))
	out.Write(answers)
	return out.Bytes(), nil
}

// errImage is wrapped by every error of a malformed image.
var errImage = errors.New("malformed machine image")

// decodeImage builds the Memory root named "demo:"+name from an image,
// with its ReplayFile (nil for a machine without NVML). Files share the
// decompressed buffer.
func decodeImage(name string, raw []byte) (*rootfs.Memory, *nvml.ReplayFile, error) {
	rest, ok := bytes.CutPrefix(raw, []byte(imageMagic))
	if !ok {
		return nil, nil, fmt.Errorf("%w: no %q header", errImage, strings.TrimSpace(imageMagic))
	}
	bad := func(what string) error { return fmt.Errorf("%w: %s at byte %d", errImage, what, len(raw)-len(rest)) }
	uv := func() (int, bool) {
		v, k := binary.Uvarint(rest)
		if k <= 0 || v > uint64(len(raw)) {
			return 0, false
		}
		rest = rest[k:]
		return int(v), true
	}
	bytesOf := func() ([]byte, bool) {
		l, ok := uv()
		if !ok || l > len(rest) {
			return nil, false
		}
		b := rest[:l:l]
		rest = rest[l:]
		return b, true
	}
	nc, ok := uv()
	if !ok {
		return nil, nil, bad("content count")
	}
	contents := make([][]byte, 0, min(nc, len(rest)))
	for range nc {
		c, ok := bytesOf()
		if !ok {
			return nil, nil, bad("content")
		}
		contents = append(contents, c)
	}
	count, ok := uv()
	if !ok {
		return nil, nil, bad("node count")
	}
	tb := rootfs.NewTreeBuilder("demo:"+name, min(count, len(rest)))
	for range count {
		if len(rest) == 0 {
			return nil, nil, bad("node")
		}
		kind := rest[0]
		rest = rest[1:]
		parent, ok := uv()
		if !ok {
			return nil, nil, bad("parent")
		}
		nm, ok := bytesOf()
		if !ok {
			return nil, nil, bad("name")
		}
		var (
			mode   fs.FileMode
			data   []byte
			target []byte
		)
		switch kind {
		case imgDir:
			mode = fs.ModeDir
		case imgLink:
			if target, ok = bytesOf(); !ok {
				return nil, nil, bad("link target")
			}
			mode = fs.ModeSymlink
		case imgFile:
			ci, ok := uv()
			if !ok || ci >= len(contents) {
				return nil, nil, bad("content index")
			}
			data = contents[ci]
		default:
			return nil, nil, bad("node kind")
		}
		if err := tb.Add(parent-1, string(nm), mode, data, string(target)); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", errImage, err)
		}
	}
	m := tb.Memory()
	answers, ok := bytesOf()
	if !ok || len(rest) != 0 {
		return nil, nil, bad("nvml answers")
	}
	if len(answers) == 0 {
		return m, nil, nil
	}
	var rf nvml.ReplayFile
	if err := compact.Decode(answers, &rf); err != nil {
		return nil, nil, fmt.Errorf("%w: NVML answers: %w", errImage, err)
	}
	return m, &rf, nil
}

// loadImage is BuildMachineMemory from images/<name>.img.gz; ok is false
// when there is no image of that name.
func loadImage(name string) (root *rootfs.Root, lib gonvml.Interface, ok bool, err error) {
	gz, err := imageFS.ReadFile("images/" + name + ".img.gz")
	if err != nil {
		return nil, nil, false, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, nil, true, fmt.Errorf("image %s: %w", name, err)
	}
	var buf bytes.Buffer
	if len(gz) >= 4 {
		// gzip's trailer holds the size: one buffer, no regrowth.
		buf.Grow(min(int(binary.LittleEndian.Uint32(gz[len(gz)-4:])), 64<<20) + 1)
	}
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, nil, true, fmt.Errorf("image %s: %w", name, err)
	}
	raw := buf.Bytes()
	m, rf, err := decodeImage(name, raw)
	if err != nil {
		return nil, nil, true, fmt.Errorf("image %s: %w", name, err)
	}
	if rf != nil {
		m.LazyFile(nvml.ReplayFileName, func() []byte {
			data, _ := marshalReplay(name, *rf) // a ReplayFile always encodes
			return data
		})
		lib = nvml.NewReplay(*rf)
	}
	return m.Root(), lib, true, nil
}
