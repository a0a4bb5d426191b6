package clip

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 80, "short"},
		{"abcdef", 3, "abc"},
		{"ab€cd", 3, "ab"},  // € is 3 bytes: not split
		{"ab€cd", 5, "ab€"}, //
		{"\xff" + strings.Repeat("a", 100), 80, "\xff" + strings.Repeat("a", 79)}, // invalid byte kept, not everything dropped
		{"a\x80\x80\x80\x80\x80b", 4, "a\x80\x80\x80"},                            // stray continuation bytes: cut at n
		{"x", 0, ""},
	} {
		if got := Bytes(tc.in, tc.n); got != tc.want {
			t.Errorf("Bytes(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if got := Bytes(tc.in, tc.n); len(got) > max(tc.n, 0) {
			t.Errorf("Bytes(%q, %d) is %d bytes", tc.in, tc.n, len(got))
		}
	}
	// Valid input stays valid, for every cut.
	s := "gpuaffinity: GPU 3 verlor NVLink 5 — ÄÖÜ 日本語 ✓"
	for n := range len(s) + 1 {
		if got := Bytes(s, n); !utf8.ValidString(got) || !strings.HasPrefix(s, got) || len(s[len(got):]) > 0 && n-len(got) >= utf8.UTFMax {
			t.Errorf("Bytes(s, %d) = %q", n, got)
		}
	}
}

// TestOneOwner fails when a second rune-boundary truncation appears in
// the product code (gres and health once had one each, and they
// disagreed on invalid UTF-8).
func TestOneOwner(t *testing.T) {
	srcfiles.Product(t, "../..", func(p, text string) {
		for _, sig := range []string{"func truncate(s string, n int) string", "func Truncate(s string, n int) string"} {
			if strings.Contains(text, sig) {
				t.Errorf("%s has its own %q: use clip.Bytes", p, sig)
			}
		}
	}, "internal/clip/clip.go")
}
