package main

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

// TestBinaryLinksNoFixtures: each build of the binary (full, launch path
// omit_agent, agent alone agent_only) links no test tooling (internal/testutil/..., the
// fixture builder among it) and embeds no file of the hand-written test
// expectations or specs: --demo machines come from internal/demo's
// prebuilt images only.
func TestBinaryLinksNoFixtures(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("go is not on PATH: %v", err)
		}
		t.Skipf("go is not on PATH, cannot list the binary's packages: %v", err)
	}
	const mod = "github.com/gpuaffinity/gpuaffinity/"
	for _, tags := range []string{"", "omit_agent", "agent_only"} {
		out, err := exec.Command(goTool, "list", "-deps", "-tags="+tags,
			"-f", `{{.ImportPath}} {{join .EmbedFiles ","}}`, ".").Output()
		if err != nil {
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			t.Fatalf("go list -deps -tags=%q: %v", tags, err)
		}
		var demo bool
		for line := range strings.Lines(string(out)) {
			pkg, embeds, _ := strings.Cut(strings.TrimSpace(line), " ")
			if pkg == mod+"internal/demo" {
				demo = true
			}
			if strings.HasPrefix(pkg, mod+"internal/testutil/") || strings.HasSuffix(pkg, "/fakesys") {
				t.Errorf("tags %q: the binary links test tooling %s", tags, pkg)
			}
			for _, f := range strings.Split(embeds, ",") {
				if strings.Contains(f, "machines-expect/") || strings.Contains(f, "testdata/machines/") {
					t.Errorf("tags %q: %s embeds the test fixture %s", tags, pkg, f)
				}
			}
		}
		if !demo {
			// The check would pass on a list that is not the binary's.
			t.Errorf("tags %q: internal/demo is not among the binary's packages:\n%s", tags, out)
		}
	}
}
