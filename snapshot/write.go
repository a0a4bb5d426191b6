package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
	"time"
)

// Modes and time every snapshot entry gets, so output depends on content only.
const (
	dirMode  = 0o755
	fileMode = 0o644
	linkMode = 0o777
)

var fixedTime = time.Unix(0, 0).UTC()

type entryKind int

const (
	kindDir entryKind = iota
	kindFile
	kindLink
)

// entry is one thing in a snapshot: a directory, a file with its bytes, or a
// link with its text.
type entry struct {
	kind entryKind
	data []byte
	link string
}

// tree is a snapshot in memory, keyed by root-relative slash path.
type tree struct {
	entries map[string]*entry
}

func newTree() *tree { return &tree{entries: map[string]*entry{}} }

// addFile adds a file; false when something is already at p.
func (t *tree) addFile(p string, data []byte) bool {
	if _, ok := t.entries[p]; ok {
		return false
	}
	t.entries[p] = &entry{kind: kindFile, data: data}
	return true
}

// has reports whether something is already at p.
func (t *tree) has(p string) bool {
	_, ok := t.entries[p]
	return ok
}

// addLink adds a link; the same link seen twice is kept once.
func (t *tree) addLink(p, text string) {
	if _, ok := t.entries[p]; ok {
		return
	}
	t.entries[p] = &entry{kind: kindLink, link: text}
}

// addDir adds an (possibly empty) directory.
func (t *tree) addDir(p string) {
	if p == "" {
		return
	}
	if _, ok := t.entries[p]; ok {
		return
	}
	t.entries[p] = &entry{kind: kindDir}
}

// named is an entry with its path.
type named struct {
	path string
	*entry
}

// sorted returns every entry, with each parent directory made explicit,
// sorted by path: a parent sorts before what it holds.
func (t *tree) sorted() []named {
	all := map[string]*entry{}
	for p, e := range t.entries {
		all[p] = e
		for d := parentOf(p); d != ""; d = parentOf(d) {
			if _, ok := all[d]; ok {
				break
			}
			if e, ok := t.entries[d]; ok {
				all[d] = e
				continue
			}
			all[d] = &entry{kind: kindDir}
		}
	}
	out := make([]named, 0, len(all))
	for p, e := range all {
		out = append(out, named{p, e})
	}
	slices.SortFunc(out, func(a, b named) int { return compareSlashPath(a.path, b.path) })
	return out
}

// compareSlashPath orders paths component by component, so that "a/b" comes
// right after "a" and before "a-b" (plain string order would put "a-b"
// between them, which is still parent-first but splits a folder's contents).
func compareSlashPath(a, b string) int {
	for a != "" || b != "" {
		ha, ta := cutFirst(a)
		hb, tb := cutFirst(b)
		if ha != hb {
			if ha < hb {
				return -1
			}
			return 1
		}
		a, b = ta, tb
	}
	return 0
}

func cutFirst(p string) (string, string) {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return p[:i], p[i+1:]
		}
	}
	return p, ""
}

// counts returns how many files, links and directories a write produces.
func (t *tree) counts() (files, links, dirs int) {
	for _, e := range t.sorted() {
		switch e.kind {
		case kindFile:
			files++
		case kindLink:
			links++
		case kindDir:
			dirs++
		}
	}
	return files, links, dirs
}

// writeDir writes the tree into dir, which must not exist or be an empty
// directory that we own and that is not a symlink.
func (t *tree) writeDir(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("create snapshot dir %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("snapshot dir %s: %w", dir, err)
	}
	if err := ownDir(dir, fi); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open snapshot dir %s: %w", dir, err)
	}
	defer root.Close()
	// What was opened is what was checked: not swapped for a link since.
	if rfi, err := root.Stat("."); err != nil || !os.SameFile(fi, rfi) {
		return fmt.Errorf("snapshot dir %s: changed while being opened: %w", dir, errUnsafeOutput)
	}
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("read snapshot dir %s: %w", dir, err)
	}
	names, err := d.Readdirnames(1)
	d.Close()
	if err != nil && err != io.EOF {
		return fmt.Errorf("read snapshot dir %s: %w", dir, err)
	} else if len(names) > 0 {
		return fmt.Errorf("snapshot dir %s: %w", dir, errNotEmpty)
	}
	for _, e := range t.sorted() {
		var err error
		switch e.kind {
		case kindDir:
			err = root.Mkdir(e.path, dirMode)
		case kindFile:
			err = writeNew(root, e.path, e.data)
		case kindLink:
			err = root.Symlink(e.link, e.path)
		}
		if err != nil {
			return fmt.Errorf("write snapshot %s: %w", path.Join(dir, e.path), err)
		}
	}
	return nil
}

// ownDir refuses an output directory, described by its Lstat fi, that is a
// symlink, not a directory, or not owned by us.
func ownDir(dir string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("snapshot dir %s is a symlink: %w", dir, errUnsafeOutput)
	case !fi.IsDir():
		return fmt.Errorf("snapshot dir %s: not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("snapshot dir %s is owned by uid %d, not us (uid %d): %w", dir, st.Uid, os.Geteuid(), errUnsafeOutput)
	}
	return nil
}

// writeNew creates p in root, refusing anything already there (a link
// included), and writes data into it.
func writeNew(root *os.Root, p string, data []byte) error {
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

var (
	errNotEmpty     = errors.New("not empty")
	errUnsafeOutput = errors.New("unsafe output directory")
)

// writeTarGz writes the tree as a deterministic .tar.gz stream.
func (t *tree) writeTarGz(w io.Writer) error {
	zw := gzip.NewWriter(w) // zero header: no name, no mtime
	tw := tar.NewWriter(zw)
	for _, e := range t.sorted() {
		h := &tar.Header{
			Name:    e.path,
			ModTime: fixedTime,
			Format:  tar.FormatPAX,
		}
		switch e.kind {
		case kindDir:
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.path+"/", dirMode
		case kindFile:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, fileMode, int64(len(e.data))
		case kindLink:
			h.Typeflag, h.Mode, h.Linkname = tar.TypeSymlink, linkMode, e.link
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write snapshot tar header %s: %w", e.path, err)
		}
		if e.kind == kindFile {
			if _, err := tw.Write(e.data); err != nil {
				return fmt.Errorf("write snapshot tar %s: %w", e.path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close snapshot tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("close snapshot gzip: %w", err)
	}
	return nil
}
