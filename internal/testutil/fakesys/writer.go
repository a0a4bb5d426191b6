package fakesys

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// tree collects the directories, files and links of a fake root, then
// writes them in one pass: directories first (parents before children),
// then files and links from several goroutines. Paths are relative to the
// root and use '/'.
type tree struct {
	dirs    []string
	dirSeen map[string]bool
	ops     []op
}

type op struct {
	path string
	data []byte // file contents
	link string // symlink target when non-empty
}

func newTree() *tree {
	return &tree{dirSeen: map[string]bool{".": true, "": true}, ops: make([]op, 0, 8192)}
}

func (t *tree) dir(p string) {
	if t.dirSeen[p] {
		return
	}
	t.dir(path.Dir(p))
	t.dirSeen[p] = true
	t.dirs = append(t.dirs, p)
}

// attr adds a sysfs attribute: s followed by a newline, as the kernel
// prints every attribute.
func (t *tree) attr(p, s string) {
	t.dir(path.Dir(p))
	b := make([]byte, 0, len(s)+1)
	b = append(b, s...)
	b = append(b, '\n')
	t.ops = append(t.ops, op{path: p, data: b})
}

// raw adds a file with exactly the given bytes.
func (t *tree) raw(p string, b []byte) {
	t.dir(path.Dir(p))
	t.ops = append(t.ops, op{path: p, data: b})
}

// link adds a symlink at p pointing to the root-relative path target,
// written relative to p's directory as the kernel does.
func (t *tree) link(p, target string) {
	t.dir(path.Dir(p))
	t.ops = append(t.ops, op{path: p, link: relPath(path.Dir(p), target)})
}

// relPath is target relative to dir; both are clean root-relative paths.
func relPath(dir, target string) string {
	d := strings.Split(dir, "/")
	g := strings.Split(target, "/")
	i := 0
	for i < len(d) && i < len(g) && d[i] == g[i] {
		i++
	}
	if i == len(g) && i > 0 {
		// The target is an ancestor: the kernel climbs to its parent and
		// names it ("device -> ../../../0000:18:00.0").
		i--
	}
	var b strings.Builder
	for range len(d) - i {
		b.WriteString("../")
	}
	b.WriteString(strings.Join(g[i:], "/"))
	return b.String()
}

// memory holds the tree in an in-memory root named name.
func (t *tree) memory(name string) *rootfs.Memory {
	m := rootfs.NewMemory(name)
	for _, d := range t.dirs {
		m.Dir(d)
	}
	for _, o := range t.ops {
		if o.link != "" {
			m.Link(o.path, o.link)
		} else {
			m.File(o.path, o.data)
		}
	}
	return m
}

// write creates everything under root, which must exist.
func (t *tree) write(root string) error {
	for _, d := range t.dirs {
		full := filepath.Join(root, d)
		if err := unix.Mkdir(full, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return &os.PathError{Op: "mkdir", Path: full, Err: err}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 8, max(1, len(t.ops)/256))
	if workers <= 1 {
		return writeOps(root, t.ops)
	}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	chunk := (len(t.ops) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, len(t.ops))
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = writeOps(root, t.ops[lo:hi])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func writeOps(root string, ops []op) error {
	for _, o := range ops {
		full := root + "/" + o.path
		if o.link != "" {
			if err := unix.Symlink(o.link, full); err != nil {
				return &os.PathError{Op: "symlink", Path: full, Err: err}
			}
			continue
		}
		fd, err := unix.Open(full, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return &os.PathError{Op: "create", Path: full, Err: err}
		}
		for b := o.data; len(b) > 0; {
			n, err := unix.Write(fd, b)
			if err != nil {
				unix.Close(fd)
				return &os.PathError{Op: "write", Path: full, Err: err}
			}
			b = b[n:]
		}
		if err := unix.Close(fd); err != nil {
			return &os.PathError{Op: "close", Path: full, Err: err}
		}
	}
	return nil
}
