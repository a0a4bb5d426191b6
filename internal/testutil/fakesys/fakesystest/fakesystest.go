// Package fakesystest holds the test helpers of package fakesys. It
// imports "testing", so only _test.go files import it: fakesys itself is
// linked into the binary for `gpuaffinity topo --demo`.
package fakesystest

import (
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
)

// Root builds machine name (any of fakesys.Machines()) into tb.TempDir()
// and returns that root. It fails the test if the build fails.
func Root(tb testing.TB, name string) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := fakesys.BuildMachine(name, dir); err != nil {
		tb.Fatalf("fakesys: build %s: %v", name, err)
	}
	return dir
}
