package cloudname

import (
	"regexp"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// TestOneDeclaration fails when a cloud name is spelt out again in the
// product code, declared (platform and topology once each declared all
// six) or compared against (fleet once matched "gcp" and "oci" by hand):
// platform's and topology's constants are this package's.
func TestOneDeclaration(t *testing.T) {
	tell := regexp.MustCompile(`(\bcase\s+|[=!]=\s*|[^=!<>:]=\s*)"(aws|azure|gcp|oci|baremetal)"|(Unknown|Cloud)\s*(Cloud\s*)?=\s*"unknown"`)
	srcfiles.Product(t, "../..", func(p, text string) {
		if m := tell.FindString(text); m != "" {
			t.Errorf("%s spells out a cloud name (%q): use platform's or topology's constants, which are internal/cloudname's", p, m)
		}
	}, "internal/cloudname/cloudname.go")
}
