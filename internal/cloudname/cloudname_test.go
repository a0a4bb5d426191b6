package cloudname

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOneDeclaration fails when a cloud name is spelt out again in the
// product code, declared (platform and topology once each declared all
// six) or compared against (fleet once matched "gcp" and "oci" by hand):
// platform's and topology's constants are this package's.
func TestOneDeclaration(t *testing.T) {
	tell := regexp.MustCompile(`(\bcase\s+|[=!]=\s*|[^=!<>:]=\s*)"(aws|azure|gcp|oci|baremetal)"|(Unknown|Cloud)\s*(Cloud\s*)?=\s*"unknown"`)
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "../.." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.HasSuffix(filepath.ToSlash(p), "internal/cloudname/cloudname.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if m := tell.FindString(string(b)); m != "" {
			t.Errorf("%s spells out a cloud name (%q): use platform's or topology's constants, which are internal/cloudname's", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
