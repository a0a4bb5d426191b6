package rootfs

import (
	"regexp"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// liveTells are the shapes a second "is this the live root" rule takes:
// its own predicate, a root or directory compared with "/", and "" made
// "/" by hand. Four packages once had one each, and discover.IsLive("")
// was false while Open("").Live() was true.
var liveTells = []*regexp.Regexp{
	regexp.MustCompile(`func (?:IsLive|isLive)\(`),
	regexp.MustCompile(`(?i)(?:root|dir)\)?\s*==\s*"/"`),
	regexp.MustCompile(`(?i)(?:root|dir)\s*==\s*""\s*\{\s*\n\s*[\w.]+\s*=\s*"/"`),
}

// TestLiveOwned fails when product code outside this package decides
// again what the live root is or what "" means: it calls IsLive, Clean
// or Root.Live instead.
func TestLiveOwned(t *testing.T) {
	// deploy/internal/ociimage is release tooling: its root is the
	// image's build tree, where "" and "/" mean the build host's files,
	// not a node being read.
	srcfiles.Product(t, "../..", func(p, text string) {
		b := []byte(text)
		for _, re := range liveTells {
			if m := re.Find(b); m != nil {
				t.Errorf("%s decides the live root itself (%q): use rootfs.IsLive or rootfs.Clean", p, m)
			}
		}
	}, "internal/rootfs", "deploy/internal/ociimage")
}

// TestClean: "" is the live root, as Open takes it.
func TestClean(t *testing.T) {
	for _, tc := range []struct {
		dir, want string
		live      bool
	}{
		{"", "/", true},
		{"/", "/", true},
		{"//", "/", true},
		{"/./", "/", true},
		{"/tmp/x/", "/tmp/x", false},
		{".", ".", false},
	} {
		if got := Clean(tc.dir); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.dir, got, tc.want)
		}
		if got := IsLive(tc.dir); got != tc.live {
			t.Errorf("IsLive(%q) = %v, want %v", tc.dir, got, tc.live)
		}
	}
	r, err := Open("")
	if err != nil || !r.Live() || r.Dir() != "/" {
		t.Errorf(`Open("") = %v live %v, %v`, r.Dir(), r.Live(), err)
	}
}
