package fakesys

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io/fs"
	"path"

	"github.com/gpuaffinity/gpuaffinity/internal/compact"
	"github.com/gpuaffinity/gpuaffinity/internal/demo"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// Every machine, prebuilt for package demo: internal/demo/images/
// <name>.img.gz is the tree BuildMachine builds from the spec (or the
// capture), and its NVML answers, so that --demo loads a machine in a
// millisecond, and the binary links neither this builder nor the specs.
// go generate ./internal/testutil/fakesys writes them;
// TestImagesMatchSpecs fails while one differs from what its spec builds.
//
//go:generate go run ./internal/genimages -o ../../demo/images

// BuildImage builds machine name from its spec (or capture) and returns
// its image, compressed, as internal/demo/images/<name>.img.gz holds it.
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
// made from rf) and rf, uncompressed, in the format package demo
// documents and decodes (demo.Decode).
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
				nodes.WriteByte(demo.NodeLink)
				uv(&nodes, idx)
				str(&nodes, e.Name())
				str(&nodes, target)
			case e.IsDir():
				nodes.WriteByte(demo.NodeDir)
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
				nodes.WriteByte(demo.NodeFile)
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
	out.WriteString(demo.Magic)
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
