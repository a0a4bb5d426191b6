// Package sysattr reads single sysfs and procfs attribute files: one
// bounded read, the trailing newline dropped, and typed parsers for the
// number forms the kernel writes ("0x10de", "-1", "16"). It knows nothing
// of any particular file; callers name the path.
//
// Errors wrap the os error (so errors.Is(err, fs.ErrNotExist) works) and
// name the file.
package sysattr

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxSize bounds one attribute read. sysfs attributes are at most a page;
// procfs files such as cpuinfo are read with ReadFileLimit.
const MaxSize = 64 << 10

// ErrTooLarge is wrapped when a file exceeds the read bound.
var ErrTooLarge = errors.New("file larger than read bound")

// ReadFileLimit reads at most limit bytes of path; a longer file is an
// error wrapping ErrTooLarge. A sysfs attribute is read in one read call
// (the kernel fills it whole, and some drivers answer a second read with
// EAGAIN forever); only a file that fills the first buffer is read on.
func ReadFileLimit(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	defer f.Close()
	buf := make([]byte, min(limit+1, 1024))
	n, err := f.Read(buf)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if n < len(buf) {
		return buf[:n], nil
	}
	rest, err := io.ReadAll(io.LimitReader(f, int64(limit+1-n)))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	b := append(buf[:n], rest...)
	if len(b) > limit {
		return nil, fmt.Errorf("read %s: %w (%d bytes)", path, ErrTooLarge, limit)
	}
	return b, nil
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

// Hex reads a "0x"-prefixed hexadecimal attribute ("0x10de", "0x030200").
func Hex(path string) (uint32, error) {
	s, err := String(path)
	if err != nil {
		return 0, err
	}
	v, err := ParseHex(s)
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
