package snapshot

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// Bounds on what Extract accepts: a snapshot is a few MiB.
const (
	extractFileLimit  = 256 << 20
	extractTotalLimit = 1 << 30
)

// ErrUnsafeEntry is wrapped by Extract's error for an archive entry that
// would write or point outside dir: an absolute name, a ".." component, an
// entry beneath or over a symlink, a link whose text is absolute or that,
// resolved as the kernel would through the links the archive holds,
// leaves dir (or takes more than maxLinkHops links), or a type other than
// file, directory or symlink.
var ErrUnsafeEntry = errors.New("unsafe archive entry")

// Extract unpacks a snapshot tar stream (gzip-compressed or not) into dir,
// created if missing. Directories are made 0755 and files 0644 whatever the
// archive says (a captured sysfs is read-only, and a read-only tree could not
// be removed by the test that unpacked it); links keep their exact text.
// Nothing is written outside dir: every write goes through an os.Root, and
// entries that would escape are refused with ErrUnsafeEntry. Links are made
// last, once every file and directory is in place, and only once each one's
// target has been resolved component by component inside dir, following the
// archive's other links (and any already in dir), and found not to leave
// it; past a component that does not exist the rest of the text is checked
// as written, so no ".." can climb out should it be created later. On
// error, what was extracted so far stays (links only when all passed).
func Extract(r io.Reader, dir string) error {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("extract into %s: %w", dir, err)
		}
		defer zr.Close()
		src = zr
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("extract: create %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("extract: open %s: %w", dir, err)
	}
	defer root.Close()
	x := &extractor{root: root, dir: dir, realDirs: map[string]bool{}, links: map[string]string{}}
	tr := tar.NewReader(src)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return x.makeLinks()
		}
		if err != nil {
			return fmt.Errorf("extract into %s: %w", dir, err)
		}
		if err := x.entry(h, tr); err != nil {
			return err
		}
	}
}

type extractor struct {
	root     *os.Root
	dir      string
	realDirs map[string]bool // directories known not to be symlinks
	total    int64
	// links are the archive's symlinks, name to text, made by makeLinks
	// once the rest is in place; linkNames keeps their archive order.
	links     map[string]string
	linkNames []string
}

func (x *extractor) entry(h *tar.Header, r io.Reader) error {
	if h.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	name, err := entryName(h.Name)
	if err != nil {
		return fmt.Errorf("extract %q into %s: %w", h.Name, x.dir, err)
	}
	if name == "" {
		return nil // "./" itself
	}
	for p := name; p != ""; p = parentOf(p) {
		if _, ok := x.links[p]; ok {
			what := "entry beneath a symlink"
			if p == name {
				what = "entry over a symlink"
			}
			return fmt.Errorf("extract %s: %s %s: %w", path.Join(x.dir, name), what, path.Join(x.dir, p), ErrUnsafeEntry)
		}
	}
	if err := x.mkdirs(parentOf(name)); err != nil {
		return err
	}
	where := path.Join(x.dir, name)
	switch h.Typeflag {
	case tar.TypeDir:
		return x.mkdirs(name)
	case tar.TypeReg:
		if h.Size > extractFileLimit || x.total+h.Size > extractTotalLimit {
			return fmt.Errorf("extract %s: %d bytes is over the limit: %w", where, h.Size, ErrUnsafeEntry)
		}
		x.total += h.Size
		if fi, err := x.root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("extract %s: file over a symlink: %w", where, ErrUnsafeEntry)
		}
		f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, fileMode)
		if err != nil {
			return fmt.Errorf("extract %s: %w", where, err)
		}
		_, err = io.Copy(f, io.LimitReader(r, h.Size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("extract %s: %w", where, err)
		}
		return nil
	case tar.TypeSymlink:
		// The text alone is checked now, the resolution in makeLinks.
		if _, ok := resolveText(parentOf(name), h.Linkname); !ok {
			return fmt.Errorf("extract %s -> %s: link leads outside %s: %w", where, h.Linkname, x.dir, ErrUnsafeEntry)
		}
		if _, err := x.root.Lstat(name); err == nil {
			return fmt.Errorf("extract %s: link over an existing entry: %w", where, ErrUnsafeEntry)
		}
		x.links[name] = h.Linkname
		x.linkNames = append(x.linkNames, name)
		return nil
	}
	return fmt.Errorf("extract %s: entry type %q: %w", where, h.Typeflag, ErrUnsafeEntry)
}

// entryName cleans an archive name ("./sys/x/" -> "sys/x") and refuses
// absolute names and ".." components.
func entryName(name string) (string, error) {
	n := strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/")
	if n == "" || n == "." {
		return "", nil
	}
	if !fs.ValidPath(n) {
		return "", fmt.Errorf("absolute path or \"..\" component: %w", ErrUnsafeEntry)
	}
	return n, nil
}

// mkdirs makes the directory p and its parents, refusing to go through a
// symlink: a link's text was checked against the directory the archive
// names, so an entry beneath a link could land elsewhere.
func (x *extractor) mkdirs(p string) error {
	if p == "" || x.realDirs[p] {
		return nil
	}
	if err := x.mkdirs(parentOf(p)); err != nil {
		return err
	}
	fi, err := x.root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := x.root.Mkdir(p, dirMode); err != nil {
			return fmt.Errorf("extract %s: %w", path.Join(x.dir, p), err)
		}
	case err != nil:
		return fmt.Errorf("extract %s: %w", path.Join(x.dir, p), err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("extract %s: entry beneath a symlink: %w", path.Join(x.dir, p), ErrUnsafeEntry)
	case !fi.IsDir():
		return fmt.Errorf("extract %s: not a directory", path.Join(x.dir, p))
	}
	x.realDirs[p] = true
	return nil
}

// makeLinks resolves every link as the kernel would, inside dir, and makes
// them all once none leaves it.
func (x *extractor) makeLinks() error {
	for _, name := range x.linkNames {
		if err := x.resolveLink(name); err != nil {
			return fmt.Errorf("extract %s -> %s: %w", path.Join(x.dir, name), x.links[name], err)
		}
	}
	for _, name := range x.linkNames {
		if err := x.root.Symlink(x.links[name], name); err != nil {
			return fmt.Errorf("extract %s: %w", path.Join(x.dir, name), err)
		}
	}
	return nil
}

// resolveLink walks the link name's target component by component from the
// link's directory, as path resolution would once every link is made:
// each component that is one of the archive's links, or a link already in
// dir, has its text spliced in (relative to the directory it sits in), ".."
// goes up one, and leaving dir, an absolute text or more than maxLinkHops
// links is refused. Once a component does not exist (or is not a
// directory) the rest is followed as text, so that a ".." past it cannot
// climb out either should it be created later.
func (x *extractor) resolveLink(name string) error {
	text := x.links[name]
	todo := splitPath(text)
	real := parentOf(name) // a real directory: entry refused any link above name
	hops := 1
	missing := false
	for len(todo) > 0 {
		comp := todo[0]
		todo = todo[1:]
		if comp == ".." {
			if real == "" {
				return fmt.Errorf("resolves outside %s: %w", x.dir, ErrUnsafeEntry)
			}
			real = parentOf(real)
			continue
		}
		next := join(real, comp)
		if missing {
			real = next
			continue
		}
		t, isLink := x.links[next]
		if !isLink {
			fi, err := x.root.Lstat(next)
			switch {
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
				missing = true
				real = next
				continue
			case err != nil:
				return err
			case fi.Mode()&fs.ModeSymlink != 0:
				if t, err = x.root.Readlink(next); err != nil {
					return err
				}
				isLink = true
			}
		}
		if !isLink {
			real = next
			continue
		}
		if hops++; hops > maxLinkHops {
			return fmt.Errorf("more than %d links deep: %w", maxLinkHops, ErrUnsafeEntry)
		}
		if t == "" || path.IsAbs(t) {
			return fmt.Errorf("through %s -> %s: absolute or empty link: %w", path.Join(x.dir, next), t, ErrUnsafeEntry)
		}
		todo = append(splitPath(t), todo...)
	}
	return nil
}
