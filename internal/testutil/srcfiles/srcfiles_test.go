package srcfiles

import (
	"slices"
	"strings"
	"testing"
)

func TestProduct(t *testing.T) {
	var got []string
	Product(t, "../../..", func(rel, text string) {
		if text == "" {
			t.Errorf("%s: empty", rel)
		}
		got = append(got, rel)
	}, "topology", "internal/testutil/srcfiles/srcfiles.go")
	for _, want := range []string{"pci/address.go", "deploy/internal/ociimage/image.go", "internal/rootfs/rootfs.go"} {
		if !slices.Contains(got, want) {
			t.Errorf("Product did not read %s", want)
		}
	}
	for _, p := range got {
		if strings.HasPrefix(p, "topology/") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata/") ||
			p == "internal/testutil/srcfiles/srcfiles.go" {
			t.Errorf("Product read %s, which it should skip", p)
		}
	}
}
