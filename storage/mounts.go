package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// ProcMounts is the mount table of the reading process's namespace.
const ProcMounts = "proc/mounts"

// maxMounts bounds proc/mounts: a node with container overlays can list
// thousands of mounts, each a line of a few hundred bytes.
const maxMounts = 8 << 20

// Mount is one line of proc/mounts.
type Mount struct {
	Source  string   // "/dev/md0", "10.0.0.1@o2ib:/lustre", "server:/export"
	Target  string   // mount point
	FSType  string   // "ext4", "nfs4", "lustre", "wekafs", ...
	Options []string // "rw", "proto=rdma", ...
}

// Option returns the value of option key ("proto" of "proto=rdma") and
// whether it is set; a flag option ("rw") has the value "".
func (m Mount) Option(key string) (string, bool) {
	for _, o := range m.Options {
		k, v, _ := strings.Cut(o, "=")
		if k == key {
			return v, true
		}
	}
	return "", false
}

// Mounts reads proc/mounts under the root. A root without it has no
// mounts (nil, nil); a line that is not six fields is skipped with an
// error naming the file and line.
func Mounts(root *rootfs.Root) ([]Mount, []error) {
	b, err := root.ReadFile(ProcMounts, maxMounts)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("read %s: %w", root.Path(ProcMounts), err)}
	}
	return ParseMounts(string(b), root.Path(ProcMounts))
}

// ParseMounts parses the mount table format (fstab(5) fields, with space,
// tab, newline and backslash escaped as \040 \011 \012 \134 by the
// kernel's mangle()). file names the source in errors.
func ParseMounts(s, file string) ([]Mount, []error) {
	var (
		out  []Mount
		errs []error
	)
	n := 0
	for line := range strings.Lines(s) {
		n++
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 6 {
			errs = append(errs, fmt.Errorf("%s:%d: %d fields, want 6", file, n, len(f)))
			continue
		}
		m := Mount{Source: unescape(f[0]), Target: unescape(f[1]), FSType: unescape(f[2])}
		for _, o := range strings.Split(f[3], ",") {
			if o != "" {
				m.Options = append(m.Options, unescape(o))
			}
		}
		out = append(out, m)
	}
	return out, errs
}

// unescape undoes the kernel's octal escapes (\ooo); anything else is
// kept as written.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 || s[0] > '3' {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
