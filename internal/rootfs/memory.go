package rootfs

import (
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
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
	name     string
	nodes    map[string]*memNode
	slab     []memNode  // nodes made ahead (NewMemorySize); new ones past it
	unsorted []*memNode // directories whose entries Root must sort
	links    sync.Map   // a link's path to where it leads (linkDir)
}

// memNode is one directory, file or link; it is also its own entry in
// its parent's listing (fs.DirEntry).
type memNode struct {
	name    string      // the last element of its path
	mode    fs.FileMode // fs.ModeDir, fs.ModeSymlink or 0 (a regular file)
	data    []byte
	lazy    func() []byte // a LazyFile's contents, made at its first read
	once    sync.Once
	target  string     // a link's target, as written
	entries []*memNode // a directory's, sorted once the root is built
	sorted  bool       // entries are in name order
}

// NewMemory returns an empty in-memory root; name stands for its
// directory in messages ("demo:dgx-h100").
func NewMemory(name string) *Memory { return NewMemorySize(name, 0) }

// NewMemorySize is NewMemory for a tree of about n directories, files and
// links, made ahead in one allocation.
func NewMemorySize(name string, n int) *Memory {
	m := &Memory{name: name, nodes: make(map[string]*memNode, n+1), slab: make([]memNode, 0, n)}
	m.nodes["."] = &memNode{name: ".", mode: fs.ModeDir, sorted: true}
	return m
}

// node returns a new node from the slab while it lasts.
func (m *Memory) node() *memNode {
	if len(m.slab) < cap(m.slab) {
		m.slab = m.slab[:len(m.slab)+1]
		return &m.slab[len(m.slab)-1]
	}
	return new(memNode)
}

// Dir adds a directory and its parents.
func (m *Memory) Dir(p string) {
	p = clean(p)
	if n, ok := m.nodes[p]; ok && n.mode.IsDir() {
		return
	}
	n := m.node()
	n.mode, n.sorted = fs.ModeDir, true // no entries yet
	m.add(p, n)
}

// File adds a regular file (and its parent directories) holding data,
// which the root keeps and hands to readers: it must not change.
func (m *Memory) File(p string, data []byte) {
	n := m.node()
	n.data = data
	m.add(clean(p), n)
}

// LazyFile adds a regular file whose contents gen makes at the first
// read (an example machine's nvml.json, which --demo commands that take
// NVML from the machine directly never read).
func (m *Memory) LazyFile(p string, gen func() []byte) {
	n := m.node()
	n.lazy = gen
	m.add(clean(p), n)
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
	n := m.node()
	n.mode, n.target = fs.ModeSymlink, target
	m.add(clean(p), n)
}

// clean is path.Clean, without its copy for a path that is clean already
// (every path a builder adds): relative, and no element empty, "." or
// "..".
func clean(p string) string {
	if p == "" || p[0] == '/' {
		return path.Clean(p)
	}
	for start, i := 0, 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if e := p[start:i]; e == "" || e == "." || e == ".." {
			return path.Clean(p)
		}
		start = i + 1
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
	n.name = p[strings.LastIndexByte(p, '/')+1:]
	_, known := m.nodes[p]
	if !known && pn.sorted {
		// A TreeBuilder's files and links are in no map (its
		// directories stay sorted): look in the listing itself.
		_, known = child(pn, n.name)
	}
	if !known {
		if k := len(pn.entries); k > 0 && pn.sorted && pn.entries[k-1].Name() > n.name {
			pn.sorted = false
			m.unsorted = append(m.unsorted, pn)
		}
		pn.entries = append(pn.entries, n)
	} else {
		for i, e := range pn.entries {
			if e.Name() == n.name {
				pn.entries[i] = n
			}
		}
	}
	m.nodes[p] = n
}

// Root returns a reader of the tree. The Memory must not be changed
// afterwards.
func (m *Memory) Root() *Root {
	for _, n := range m.unsorted {
		if !n.sorted {
			sortfn.Sort(n.entries, func(a, b *memNode) int { return strings.Compare(a.name, b.name) })
			n.sorted = true
		}
	}
	m.unsorted = nil
	return &Root{dir: m.name, fd: -1, mem: m}
}

// TreeBuilder builds a root's tree from nodes added in pre-order (each
// directory before what it holds), in one pass and with the nodes made
// in one allocation: a prebuilt example machine loads this way.
type TreeBuilder struct {
	m     *Memory
	built []*memNode
	paths []string
}

// NewTreeBuilder starts a tree of about n nodes for a root named name.
func NewTreeBuilder(name string, n int) *TreeBuilder {
	return &TreeBuilder{m: NewMemorySize(name, n), built: make([]*memNode, 0, n), paths: make([]string, 0, n)}
}

// Add adds the next node: parent is the index (in the order of Add) of
// an earlier directory, -1 for the root; name its name there (not empty,
// ".", ".." or holding a '/'), after every name added to that directory
// before (strictly ascending, so none is there twice); mode fs.ModeDir,
// fs.ModeSymlink or 0 (a regular file holding data, which the root
// keeps: it must not change); target a link's. It refuses a bad parent,
// name, order or mode, and adds nothing then.
func (b *TreeBuilder) Add(parent int, name string, mode fs.FileMode, data []byte, target string) error {
	i := len(b.built)
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("tree node %d: bad name %q", i, name)
	}
	pn, rel := b.m.nodes["."], name
	if parent >= 0 {
		if parent >= i || !b.built[parent].mode.IsDir() {
			return fmt.Errorf("tree node %d (%s): parent %d is not an earlier directory", i, name, parent)
		}
		pn = b.built[parent]
		if mode == fs.ModeDir {
			rel = b.paths[parent] + "/" + name
		} else {
			rel = name // named in errors only
		}
	}
	if k := len(pn.entries); k > 0 && pn.entries[k-1].Name() >= name {
		return fmt.Errorf("tree node %d: %s after %s: names out of order or twice", i, rel, pn.entries[k-1].Name())
	}
	if mode != fs.ModeDir && mode != fs.ModeSymlink && mode != 0 {
		return fmt.Errorf("tree node %d (%s): mode %v", i, rel, mode)
	}
	n := b.m.node()
	n.name, n.mode, n.sorted = name, mode, mode == fs.ModeDir
	switch mode {
	case fs.ModeSymlink:
		n.target = target
	case 0:
		n.data = data
	}
	pn.entries = append(pn.entries, n)
	if mode == fs.ModeDir {
		// Readers walk the listings; the map finds parents for Dir,
		// File and Link added later.
		b.m.nodes[rel] = n
	} else {
		rel = "" // no node is added below a file or a link
	}
	b.built, b.paths = append(b.built, n), append(b.paths, rel)
	return nil
}

// Memory returns the tree built so far.
func (b *TreeBuilder) Memory() *Memory { return b.m }

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
	n = m.nodes["."]
	if p == "." {
		return -1, n, true
	}
	for start, i := 0, 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if n, ok = child(n, p[start:i]); !ok {
			return 0, nil, false
		}
		start = i + 1
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

// child is the entry called name of the directory n, whose entries are
// sorted (Root sorted them).
func child(n *memNode, name string) (*memNode, bool) {
	i, ok := slices.BinarySearchFunc(n.entries, name, func(e *memNode, name string) int {
		return strings.Compare(e.name, name)
	})
	if !ok {
		return nil, false
	}
	return n.entries[i], true
}

// find is the node at the path p of directories (no links on the way).
func (m *Memory) find(p string) *memNode {
	n := m.nodes["."]
	if p == "." {
		return n
	}
	for c := range strings.SplitSeq(p, "/") {
		if n, _ = child(n, c); n == nil {
			return nil
		}
	}
	return n
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
			n = m.find(cur)
			continue
		}
		if !n.mode.IsDir() {
			return "", nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
		}
		next := path.Join(cur, c)
		nn, ok := child(n, c)
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
	return m.contents(rel, n, limit)
}

// contents is the data of n, found at rel: a directory is refused, a
// file over limit is ErrTooLarge.
func (m *Memory) contents(rel string, n *memNode, limit int) ([]byte, error) {
	return m.contentsAt(func() string { return rel }, n, limit)
}

// contentsAt is contents with the path made only for an error.
func (m *Memory) contentsAt(rel func() string, n *memNode, limit int) ([]byte, error) {
	if n.mode.IsDir() {
		return nil, fmt.Errorf("read %s: a directory: %w", path.Join(m.name, rel()), sysattr.ErrNotRegular)
	}
	data := n.contents()
	if len(data) > limit {
		return nil, fmt.Errorf("read %s: %w (%d bytes, over the %d-byte limit)", path.Join(m.name, rel()), sysattr.ErrTooLarge, len(data), limit)
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
	out := make([]fs.DirEntry, len(n.entries))
	for i, e := range n.entries {
		out[i] = e
	}
	return out, nil
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

func (n *memNode) Name() string               { return n.name }
func (n *memNode) IsDir() bool                { return n.mode.IsDir() }
func (n *memNode) Type() fs.FileMode          { return n.mode.Type() }
func (n *memNode) Info() (fs.FileInfo, error) { return memInfo{name: n.name, n: n}, nil }

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
