// Package srcfiles walks the repository's product Go files for the
// owner tests: a fact decided in one package has a test there that looks
// for the tell-tale of a second implementation anywhere else (issue 33,
// "one owner per fact"), and every such test reads the same files.
package srcfiles

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// Product calls f with the path (relative to the repository root,
// slash-separated) and text of every non-test Go file of the repository,
// both modules, but those under testdata or hidden directories and those
// under a path in skip (a directory skips its whole tree, a file itself;
// repository-relative, slash-separated: the owner's own package, and
// exemptions each test says why it makes). root is the repository root
// as seen from the test's directory ("..", "../.."). It fails the test
// when the tree cannot be read or when it holds no Go file.
func Product(tb testing.TB, root string, f func(rel, text string), skip ...string) {
	tb.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || skipped(rel, skip)) {
				return filepath.SkipDir
			}
			return nil
		}
		if path.Ext(rel) != ".go" || strings.HasSuffix(rel, "_test.go") || skipped(rel, skip) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		f(rel, string(b))
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if n == 0 {
		tb.Fatalf("srcfiles: no Go file under %s", root)
	}
}

func skipped(rel string, skip []string) bool {
	for _, s := range skip {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return true
		}
	}
	return false
}
