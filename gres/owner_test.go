package gres

import (
	"regexp"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// whyDecision is a caller deciding on NodeAction.Why's prose (check once
// chose its stderr line with strings.Contains(act.Why, "someone else")).
var whyDecision = regexp.MustCompile(`strings\.(?:Contains|HasPrefix|HasSuffix|Index|EqualFold)\([\w.]*\.Why\b|\.Why\s*[!=]=`)

// TestNodeActionTyped fails when code outside gres decides on the text
// of a NodeAction's Why instead of its typed fields (Args, Foreign).
func TestNodeActionTyped(t *testing.T) {
	srcfiles.Product(t, "..", func(p, text string) {
		b := []byte(text)
		if m := whyDecision.Find(b); m != nil {
			t.Errorf("%s decides on NodeAction.Why's text (%q): use its typed fields", p, m)
		}
	}, "gres")
}
