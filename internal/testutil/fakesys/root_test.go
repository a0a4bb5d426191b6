package fakesys

import "testing"

// machineRoot builds machine name into tb.TempDir() and returns that root.
// It is fakesystest.Root, which this package's own tests cannot import
// (fakesystest imports fakesys).
func machineRoot(tb testing.TB, name string) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := BuildMachine(name, dir); err != nil {
		tb.Fatalf("fakesys: build %s: %v", name, err)
	}
	return dir
}
