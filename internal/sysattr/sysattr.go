// Package sysattr reads single sysfs and procfs attribute files: one
// bounded read, the trailing newline dropped, and typed parsers for the
// number forms the kernel writes ("0x10de", "-1", "16"). It knows nothing
// of any particular file; callers name the path.
//
// Errors wrap the os error (so errors.Is(err, fs.ErrNotExist) works) and
// name the file.
package sysattr

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// MaxSize bounds one attribute read. sysfs attributes are at most a page;
// procfs files such as cpuinfo are read with ReadFileLimit.
const MaxSize = 64 << 10

// ErrNotRegular is wrapped when a path under the root is not a regular
// file (a FIFO, a device, a socket): it is refused, never read to its end.
var ErrNotRegular = errors.New("not a regular file; refused")

// ErrTooLarge is wrapped when a file exceeds the read bound.
var ErrTooLarge = errors.New("file larger than read bound")

// ReadFileLimit reads at most limit bytes of path; a longer file is an
// error wrapping ErrTooLarge. A sysfs attribute is read in one read call
// (the kernel fills it whole, and some drivers answer a second read with
// EAGAIN forever); only a file that fills the first buffer is read on.
func ReadFileLimit(path string, limit int) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO (or a device) planted under the root
	// must not block; a read of one then answers at once (EOF or EAGAIN)
	// and is refused below. Raw system calls: os.File would park a
	// non-blocking descriptor in the poller and wait.
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	return ReadFD(fd, func() string { return path }, limit)
}

// firstBufSize is the first read's buffer: more than any sysfs attribute
// gpuaffinity reads but a CPU mask of a very large machine.
const firstBufSize = 1024

var firstBufs = sync.Pool{New: func() any { return new([firstBufSize]byte) }}

// ReadFD reads at most limit bytes from the open descriptor fd (opened
// with O_NONBLOCK), named path() in errors (called only for one), with
// ReadFileLimit's rules: a FIFO, device or socket is refused
// (ErrNotRegular), a longer file is ErrTooLarge. It does not close fd.
func ReadFD(fd int, path func() string, limit int) ([]byte, error) {
	return readFD(fd, path, limit, false)
}

// readSome is one read(2) of fd into b, retried on EINTR; EAGAIN (a FIFO
// with a writer, opened O_NONBLOCK) and EISDIR are ErrNotRegular.
func readSome(fd int, path func() string, b []byte) (int, error) {
	for {
		n, err := syscall.Read(fd, b)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			return 0, fmt.Errorf("read %s: %w", path(), ErrNotRegular)
		case errors.Is(err, syscall.EISDIR):
			return 0, fmt.Errorf("read %s: a directory: %w", path(), ErrNotRegular)
		case err != nil:
			return 0, fmt.Errorf("read %s: %w", path(), err)
		}
		return n, nil
	}
}

// readFD is ReadFD; with prefix set, a longer file is not an error: its
// first limit bytes are the answer.
func readFD(fd int, path func() string, limit int, prefix bool) ([]byte, error) {
	read := func(b []byte) (int, error) { return readSome(fd, path, b) }
	// The first read goes into a pooled buffer and a short answer (every
	// sysfs attribute) is copied out at its size: a discovery reads a
	// thousand attributes of a few bytes each, and a fresh kilobyte for
	// each was most of its allocation and page faults.
	pb := firstBufs.Get().(*[firstBufSize]byte)
	defer firstBufs.Put(pb)
	buf := pb[:min(limit+1, firstBufSize)]
	n, err := read(buf)
	if err != nil {
		return nil, err
	}
	var size int64
	if n == 0 || n == len(buf) {
		// An empty answer, or one that fills the buffer: make sure it is
		// a file's (sysfs and procfs files are regular files), not a
		// FIFO's EOF or a device's endless stream (/dev/zero).
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, &fs.PathError{Op: "fstat", Path: path(), Err: err}
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			return nil, fmt.Errorf("read %s: %w", path(), ErrNotRegular)
		}
		size = st.Size
	}
	if n < len(buf) {
		return bytes.Clone(buf[:n]), nil
	}
	// A file on disk says its size (sysfs says a page, procfs 0): one
	// over the bound is refused unread, and the buffer is sized once.
	if size > int64(limit) {
		if !prefix {
			return nil, fmt.Errorf("read %s: %w (%d bytes, over the %d-byte limit)", path(), ErrTooLarge, size, limit)
		}
		size = int64(limit)
	}
	b := make([]byte, n, max(int(size)+1, 2*n))
	copy(b, buf[:n])
	for len(b) <= limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := read(b[len(b):min(cap(b), limit+1)])
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return b, nil
		}
		b = b[:len(b)+m]
	}
	if prefix {
		return b[:limit], nil
	}
	return nil, fmt.Errorf("read %s: %w (over the %d-byte limit)", path(), ErrTooLarge, limit)
}

// ReadFDInto reads from the open descriptor fd into buf until buf is full
// or the file ends, with ReadFD's refusals (a FIFO, device or socket is
// ErrNotRegular), and returns how many bytes it read: for a caller that
// reads many files of one known bound (configuration spaces) into one
// reused buffer. A longer file is not an error. It does not close fd.
func ReadFDInto(fd int, path func() string, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := readSome(fd, path, buf[n:])
		if err != nil {
			return 0, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	if n == 0 || n == len(buf) {
		// As readFD: an empty or a full answer may be a FIFO's EOF or a
		// device's endless stream.
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return 0, &fs.PathError{Op: "fstat", Path: path(), Err: err}
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			return 0, fmt.Errorf("read %s: %w", path(), ErrNotRegular)
		}
	}
	return n, nil
}

// ReadFDPrefix reads the first n bytes (fewer for a shorter file) from
// the open descriptor fd, with ReadFD's refusals; a longer file is not an
// error. It does not close fd.
func ReadFDPrefix(fd int, path func() string, n int) ([]byte, error) {
	return readFD(fd, path, n, true)
}

// String reads an attribute and trims surrounding white space.
func String(path string) (string, error) {
	b, err := ReadFileLimit(path, MaxSize)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Int reads a decimal integer attribute ("-1", "16").
func Int(path string) (int, error) {
	s, err := String(path)
	if err != nil {
		return 0, err
	}
	v, err := ParseInt(s)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

// ParseInt parses a decimal integer that fits in 32 bits.
func ParseInt(s string) (int, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %q", s)
	}
	return int(v), nil
}

// ParseHex parses "0x10de" (the prefix is required, as sysfs writes it).
func ParseHex(s string) (uint32, error) {
	s = strings.TrimSpace(s)
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || h == "" {
		return 0, fmt.Errorf("not a 0x-prefixed hex number: %q", s)
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("not a 0x-prefixed hex number: %q", s)
	}
	return uint32(v), nil
}
