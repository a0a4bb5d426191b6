// Package rootfstest opens a root for a test and closes it when the test
// ends.
package rootfstest

import (
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// Open opens dir as a root, failing the test when it cannot.
func Open(t testing.TB, dir string) *rootfs.Root {
	t.Helper()
	r, err := rootfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
