//go:build linux

package rdma

import "github.com/gpuaffinity/gpuaffinity/internal/sysattr"

// readAttr reads one sysfs attribute the way every file under the root is
// read (sysattr.ReadFileLimit): open non-blocking, one read, close, as
// procfs's SysReadFile does (a third of os.ReadFile's system calls, which
// is most of a scrape's cost on a node with many ports); an empty answer
// or one that fills the buffer must come from a regular file, so a FIFO
// or /dev/zero planted in a port's directory is refused, never read on.
func readAttr(name string) ([]byte, error) {
	return sysattr.ReadFileLimit(name, sysattr.MaxSize)
}
