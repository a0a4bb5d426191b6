package gres

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// whyDecision is a caller deciding on NodeAction.Why's prose (check once
// chose its stderr line with strings.Contains(act.Why, "someone else")).
var whyDecision = regexp.MustCompile(`strings\.(?:Contains|HasPrefix|HasSuffix|Index|EqualFold)\([\w.]*\.Why\b|\.Why\s*[!=]=`)

// TestNodeActionTyped fails when code outside gres decides on the text
// of a NodeAction's Why instead of its typed fields (Args, Foreign).
func TestNodeActionTyped(t *testing.T) {
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != ".." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || p == filepath.Join("..", "gres")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if m := whyDecision.Find(b); m != nil {
			t.Errorf("%s decides on NodeAction.Why's text (%q): use its typed fields", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
