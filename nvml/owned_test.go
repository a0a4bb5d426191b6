package nvml

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReturnNamesOwned fails when NVML's return names are spelt out a
// second time outside this package (health once kept its own table of
// 32): every report must name a return through ReturnName. It looks for
// a name only a whole table holds.
func TestReturnNamesOwned(t *testing.T) {
	const marker = `"ERROR_INSUFFICIENT_POWER"`
	if ReturnName(8) != "ERROR_INSUFFICIENT_POWER" || ReturnName(0) != "SUCCESS" || ReturnName(4242) != "RETURN_4242" {
		t.Fatalf("ReturnName: %q %q %q", ReturnName(8), ReturnName(0), ReturnName(4242))
	}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "nvml" || strings.HasPrefix(d.Name(), ".")) && p != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), marker) {
			t.Errorf("%s spells out NVML's return names: use nvml.ReturnName", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
