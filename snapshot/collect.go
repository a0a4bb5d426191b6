package snapshot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// errOutsideRoot marks a link whose text is absolute or leads above the root.
var errOutsideRoot = errors.New("link outside root")

// errTooLarge marks a file over its rule's read limit.
var errTooLarge = errors.New("file too large")

// readFunc reads at most limit bytes of the regular file name below root.
// Tests replace it to simulate what only real sysfs does (EINVAL on an
// unpopulated GID, a file gone between listing and reading).
type readFunc func(root *os.Root, name string, limit int64) ([]byte, error)

// readBounded opens name without following a final symlink and reads at most
// limit bytes; more is errTooLarge.
func readBounded(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes: %w", name, limit, errTooLarge)
	}
	return data, nil
}

// collector walks the allowlist over one source root into a tree.
type collector struct {
	opts    Options
	src     *os.Root
	read    readFunc
	tree    *tree
	rep     Report
	visited map[string]bool // scope + "\x00" + canonical dir
	scrub   *scrubber       // nil unless opts.Scrub
}

// collect reads everything the allowlist names under opts.Root, plus the
// NVML answers, into a tree. read nil means readBounded.
func collect(opts Options, read readFunc) (*tree, Report, error) {
	if read == nil {
		read = readBounded
	}
	src, err := openSource(opts.Root)
	if err != nil {
		return nil, Report{}, err
	}
	defer src.Close()
	c := &collector{
		opts:    opts,
		src:     src,
		read:    read,
		tree:    newTree(),
		rep:     Report{Skipped: map[string]int{}},
		visited: map[string]bool{},
	}
	if opts.Scrub {
		c.scrub = &scrubber{}
	}
	if err := c.visit(scopeRoot, ""); err != nil {
		return nil, c.rep, err
	}
	if err := c.nvml(); err != nil {
		return nil, c.rep, err
	}
	if err := c.addresses(); err != nil {
		return nil, c.rep, err
	}
	c.rep.Files, c.rep.Links, c.rep.Dirs = c.tree.counts()
	return c.tree, c.rep, nil
}

// visit applies every rule of scope s to the canonical directory dir once.
// A PCI function's ancestors below sys/devices are visited too.
func (c *collector) visit(s scope, dir string) error {
	key := s.String() + "\x00" + dir
	if c.visited[key] {
		return nil
	}
	c.visited[key] = true
	for _, r := range rules {
		if r.scope != s {
			continue
		}
		for _, p := range expandBraces(r.pattern) {
			if err := c.expand(r, dir, dir, strings.Split(p, "/")); err != nil {
				return err
			}
		}
	}
	if s == scopePCI {
		if parent := path.Dir(dir); strings.HasPrefix(parent, "sys/devices/") {
			return c.visit(scopePCI, parent)
		}
	}
	return nil
}

// expand walks the pattern components comps below a directory known both by
// its logical path (as the pattern spells it) and its canonical path (links
// resolved), and applies r to each match of the last component.
func (c *collector) expand(r rule, logical, real string, comps []string) error {
	comp, last := comps[0], len(comps) == 1
	if !hasMeta(comp) {
		if last {
			return c.apply(r, logical, real, comp, false)
		}
		next, err := c.canon(join(real, comp), !r.flat)
		if err != nil {
			// An intermediate directory that is not there (no
			// infiniband/, no /proc/driver/nvidia) is not an error.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return c.handle(join(real, comp), err, false)
		}
		if fi, err := c.src.Lstat(next); err != nil || !fi.IsDir() {
			return nil
		}
		return c.expand(r, join(logical, comp), next, comps[1:])
	}
	entries, err := c.readDir(real)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return c.handle(real, err, true)
	}
	if !r.flat {
		// Keep the listed folder even when nothing in it matches: an
		// empty sys/class/infiniband says "no RDMA devices", not "unknown".
		c.tree.addDir(real)
	}
	for _, e := range entries {
		if ok, _ := path.Match(comp, e.Name()); !ok {
			continue
		}
		if last {
			if err := c.apply(r, logical, real, e.Name(), true); err != nil {
				return err
			}
			continue
		}
		if !e.IsDir() {
			continue
		}
		if err := c.expand(r, join(logical, e.Name()), join(real, e.Name()), comps[1:]); err != nil {
			return err
		}
	}
	return nil
}

// apply runs r's action on name in the canonical directory real (logical is
// the same directory as the pattern spells it). listed is true when name came
// from a directory listing, so that its absence is a vanish, not an absent
// optional attribute.
func (c *collector) apply(r rule, logical, real, name string, listed bool) error {
	p := join(real, name)
	fi, err := c.src.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !listed {
			return nil // an optional attribute this device does not have
		}
		return c.handle(p, err, listed)
	}
	isLink := fi.Mode()&fs.ModeSymlink != 0
	switch r.action {
	case copyFile:
		if isLink && listed {
			return nil // a pattern listing files skips the links beside them
		}
		return c.copyFile(r, join(logical, name), p)
	case copyLink, linkMkdir, followLink:
		if !isLink {
			return nil
		}
		target, err := c.copyLink(p)
		if err != nil || target == "" {
			return err
		}
		if r.action == copyLink {
			return nil
		}
		dir, err := c.canon(target, true)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a dangling link is copied as it is
			}
			return c.handle(target, err, true)
		}
		if fi, err := c.src.Lstat(dir); err != nil || !fi.IsDir() {
			return nil
		}
		if r.action == linkMkdir {
			c.tree.addDir(dir)
			return nil
		}
		return c.visit(r.into, dir)
	case enterDir:
		if !fi.IsDir() {
			return nil
		}
		return c.visit(r.into, p)
	case copyVPD:
		if isLink || !fi.Mode().IsRegular() {
			return nil
		}
		return c.copyVPD(real, p)
	case describeNode:
		dst := join(logical, name)
		switch {
		case fi.Mode()&fs.ModeCharDevice != 0:
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			if !c.tree.addFile(dst, fmt.Appendf(nil, "c %d:%d\n", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))) {
				c.warn("%s: captured twice, kept the first", dst)
			}
			return nil
		case fi.Mode().IsRegular():
			return c.copyFile(r, dst, p)
		}
		return nil
	case keepDir:
		if fi.IsDir() {
			dst := p
			if r.flat {
				dst = join(logical, name)
			}
			c.tree.addDir(dst)
		}
		return nil
	}
	return fmt.Errorf("snapshot: rule %q has unknown action %d", r.pattern, r.action)
}

// copyFile reads the file p (logical is its path as the pattern spells it)
// and adds it to the tree, at logical for flat rules, else at its canonical
// path with the links on the way.
func (c *collector) copyFile(r rule, logical, p string) error {
	if neverRead(path.Base(p)) {
		c.skip("never read")
		return nil
	}
	real, err := c.canon(p, !r.flat)
	if err != nil {
		return c.handle(p, err, true)
	}
	if !r.flat && c.tree.has(real) {
		// The same file reached through two scopes (a namespace's size
		// through its controller and through sys/class/block): one copy.
		return nil
	}
	fi, err := c.src.Lstat(real)
	if err != nil {
		return c.handle(real, err, true)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Mode().Perm()&0o444 == 0 {
		c.skip("write-only")
		return nil
	}
	limit := r.limit
	if limit == 0 {
		limit = attrLimit
	}
	data, err := c.read(c.src, real, limit)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			c.skip(fmt.Sprintf("larger than %d bytes", limit))
			return nil
		}
		return c.handle(real, err, true)
	}
	if c.scrub != nil {
		data = c.scrub.file(r.scrub, data)
	}
	dst := real
	if r.flat {
		dst = logical
	}
	if !c.tree.addFile(dst, data) {
		c.warn("%s: captured twice, kept the first", dst)
	}
	return nil
}

// copyVPD keeps the VPD file p of the PCI function whose directory is dir
// where pci.WantsVPD says it ties a NIC to a Data Direct function: its
// name and V3 only, re-encoded. A VPD that does not parse is left out
// with a warning; one the kernel will not give (EACCES without root) is
// skipped, and discovery on the snapshot then says the tie is unknown.
func (c *collector) copyVPD(dir, p string) error {
	var ids [2]uint16
	for i, f := range []string{"vendor", "device"} {
		b, err := c.read(c.src, join(dir, f), attrLimit)
		if err != nil {
			return nil
		}
		v, err := sysattr.ParseHex(string(b))
		if err != nil || v > 0xffff {
			return nil
		}
		ids[i] = uint16(v)
	}
	if !pci.WantsVPD(ids[0], ids[1]) {
		return nil
	}
	data, err := c.read(c.src, p, 32<<10)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			c.skip("larger than 32768 bytes")
			return nil
		}
		return c.handle(p, err, true)
	}
	v, err := pci.ParseVPD(data)
	if err != nil {
		c.warn("%s: %v: not kept", p, err)
		return nil
	}
	kept := pci.VPD{Name: v.Name, V3: v.V3}
	if c.scrub != nil && kept.V3 != "" {
		d := digest("vpd-v3", []byte(kept.V3))
		kept.V3 = fmt.Sprintf("%x-%x-%x-%x-%x", d[0:4], d[4:6], d[6:8], d[8:10], d[10:16])
	}
	if !c.tree.addFile(p, kept.Bytes()) {
		c.warn("%s: captured twice, kept the first", p)
	}
	return nil
}

// copyLink adds the symlink p to the tree with its exact text and returns
// the root-relative path the text points at, or "" when it leads outside the
// root (then nothing is added).
func (c *collector) copyLink(p string) (string, error) {
	text, err := c.src.Readlink(p)
	if err != nil {
		return "", c.handle(p, err, true)
	}
	target, ok := resolveText(path.Dir(p), text)
	if !ok {
		return "", c.handle(p, fmt.Errorf("%s -> %s: %w", p, text, errOutsideRoot), true)
	}
	c.tree.addLink(p, text)
	return target, nil
}

// resolveText joins a link's text to the canonical directory holding the
// link; ok is false when the text is absolute or climbs above the root.
func resolveText(dir, text string) (string, bool) {
	if text == "" || path.IsAbs(text) {
		return "", false
	}
	t := path.Join(dir, text)
	if t == ".." || strings.HasPrefix(t, "../") {
		return "", false
	}
	if t == "." {
		t = ""
	}
	return t, true
}

// maxLinkHops bounds link resolution, as the kernel's MAXSYMLINKS does.
const maxLinkHops = 40

// canon resolves every symlink in the root-relative path p, without leaving
// the root, and returns the canonical path. When record is true each link
// passed through is added to the tree with its exact text, so that the
// snapshot resolves p the same way. The last component must exist.
func (c *collector) canon(p string, record bool) (string, error) {
	todo := splitPath(p)
	real := ""
	hops := 0
	for len(todo) > 0 {
		comp := todo[0]
		todo = todo[1:]
		if comp == ".." {
			if real == "" {
				return "", fmt.Errorf("%s: %w", p, errOutsideRoot)
			}
			real = parentOf(real)
			continue
		}
		next := join(real, comp)
		fi, err := c.src.Lstat(next)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			real = next
			continue
		}
		if hops++; hops > maxLinkHops {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		text, err := c.src.Readlink(next)
		if err != nil {
			return "", err
		}
		target, ok := resolveText(real, text)
		if !ok {
			return "", fmt.Errorf("%s -> %s: %w", next, text, errOutsideRoot)
		}
		if record {
			c.tree.addLink(next, text)
		}
		todo = append(splitPath(target), todo...)
		real = ""
	}
	return real, nil
}

// readDir lists the canonical directory dir, sorted by name.
func (c *collector) readDir(dir string) ([]fs.DirEntry, error) {
	name := dir
	if name == "" {
		name = "."
	}
	f, err := c.src.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// handle sorts a failure on p into what it is: something gone since it was
// listed (a warning), a file the kernel would not give (skipped with the
// errno's name), a link out of the root (skipped), or a real error.
func (c *collector) handle(p string, err error, listed bool) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, errOutsideRoot):
		c.skip(errOutsideRoot.Error())
		c.warn("%s: not followed: %v", p, err)
		return nil
	case errors.Is(err, fs.ErrNotExist) && !listed:
		return nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENODEV), errors.Is(err, syscall.ENXIO),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENOTDIR):
		c.warn("%s: changed while the snapshot was taken: %v", p, err)
		return nil
	case errors.As(err, &errno) && skippable(errno):
		c.skip(errnoName(errno))
		return nil
	}
	return fmt.Errorf("snapshot %s: %w", p, err)
}

// skippable are the errnos a sysfs or procfs read answers for a file that has
// no value to give now: EINVAL (an unpopulated GID, speed of a down link),
// ENODATA, EIO (firmware not answering), EOPNOTSUPP, EAGAIN, EBUSY, and
// EACCES/EPERM (a root-only attribute when not run as root).
func skippable(e syscall.Errno) bool {
	switch e {
	case syscall.EINVAL, syscall.ENODATA, syscall.EIO, syscall.EOPNOTSUPP, syscall.EAGAIN,
		syscall.EBUSY, syscall.EACCES, syscall.EPERM:
		return true
	}
	return false
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.ENODATA:
		return "ENODATA"
	case syscall.EIO:
		return "EIO"
	case syscall.EOPNOTSUPP:
		return "EOPNOTSUPP"
	case syscall.EAGAIN:
		return "EAGAIN"
	case syscall.EBUSY:
		return "EBUSY"
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	}
	return e.Error()
}

func (c *collector) skip(reason string) { c.rep.Skipped[reason]++ }

func (c *collector) warn(format string, args ...any) {
	c.rep.Warnings = append(c.rep.Warnings, fmt.Sprintf(format, args...))
}

// join joins root-relative paths, "" being the root.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// parentOf is path.Dir for root-relative paths, "" being the root.
func parentOf(p string) string {
	d := path.Dir(p)
	if d == "." {
		return ""
	}
	return d
}

// splitPath splits a root-relative path into components, dropping empty
// ones and ".".
func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}
