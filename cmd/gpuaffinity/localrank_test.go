package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/launch"
)

// TestLocalRankVarsOnce holds every command's words about where the local
// rank comes from to launch.LocalRankVars, the one list launch and env read:
// a help text, flag or prose that names another list (a sixth variable in
// one place only) fails here.
func TestLocalRankVarsOnce(t *testing.T) {
	known := regexp.MustCompile(`\b(LOCAL_RANK|SLURM_LOCALID|OMPI_COMM_WORLD_LOCAL_RANK|MPI_LOCALRANKID|PMI_LOCAL_RANK|[A-Z_]*LOCAL_?RANK[A-Z_]*|[A-Z_]*LOCALID)\b`)
	root := newRootCmd()
	for _, name := range []string{"env", "exec"} {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name {
			continue // exec is left out of some builds
		}
		texts := []string{c.Long, c.Flags().Lookup("local-rank").Usage}
		for _, text := range texts {
			got := known.FindAllString(strings.ReplaceAll(text, "\n", " "), -1)
			// One name ("$LOCAL_RANK" in an example) is a use, not the
			// list.
			if len(got) <= 1 {
				continue
			}
			if strings.Join(got, ",") != strings.Join(launch.LocalRankVars, ",") {
				t.Errorf("%s names the local-rank variables %v, launch.LocalRankVars is %v", name, got, launch.LocalRankVars)
			}
		}
	}
}
