// Package rootfs is the one reader of files under a filesystem root: the
// sysfs and procfs trees discovery reads, nvml.json, a vendor topology
// file found under the root. "/" is the live host; any other directory is
// an example machine, a snapshot or a fixture.
//
// Every path a caller gives is relative to the root, and every open stays
// inside it: links are followed only while they resolve beneath the root
// (openat2 with RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS; Go's os.Root walk
// where the kernel or a seccomp filter refuses openat2). A link that leads
// out of the root, even one component of a directory path, is refused
// with ErrOutsideRoot, so no host file ever appears as a fixture's
// attribute. Reads are bounded and never block: see ReadFile.
//
// Errors wrap the os error (errors.Is(err, fs.ErrNotExist) works) and name
// the file by its full path, root included.
package rootfs

import (
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
)

// ErrOutsideRoot is wrapped when a path, through a link, leads outside the
// root (or is absolute or climbs out with ".."): it is refused, not read.
var ErrOutsideRoot = errors.New("leads outside the root; refused")

// Root reads files under one directory. The zero value is not usable;
// call Open. A Root is safe for concurrent use.
type Root struct {
	dir  string
	live bool    // dir is "/": every path is inside it, plain opens do
	fd   int     // the root directory (O_PATH), for openat2
	mem  *Memory // an in-memory root (NewMemory); nil on disk

	osOnce sync.Once
	os     *os.Root // the walk used where openat2 is refused (walkRoot)
	osErr  error
}

// noOpenat2 is set once openat2 has answered ENOSYS or EPERM (an old
// kernel, a container's seccomp filter): every Root then walks with
// os.Root. Tests set it to exercise that walk.
var noOpenat2 atomic.Bool

// Clean is a root directory as every command and package takes it: ""
// (no --root, an Options.Root left zero) is the live host's "/", any
// other is filepath.Clean's. It is the one place that says what ""
// means: callers that keep a root as a string default it here, not by
// hand.
func Clean(dir string) string {
	if dir == "" {
		return "/"
	}
	return filepath.Clean(dir)
}

// IsLive reports whether dir names the running host's own root ("/",
// or "", the default: Clean): only then are live NVML, netlink,
// /dev/kmsg and the host's name read instead of the root's files. It
// is Open(dir).Live() without opening anything.
func IsLive(dir string) bool { return Clean(dir) == "/" }

// Open returns a reader of the tree under dir (Clean: "" is "/").
func Open(dir string) (*Root, error) {
	r := &Root{dir: Clean(dir), fd: -1}
	if IsLive(r.dir) {
		r.live = true
		return r, nil
	}
	fd, err := unix.Open(r.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", r.dir, &fs.PathError{Op: "open", Path: r.dir, Err: err})
	}
	r.fd = fd
	return r, nil
}

// walkRoot is the os.Root the walk uses, opened at its first use (most
// kernels never need it): from the root's own descriptor, so it is the
// same directory.
func (r *Root) walkRoot() (*os.Root, error) {
	r.osOnce.Do(func() {
		r.os, r.osErr = os.OpenRoot(fmt.Sprintf("/proc/self/fd/%d", r.fd))
		if r.osErr != nil {
			r.os, r.osErr = os.OpenRoot(r.dir)
		}
	})
	return r.os, r.osErr
}

// Close releases the root's descriptors.
func (r *Root) Close() error {
	if r == nil || r.live || r.mem != nil {
		return nil
	}
	unix.Close(r.fd)
	if r.os != nil {
		return r.os.Close()
	}
	return nil
}

// Dir is the root directory as given (cleaned).
func (r *Root) Dir() string { return r.dir }

// Live reports whether the root is the running host's "/".
func (r *Root) Live() bool { return r.live }

// Path is rel's full name, for messages and for callers that must hand a
// path to another program.
func (r *Root) Path(rel string) string { return filepath.Join(r.dir, rel) }

// clean checks rel is a relative path that does not climb out textually.
func (r *Root) clean(rel string) (string, error) {
	c := filepath.Clean(rel)
	if filepath.IsAbs(rel) || c == ".." || strings.HasPrefix(c, "../") {
		return "", &fs.PathError{Op: "open", Path: r.Path(rel), Err: ErrOutsideRoot}
	}
	return c, nil
}

// open opens rel with flags, inside the root. The descriptor is raw (not
// an os.File, which would park a non-blocking descriptor in the poller).
func (r *Root) open(rel string, flags int) (int, error) {
	name := r.Path(rel)
	if r.live {
		for {
			fd, err := unix.Open(name, flags|unix.O_CLOEXEC, 0)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return -1, &fs.PathError{Op: "open", Path: name, Err: err}
			}
			return fd, nil
		}
	}
	c, err := r.clean(rel)
	if err != nil {
		return -1, err
	}
	if !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
		}
		for try := 0; ; try++ {
			fd, err := unix.Openat2(r.fd, c, &how)
			switch {
			case err == nil:
				return fd, nil
			case err == unix.EINTR, err == unix.EAGAIN && try < 8:
				// EAGAIN: a rename raced the lookup; the kernel asks for
				// a retry.
				continue
			case err == unix.ENOSYS, err == unix.EPERM && try == 0 && !r.permDenied(c):
				noOpenat2.Store(true)
			case err == unix.EXDEV:
				return -1, &fs.PathError{Op: "open", Path: name, Err: ErrOutsideRoot}
			default:
				return -1, &fs.PathError{Op: "open", Path: name, Err: err}
			}
			break
		}
	}
	return r.walkOpen(c, flags)
}

// permDenied tells a real EPERM of the file from a seccomp filter's
// answer to openat2: a plain lookup of the same name answers EPERM too.
func (r *Root) permDenied(c string) bool {
	fd, err := unix.Openat(r.fd, c, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == nil {
		unix.Close(fd)
		return false
	}
	return err == unix.EPERM
}

// walkOpen opens through os.Root, which refuses any escape, and hands
// back a raw duplicate of the descriptor. os.Root has no O_PATH: Stat,
// Lstat and Readlink call os.Root themselves when openat2 is refused.
func (r *Root) walkOpen(c string, flags int) (int, error) {
	name := r.Path(c)
	if flags&(unix.O_PATH|unix.O_NOFOLLOW) != 0 {
		return -1, errWalk
	}
	wr, err := r.walkRoot()
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f, err := wr.OpenFile(c, flags&^unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, wrapWalk(name, err)
	}
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	dup := -1
	var derr error
	if cerr := sc.Control(func(fd uintptr) { dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		derr = cerr
	}
	if derr != nil {
		return -1, &fs.PathError{Op: "open", Path: name, Err: derr}
	}
	return dup, nil
}

// errWalk tells Stat, Lstat and Readlink to use os.Root's own call.
var errWalk = errors.New("rootfs: no openat2; walk with os.Root")

// isEscape recognises os.Root's refusal of a path that leaves it (the
// error has no exported value; its text is stable since Go 1.24).
func isEscape(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes from parent")
}

func wrapWalk(name string, err error) error {
	if isEscape(err) {
		return &fs.PathError{Op: "open", Path: name, Err: ErrOutsideRoot}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
	}
	return fmt.Errorf("%s: %w", name, err)
}

// ReadFile reads at most limit bytes of rel. It opens with O_NONBLOCK and
// refuses what is not a regular file (a FIFO, a device: ErrNotRegular)
// without blocking; a longer file is sysattr.ErrTooLarge. A sysfs
// attribute is read in one read call.
func (r *Root) ReadFile(rel string, limit int) ([]byte, error) {
	if r.mem != nil {
		return r.mem.readFile(rel, limit)
	}
	fd, err := r.open(rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return sysattr.ReadFD(fd, func() string { return r.Path(rel) }, limit)
}

// ReadPrefix reads the first n bytes of rel (all of a shorter file), with
// ReadFile's refusals.
func (r *Root) ReadPrefix(rel string, n int) ([]byte, error) {
	if r.mem != nil {
		b, err := r.mem.readFile(rel, math.MaxInt)
		return b[:min(len(b), n)], err
	}
	fd, err := r.open(rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return sysattr.ReadFDPrefix(fd, func() string { return r.Path(rel) }, n)
}

// String reads an attribute (at most sysattr.MaxSize) and trims white space.
func (r *Root) String(rel string) (string, error) {
	return trimmed(r.ReadFile(rel, sysattr.MaxSize))
}

// Int reads a decimal integer attribute ("-1", "16").
func (r *Root) Int(rel string) (int, error) {
	v, err := r.String(rel)
	return asInt(v, err, func() string { return r.Path(rel) })
}

// Hex reads a "0x"-prefixed hexadecimal attribute ("0x10de").
func (r *Root) Hex(rel string) (uint32, error) {
	v, err := r.String(rel)
	return asHex(v, err, func() string { return r.Path(rel) })
}

// ReadDir lists the directory rel, sorted by name.
func (r *Root) ReadDir(rel string) ([]fs.DirEntry, error) {
	if r.mem != nil {
		return r.mem.readDir(rel)
	}
	fd, err := r.open(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return listFD(fd, r.Path(rel))
}

// listFD lists the directory open as fd, sorted by name, and closes fd.
func listFD(fd int, name string) ([]fs.DirEntry, error) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	sortfn.Sort(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// Stat describes rel, following links (inside the root).
func (r *Root) Stat(rel string) (fs.FileInfo, error) {
	if r.mem != nil {
		return r.mem.stat(rel, true)
	}
	if r.live {
		return os.Stat(r.Path(rel))
	}
	return r.stat(rel, unix.O_PATH, func(c string) (fs.FileInfo, error) {
		wr, err := r.walkRoot()
		if err != nil {
			return nil, err
		}
		return wr.Stat(c)
	})
}

// Lstat describes rel itself when it is a link. Its directory is still
// resolved inside the root.
func (r *Root) Lstat(rel string) (fs.FileInfo, error) {
	if r.mem != nil {
		return r.mem.stat(rel, false)
	}
	if r.live {
		return os.Lstat(r.Path(rel))
	}
	return r.stat(rel, unix.O_PATH|unix.O_NOFOLLOW, func(c string) (fs.FileInfo, error) {
		wr, err := r.walkRoot()
		if err != nil {
			return nil, err
		}
		return wr.Lstat(c)
	})
}

func (r *Root) stat(rel string, flags int, walk func(string) (fs.FileInfo, error)) (fs.FileInfo, error) {
	fd, err := r.open(rel, flags)
	if err == errWalk {
		c, err := r.clean(rel)
		if err != nil {
			return nil, err
		}
		fi, err := walk(c)
		if err != nil {
			return nil, wrapWalk(r.Path(rel), err)
		}
		return fi, nil
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), r.Path(rel))
	defer f.Close()
	return f.Stat()
}

// Readlink returns the target of the link rel (its directory resolved
// inside the root). The target is returned as written; callers resolving
// it use the same Root, so it cannot lead them out.
func (r *Root) Readlink(rel string) (string, error) {
	name := r.Path(rel)
	if r.mem != nil {
		return r.mem.readlink(rel)
	}
	if r.live {
		return os.Readlink(name)
	}
	fd, err := r.open(rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil && err != errWalk {
		return "", err
	}
	if err == nil {
		defer unix.Close(fd)
		t, err := readlinkAt(fd, "", name)
		if errors.Is(err, unix.ENOENT) {
			err = &fs.PathError{Op: "readlink", Path: name, Err: unix.EINVAL} // rel exists and is not a link
		}
		return t, err
	}
	c, err := r.clean(rel)
	if err != nil {
		return "", err
	}
	wr, err := r.walkRoot()
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	t, err := wr.Readlink(c)
	if err != nil {
		return "", wrapWalk(name, err)
	}
	return t, nil
}

// Dir is a directory under a root, held open: a file in it is opened by
// its name alone, relative to the directory's descriptor and never
// through a link (O_NOFOLLOW), so a scrape that reads the hundreds of
// counter files of a few port directories resolves each directory once.
type Dir struct {
	r   *Root
	rel string   // the directory, relative to the root
	fd  int      // -1 for a memory root
	mn  *memNode // a memory root's directory
}

// OpenDir opens the directory rel, resolved inside the root as every
// other path is.
func (r *Root) OpenDir(rel string) (*Dir, error) {
	if r.mem != nil {
		p, n, err := r.mem.resolve(rel, true)
		if err != nil {
			return nil, err
		}
		if !n.mode.IsDir() {
			return nil, &fs.PathError{Op: "open", Path: r.Path(rel), Err: syscall.ENOTDIR}
		}
		return &Dir{r: r, rel: p, fd: -1, mn: n}, nil
	}
	fd, err := r.open(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return &Dir{r: r, rel: rel, fd: fd}, nil
}

// Close releases the directory.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	return unix.Close(d.fd)
}

// Path is the full name of the file name in the directory.
func (d *Dir) Path(name string) string { return d.r.Path(d.rel + "/" + name) }

// ReadFile reads the file name (one path component) of the directory as
// Root.ReadFile reads: bounded, non-blocking, regular files only; a link
// in its place is refused (ErrNotRegular).
func (d *Dir) ReadFile(name string, limit int) ([]byte, error) {
	if !validName(name) {
		return nil, &fs.PathError{Op: "open", Path: d.Path(name), Err: syscall.EINVAL}
	}
	if d.fd < 0 {
		n, ok := child(d.mn, name)
		switch {
		case !ok || n.mode.IsDir(): // its error, as the root's
			return d.r.mem.readFile(path.Join(d.rel, name), limit)
		case n.mode&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("open %s: a link: %w", d.Path(name), sysattr.ErrNotRegular)
		}
		return d.r.mem.contentsAt(func() string { return d.rel + "/" + name }, n, limit)
	}
	fd, err := d.openFile(name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return sysattr.ReadFD(fd, func() string { return d.Path(name) }, limit)
}

// openFile opens the file name of the directory for reading, never
// through a link (a link in its place is ErrNotRegular) and never
// blocking.
func (d *Dir) openFile(name string) (int, error) {
	for {
		fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ELOOP:
			return -1, fmt.Errorf("open %s: a link: %w", d.Path(name), sysattr.ErrNotRegular)
		case err != nil:
			return -1, &fs.PathError{Op: "open", Path: d.Path(name), Err: err}
		}
		return fd, nil
	}
}

// ReadInto reads the file name of the directory into buf, as ReadFile
// reads but into the caller's buffer (a pooled one): until buf is full or
// the file ends. It returns the bytes read; a longer file is not an error.
func (d *Dir) ReadInto(name string, buf []byte) (int, error) {
	if !validName(name) {
		return 0, &fs.PathError{Op: "open", Path: d.Path(name), Err: syscall.EINVAL}
	}
	if d.fd < 0 {
		b, err := d.ReadFile(name, math.MaxInt)
		return copy(buf, b), err
	}
	fd, err := d.openFile(name)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return sysattr.ReadFDInto(fd, func() string { return d.Path(name) }, buf)
}

// ReadDir lists the directory, sorted by name.
func (d *Dir) ReadDir() ([]fs.DirEntry, error) {
	if d.fd < 0 {
		return d.r.mem.readDir(d.rel)
	}
	// A descriptor of its own: reading entries moves its offset.
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.r.Path(d.rel), Err: err}
	}
	return listFD(fd, d.r.Path(d.rel))
}

// String reads the attribute name (at most sysattr.MaxSize) and trims
// white space.
func (d *Dir) String(name string) (string, error) {
	return trimmed(d.ReadFile(name, sysattr.MaxSize))
}

// Int reads a decimal integer attribute.
func (d *Dir) Int(name string) (int, error) {
	v, err := d.String(name)
	return asInt(v, err, func() string { return d.Path(name) })
}

// Hex reads a "0x"-prefixed hexadecimal attribute.
func (d *Dir) Hex(name string) (uint32, error) {
	v, err := d.String(name)
	return asHex(v, err, func() string { return d.Path(name) })
}

// Readlink returns the target of the link name in the directory.
func (d *Dir) Readlink(name string) (string, error) {
	if !validName(name) {
		return "", &fs.PathError{Op: "readlink", Path: d.Path(name), Err: syscall.EINVAL}
	}
	if d.fd < 0 {
		return d.r.mem.readlink(path.Join(d.rel, name))
	}
	return readlinkAt(d.fd, name, d.Path(name))
}

// Exists reports whether the directory has an entry name (a link is not
// followed).
func (d *Dir) Exists(name string) bool {
	if !validName(name) {
		return false
	}
	if d.fd < 0 {
		_, ok := child(d.mn, name)
		return ok
	}
	var st unix.Stat_t
	return unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// validName reports whether name is one path component: a Dir never
// walks a path.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/')
}

// readlinkAt reads the link name relative to fd (name "" for fd itself,
// opened O_PATH|O_NOFOLLOW); display names it in errors.
func readlinkAt(fd int, name, display string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return "", &fs.PathError{Op: "readlink", Path: display, Err: err}
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= 64<<10 {
			return "", &fs.PathError{Op: "readlink", Path: display, Err: syscall.ENAMETOOLONG}
		}
		buf = make([]byte, 2*len(buf))
	}
}

// trimmed, asInt and asHex turn what a read gave into an attribute's
// value; name gives the file's name for a parse error.
func trimmed(b []byte, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func asInt(s string, err error, name func() string) (int, error) {
	if err != nil {
		return 0, err
	}
	v, err := sysattr.ParseInt(s)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", name(), err)
	}
	return v, nil
}

func asHex(s string, err error, name func() string) (uint32, error) {
	if err != nil {
		return 0, err
	}
	v, err := sysattr.ParseHex(s)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", name(), err)
	}
	return v, nil
}
