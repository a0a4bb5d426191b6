package k8slabel

import (
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// Value's hash: an invalid value becomes topograph's hash form with it,
// "" without; a valid one is itself either way. (fleet's TestLabelValue
// checks the hashes against hand-computed FNV-64a values.)
func TestValue(t *testing.T) {
	valid63 := strings.Repeat("a", 62) + "z"
	for _, v := range []string{"a", valid63, "rack-12.row_3.A", "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"} {
		for _, hash := range []bool{false, true} {
			if got, ok := Value(v, hash); got != v || !ok {
				t.Errorf("Value(%q, %v) = %q, %v, want it back, true", v, hash, got, ok)
			}
		}
	}
	for _, v := range []string{"", ".", "a.", "_a", "-x", "bad_", "a b", "a\n", "a/b", "é", "a\x00", valid63 + "a", "x\ngpuaffinity.io/healthy=true"} {
		if got, ok := Value(v, false); got != "" || ok {
			t.Errorf("Value(%q, false) = %q, %v, want \"\", false", v, got, ok)
		}
		got, ok := Value(v, true)
		if ok || !strings.HasPrefix(got, "x") || len(got) > MaxValue {
			t.Errorf("Value(%q, true) = %q, %v, want a hash, false", v, got, ok)
		}
		if again, _ := Value(got, false); again != got {
			t.Errorf("Value(%q, true) = %q, which is no label value", v, got)
		}
	}
}

// TestOneOwner fails when a second label value rule appears in the
// product code: health (the NFD file's clique) and fleet (the node
// labels) once had one each. The tell-tales are the character class of a
// label value's middle and topograph's hash form.
func TestOneOwner(t *testing.T) {
	tells := []string{"[-A-Za-z0-9_.]", `Sprintf("x%x"`}
	srcfiles.Product(t, "../..", func(p, text string) {
		for _, tell := range tells {
			if strings.Contains(text, tell) {
				t.Errorf("%s has its own label value rule (%q): use k8slabel.Value", p, tell)
			}
		}
	}, "internal/k8slabel/k8slabel.go")
}
