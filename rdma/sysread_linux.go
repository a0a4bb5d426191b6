//go:build linux

package rdma

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// readAttr reads one sysfs attribute with open, a single read and close,
// as procfs's SysReadFile does: a third of os.ReadFile's system calls
// (no fstat, no poller registration, no read to EOF), which is most of a
// scrape's cost on a node with many ports. An attribute that fills the
// buffer (none of the counters do) is read again whole with os.ReadFile.
func readAttr(name string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer syscall.Close(fd)
	var buf [256]byte
	var n int
	for {
		n, err = syscall.Read(fd, buf[:])
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if n == len(buf) {
		return os.ReadFile(name)
	}
	return append([]byte(nil), buf[:n]...), nil
}
