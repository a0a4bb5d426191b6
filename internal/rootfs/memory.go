package rootfs

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
)

// Memory builds a root held in memory: the embedded example machines are
// read from one without writing thousands of files to disk first. Links
// are resolved as on disk, inside the root: an absolute target, or one
// that climbs out, is ErrOutsideRoot. Paths are relative, with '/'.
type Memory struct {
	name  string
	nodes map[string]*memNode
	links sync.Map // a link's path to where it leads (linkDir)
}

type memNode struct {
	mode    fs.FileMode // fs.ModeDir, fs.ModeSymlink or 0 (a regular file)
	data    []byte
	lazy    func() []byte // a LazyFile's contents, made at its first read
	once    sync.Once
	target  string        // a link's target, as written
	entries []fs.DirEntry // a directory's, sorted once the root is built
	sorted  bool
}

// NewMemory returns an empty in-memory root; name stands for its
// directory in messages ("demo:dgx-h100").
func NewMemory(name string) *Memory {
	return &Memory{name: name, nodes: map[string]*memNode{".": {mode: fs.ModeDir}}}
}

// Dir adds a directory and its parents.
func (m *Memory) Dir(p string) {
	p = clean(p)
	if n, ok := m.nodes[p]; ok && n.mode.IsDir() {
		return
	}
	m.add(p, &memNode{mode: fs.ModeDir})
}

// File adds a regular file (and its parent directories) holding data,
// which the root keeps and hands to readers: it must not change.
func (m *Memory) File(p string, data []byte) { m.add(clean(p), &memNode{data: data}) }

// LazyFile adds a regular file whose contents gen makes at the first
// read (an example machine's nvml.json, which --demo commands that take
// NVML from the machine directly never read).
func (m *Memory) LazyFile(p string, gen func() []byte) {
	m.add(clean(p), &memNode{lazy: gen})
}

// contents is a file's data, made now for a LazyFile.
func (n *memNode) contents() []byte {
	if n.lazy != nil {
		n.once.Do(func() { n.data = n.lazy() })
	}
	return n.data
}

// Link adds a symbolic link at p to target, as written (relative to p's
// directory, as sysfs writes them).
func (m *Memory) Link(p, target string) {
	m.add(clean(p), &memNode{mode: fs.ModeSymlink, target: target})
}

// clean is path.Clean, without its copy for a path that is clean already
// (every path a builder adds).
func clean(p string) string {
	if p == "" || p[0] == '/' || p[len(p)-1] == '/' || strings.Contains(p, "//") ||
		p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") ||
		strings.Contains(p, "/./") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..") {
		return path.Clean(p)
	}
	return p
}

// dir is path.Dir of a clean relative path, without a copy.
func dir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

func (m *Memory) add(p string, n *memNode) {
	parent := dir(p)
	if pn, ok := m.nodes[parent]; !ok || !pn.mode.IsDir() {
		m.Dir(parent)
	}
	pn := m.nodes[parent]
	if _, ok := m.nodes[p]; !ok {
		pn.entries = append(pn.entries, memEntry{name: p[strings.LastIndexByte(p, '/')+1:], n: n})
		pn.sorted = false
	} else {
		for i, e := range pn.entries {
			if e.Name() == path.Base(p) {
				pn.entries[i] = memEntry{name: path.Base(p), n: n}
			}
		}
	}
	m.nodes[p] = n
}

// Root returns a reader of the tree. The Memory must not be changed
// afterwards.
func (m *Memory) Root() *Root {
	for _, n := range m.nodes {
		if n.mode.IsDir() && !n.sorted {
			slices.SortFunc(n.entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
			n.sorted = true
		}
	}
	return &Root{dir: m.name, fd: -1, mem: m}
}

// maxLinks bounds the links one lookup follows, as the kernel's 40.
const maxLinks = 40

// resolve finds rel's node; the last component's link is followed when
// follow is set.
//
// The common case is a clean path whose directories are real ones, or
// pass through a class link (sys/class/infiniband/mlx5_0/ports/1/state):
// it is looked up prefix by prefix without allocating, a link's own
// resolution is remembered, and only the rest (a path with "..", an
// error) takes the walk component by component.
func (m *Memory) resolve(rel string, follow bool) (string, *memNode, error) {
	p := rel
	for hops := 0; hops <= maxLinks && isClean(p); hops++ {
		link, n, ok := m.plain(p, follow)
		if !ok {
			break
		}
		if link < 0 {
			return p, n, nil
		}
		phys, err := m.linkDir(p[:link])
		if err != nil {
			break
		}
		if phys == "." {
			p = strings.TrimPrefix(p[link:], "/")
			if p == "" {
				p = "."
			}
		} else {
			p = phys + p[link:]
		}
	}
	return m.walk(rel, follow)
}

// plain looks p up prefix by prefix. link is the end of the first prefix
// that is a link to follow (-1 when none); ok is false when a prefix is
// missing or not a directory, for walk to report.
func (m *Memory) plain(p string, follow bool) (link int, n *memNode, ok bool) {
	if p == "." {
		return -1, m.nodes["."], true
	}
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		n, ok = m.nodes[p[:i]]
		if !ok {
			return 0, nil, false
		}
		last := i == len(p)
		if n.mode&fs.ModeSymlink != 0 && (!last || follow) {
			return i, n, true
		}
		if !last && !n.mode.IsDir() {
			return 0, nil, false
		}
	}
	return -1, n, true
}

// linkDir is where the link at p leads, walked once and remembered.
func (m *Memory) linkDir(p string) (string, error) {
	if v, ok := m.links.Load(p); ok {
		return v.(string), nil
	}
	phys, _, err := m.walk(p, true)
	if err != nil {
		return "", err
	}
	m.links.Store(p, phys)
	return phys, nil
}

// isClean reports whether p is a clean relative path without "..".
func isClean(p string) bool {
	return p != "" && p != ".." && clean(p) == p && !strings.HasPrefix(p, "../") && !strings.Contains(p, "/../") && !strings.HasSuffix(p, "/..") && (p == "." || !strings.HasPrefix(p, "./"))
}

// walk resolves rel component by component.
func (m *Memory) walk(rel string, follow bool) (string, *memNode, error) {
	name := path.Join(m.name, rel)
	if path.IsAbs(rel) {
		return "", nil, &fs.PathError{Op: "open", Path: name, Err: ErrOutsideRoot}
	}
	todo := strings.Split(path.Clean(rel), "/")
	cur, n := ".", m.nodes["."]
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case ".", "":
			continue
		case "..":
			if cur == "." {
				return "", nil, &fs.PathError{Op: "open", Path: name, Err: ErrOutsideRoot}
			}
			cur = path.Dir(cur)
			n = m.nodes[cur]
			continue
		}
		if !n.mode.IsDir() {
			return "", nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
		}
		next := path.Join(cur, c)
		nn, ok := m.nodes[next]
		if !ok {
			return "", nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if nn.mode&fs.ModeSymlink != 0 && (len(todo) > 0 || follow) {
			if hops++; hops > maxLinks {
				return "", nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ELOOP}
			}
			if path.IsAbs(nn.target) {
				return "", nil, &fs.PathError{Op: "open", Path: name, Err: ErrOutsideRoot}
			}
			todo = append(strings.Split(nn.target, "/"), todo...)
			continue
		}
		cur, n = next, nn
	}
	return cur, n, nil
}

func (m *Memory) readFile(rel string, limit int) ([]byte, error) {
	_, n, err := m.resolve(rel, true)
	if err != nil {
		return nil, err
	}
	name := path.Join(m.name, rel)
	if n.mode.IsDir() {
		return nil, fmt.Errorf("read %s: a directory: %w", name, sysattr.ErrNotRegular)
	}
	data := n.contents()
	if len(data) > limit {
		return nil, fmt.Errorf("read %s: %w (%d bytes, over the %d-byte limit)", name, sysattr.ErrTooLarge, len(data), limit)
	}
	return data, nil
}

func (m *Memory) readDir(rel string) ([]fs.DirEntry, error) {
	_, n, err := m.resolve(rel, true)
	if err != nil {
		return nil, err
	}
	if !n.mode.IsDir() {
		return nil, &fs.PathError{Op: "readdirent", Path: path.Join(m.name, rel), Err: syscall.ENOTDIR}
	}
	return slices.Clone(n.entries), nil
}

func (m *Memory) stat(rel string, follow bool) (fs.FileInfo, error) {
	p, n, err := m.resolve(rel, follow)
	if err != nil {
		return nil, err
	}
	return memInfo{name: path.Base(p), n: n}, nil
}

func (m *Memory) readlink(rel string) (string, error) {
	_, n, err := m.resolve(rel, false)
	if err != nil {
		return "", err
	}
	if n.mode&fs.ModeSymlink == 0 {
		return "", &fs.PathError{Op: "readlink", Path: path.Join(m.name, rel), Err: syscall.EINVAL}
	}
	return n.target, nil
}

type memEntry struct {
	name string
	n    *memNode
}

func (e memEntry) Name() string               { return e.name }
func (e memEntry) IsDir() bool                { return e.n.mode.IsDir() }
func (e memEntry) Type() fs.FileMode          { return e.n.mode.Type() }
func (e memEntry) Info() (fs.FileInfo, error) { return memInfo{name: e.name, n: e.n}, nil }

type memInfo struct {
	name string
	n    *memNode
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return int64(len(i.n.contents())) }
func (i memInfo) Mode() fs.FileMode {
	if i.n.mode.IsDir() {
		return i.n.mode | 0o755
	}
	if i.n.mode&fs.ModeSymlink != 0 {
		return i.n.mode | 0o777
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.n.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }
