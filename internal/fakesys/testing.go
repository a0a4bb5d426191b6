package fakesys

import "testing"

// Root builds machine name (any of Machines()) into tb.TempDir() and
// returns that root. It fails the test if the build fails.
func Root(tb testing.TB, name string) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := BuildMachine(name, dir); err != nil {
		tb.Fatalf("fakesys: build %s: %v", name, err)
	}
	return dir
}
