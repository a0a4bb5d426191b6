package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
)

// Fixture roots are built once per test binary and shared read-only by
// the tests that do not change them (file creation dominates test time).
var (
	rootsDir string
	roots    sync.Map // name -> func() (string, error)
)

func TestMain(m *testing.M) {
	var err error
	if rootsDir, err = os.MkdirTemp("", "discover-roots-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(rootsDir)
	os.Exit(code)
}

// sharedRoot returns the built root of a fixture machine; callers must
// not modify it (use fakesystest.Root for a private copy).
func sharedRoot(t testing.TB, name string) string {
	t.Helper()
	f, _ := roots.LoadOrStore(name, sync.OnceValues(func() (string, error) {
		dir := filepath.Join(rootsDir, name)
		return dir, fakesys.BuildMachine(name, dir)
	}))
	dir, err := f.(func() (string, error))()
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return dir
}
