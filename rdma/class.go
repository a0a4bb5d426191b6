package rdma

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// readClass lists <root>/sys/class/<class> and reads each entry with
// read, which returns nil for an entry that is not a device or vanished.
// A missing class directory means no such devices: no error. The result
// is in name order (rootfs.Root.ReadDir sorts).
func readClass[T any](root *rootfs.Root, class, what string, read func(root *rootfs.Root, classDir, name string) (*T, []error)) (out []T, errs []error) {
	dir := path.Join("sys/class", class)
	entries, err := root.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("list %s: %w", what, err)}
	}
	for _, e := range entries {
		v, verrs := read(root, dir, e.Name())
		errs = append(errs, verrs...)
		if v != nil {
			out = append(out, *v)
		}
	}
	return out, errs
}
