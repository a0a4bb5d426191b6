package health

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/rdma"
)

// Reader reads what a check needs from the node that changes between two
// reads and so cannot come from discovery: RDMA port counters (nic.errors)
// and the kernel log (gpu.xid). Everything else a check looks at is in
// the topology.Node it is given. Tests replace it; NewReader is the
// Reader of a root.
type Reader interface {
	// PortCounters reads the named counters of one RDMA port (the files
	// of its counters/ directory). A counter the port does not have is
	// left out of the map; an error means the port's counters could not
	// be read (errors.Is(err, fs.ErrNotExist) when it has none).
	PortCounters(dev string, port int, names []string) (map[string]uint64, error)
	// KernelLog returns every record of the kernel log, in /dev/kmsg or
	// dmesg format, without blocking. An error that is
	// errors.Is(err, fs.ErrNotExist) means there is no kernel log.
	KernelLog(ctx context.Context) ([]byte, error)
}

// NewReader returns the Reader of a root: port counters read by counters
// (its bounded reads and memory of EINVAL files; a new
// rdma.CounterReader of root when nil), the kernel log read from kmsg
// with ReadKmsg. kmsg "" means /dev/kmsg on the live root, and on another
// root its dev/kmsg read as the root's other files are (a regular file
// inside the root, at most maxKernelLog bytes: a fixture's log, never the
// host's through a link).
//
// The agent passes the exporter's own rdma.CounterReader, so check-time
// and scrape-time counter reads share one reader.
func NewReader(root, kmsg string, counters *rdma.CounterReader) Reader {
	root = rootfs.Clean(root)
	if counters == nil {
		counters = &rdma.CounterReader{Root: root}
	}
	if kmsg == "" && rootfs.IsLive(root) {
		kmsg = "/dev/kmsg"
	}
	return rootReader{counters, root, kmsg}
}

// maxKernelLog bounds a fixture's dev/kmsg.
const maxKernelLog = 16 << 20

type rootReader struct {
	*rdma.CounterReader
	root, kmsg string
}

func (r rootReader) KernelLog(ctx context.Context) ([]byte, error) {
	if r.kmsg != "" {
		return ReadKmsg(ctx, r.kmsg)
	}
	fsys, err := rootfs.Open(r.root)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &pathError{filepath.Join(r.root, "dev/kmsg"), err}
	}
	defer fsys.Close()
	b, err := fsys.ReadFile("dev/kmsg", maxKernelLog)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n') // as ReadKmsg: records end in a newline
	}
	return b, err
}

// ReadKmsg reads every record in a kernel log without blocking: it opens
// path O_RDONLY|O_NONBLOCK and reads until EAGAIN (the live /dev/kmsg,
// one record per read) or end of file (a fixture). EPIPE (records
// overwritten while reading) is skipped. The os package is not used: it
// would park a nonblocking character device in the poller and wait.
// Errors name the file.
func ReadKmsg(ctx context.Context, path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &pathError{path, err}
	}
	defer syscall.Close(fd)
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		n, err := syscall.Read(fd, buf)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			return out, nil
		case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return out, &pathError{path, err}
		case n == 0:
			return out, nil
		}
		out = append(out, buf[:n]...)
		if len(out) > 0 && out[len(out)-1] != '\n' && n < len(buf) {
			// /dev/kmsg records end in a newline; keep records apart anyway.
			out = append(out, '\n')
		}
	}
}

type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }
