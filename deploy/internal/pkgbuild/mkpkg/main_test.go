package main

import (
	"strings"
	"testing"
)

// run takes make package's three binaries and no other set: each case
// is refused by its own check (main.go's messages), before any file is
// read, so none need exist.
func TestRunRefusesBinaries(t *testing.T) {
	for _, tc := range []struct {
		bins []string
		want string
	}{
		{[]string{"bin/gpuaffinity", "bin/gpuaffinity-agent"}, "want the three binaries"},
		{[]string{"bin/gpuaffinity", "bin/gpuaffinity-agent", "bin/gpuaffinity-agent"}, "want the three binaries"},
		{[]string{"bin/gpuaffinity", "bin/gpuaffinity-agent", "bin/gpuaffinity-fleet", "bin/gpuaffinity-fleet"}, "want the three binaries"},
		{[]string{"bin/gpuaffinity", "bin/gpuaffinity-agent", "bin/gpuaffinity-tools"}, "bin/gpuaffinity-tools: want bin/gpuaffinity, bin/gpuaffinity-agent and bin/gpuaffinity-fleet"},
	} {
		err := run("v1.2.0", t.TempDir(), ".", "", tc.bins)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q): %v, want an error saying %q", tc.bins, err, tc.want)
		}
	}
	// The three, named right, get past these checks to the build, which
	// fails on the first missing file.
	err := run("v1.2.0", t.TempDir(), ".", "", []string{"bin/gpuaffinity", "bin/gpuaffinity-agent", "bin/gpuaffinity-fleet"})
	if err == nil || !strings.Contains(err.Error(), "bin/gpuaffinity: no such file") {
		t.Errorf("run(three missing binaries): %v, want pkgbuild's error for bin/gpuaffinity", err)
	}
}
