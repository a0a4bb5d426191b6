// Package testenv holds what the tests of this module share about the
// environment they run in. Only _test.go files import it.
package testenv

import (
	"os"
	"strings"
)

// InCI reports whether the tests run in CI, where a tool or privilege a
// test needs (hwloc, Graphviz, Prometheus, slurmd, root, ...) must be
// there: a test that would skip without it fails instead.
//
// CI systems set the environment variable CI, to "true" (GitHub Actions,
// GitLab, CircleCI, ...) or "1" (others). Any non-empty value counts
// except "0" and "false" (any case), so CI=1 and CI=true run the same
// tests and CI=false runs the same ones as no CI at all.
func InCI() bool {
	return ciValue(os.Getenv("CI"))
}

func ciValue(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}
