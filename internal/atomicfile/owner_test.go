package atomicfile

import (
	"regexp"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// trustTells are the shapes a second directory-trust rule or a second
// temp-and-rename write takes: a check of the group/others write bits or
// of the sticky bit, a file's owner compared with ours, and a file made
// with os.CreateTemp and renamed into place. The agent once had its own
// trust rule (agent/cache) and its own temp-and-rename (agent/state.go).
var trustTells = []struct {
	what string
	re   []*regexp.Regexp // all must match the file
}{
	{"a write-permission rule", []*regexp.Regexp{regexp.MustCompile(`(?i)perm\(?\)?\s*&\s*0o0?[02]2\b`)}},
	{"a sticky-bit rule", []*regexp.Regexp{regexp.MustCompile(`&\s*(?:fs|os)\.ModeSticky`)}},
	{"an ownership rule", []*regexp.Regexp{regexp.MustCompile(`\bUid\b[^\n]*Geteuid\(\)|Geteuid\(\)[^\n]*\bUid\b`)}},
	{"a temp-and-rename write", []*regexp.Regexp{regexp.MustCompile(`\bCreateTemp\(`), regexp.MustCompile(`\bRename\(`)}},
}

// trustExempt are the files allowed one tell, and why.
var trustExempt = map[string]string{
	// snapshot writes a directory file by file (no rename), so it needs
	// the directory to be ours alone, root's not being enough; its
	// errors name the snapshot directory (errUnsafeOutput).
	"snapshot/write.go": "an ownership rule",
}

// TestTrustOwned fails when product code outside this package decides
// again which directory it may trust or write into, or writes a file
// with its own temporary file and rename.
func TestTrustOwned(t *testing.T) {
	// deploy/internal/ociimage is release tooling: it builds the image's
	// file tree (its modes, /tmp's sticky bit) and writes the tarball on
	// the build host, not on a node.
	srcfiles.Product(t, "../..", func(rel, text string) {
		b := []byte(text)
	tells:
		for _, tell := range trustTells {
			for _, re := range tell.re {
				if !re.Match(b) {
					continue tells
				}
			}
			if trustExempt[rel] == tell.what {
				continue
			}
			t.Errorf("%s has %s of its own: use atomicfile (CheckDir, CheckFile, Write, WriteFiles)", rel, tell.what)
		}
	}, "internal/atomicfile", "deploy/internal/ociimage")
}
