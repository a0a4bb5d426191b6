package demo

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/compact"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// Decode builds the in-memory root named "demo:"+name from a
// decompressed image (format in the package doc), with its NVML answers
// (nil for a machine without NVML). Files share raw, which must not
// change. A damaged image is an error wrapping ErrImage, never a panic
// or a partial tree.
func Decode(name string, raw []byte) (*rootfs.Memory, *nvml.ReplayFile, error) {
	rest, ok := bytes.CutPrefix(raw, []byte(Magic))
	if !ok {
		return nil, nil, fmt.Errorf("%w: no %q header", ErrImage, strings.TrimSpace(Magic))
	}
	bad := func(what string) error { return fmt.Errorf("%w: %s at byte %d", ErrImage, what, len(raw)-len(rest)) }
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
		case NodeDir:
			mode = fs.ModeDir
		case NodeLink:
			if target, ok = bytesOf(); !ok {
				return nil, nil, bad("link target")
			}
			mode = fs.ModeSymlink
		case NodeFile:
			ci, ok := uv()
			if !ok || ci >= len(contents) {
				return nil, nil, bad("content index")
			}
			data = contents[ci]
		default:
			return nil, nil, bad("node kind")
		}
		if err := tb.Add(parent-1, string(nm), mode, data, string(target)); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrImage, err)
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
		return nil, nil, fmt.Errorf("%w: NVML answers: %w", ErrImage, err)
	}
	return m, &rf, nil
}
