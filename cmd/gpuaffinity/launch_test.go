package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// env and cpumap print the same from the agent's compact launch.node as
// from its topology.json, on every example machine: the parts the launch
// view leaves out (PCI functions, path matrices, NVLinks) are read by
// none of them. launch.node is at most half of topology.json.
func TestLaunchViewSameOutput(t *testing.T) {
	for _, name := range fakesys.Machines() {
		t.Run(name, func(t *testing.T) {
			root := fakesystest.Root(t, name)
			full := writeAgentState(t, root)
			// A root with nothing to discover: the answers can come only
			// from the state files.
			bare := bareRoot(t, root)
			launch, err := os.Stat(filepath.Join(full, cache.LaunchFile))
			if err != nil {
				t.Fatal(err)
			}
			topo, err := os.Stat(filepath.Join(full, cache.TopologyFile))
			if err != nil {
				t.Fatal(err)
			}
			if launch.Size()*2 > topo.Size() {
				t.Errorf("launch.node is %d bytes, topology.json %d", launch.Size(), topo.Size())
			}
			// The same state without launch.node: the commands read
			// topology.json, as with an agent from before it.
			old := t.TempDir()
			for _, f := range []string{cache.TopologyFile, cache.NCCLTopoFile, cache.EnvFile} {
				if b, err := os.ReadFile(filepath.Join(full, f)); err == nil {
					if err := os.WriteFile(filepath.Join(old, f), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			cmds := [][]string{{"cpumap"}, {"cpumap", "-o", "json"}, {"env", "-o", "json", "--all-ranks"},
				{"env", "--ranks-per-gpu", "2", "--local-rank", "3"}}
			for r := range 8 {
				cmds = append(cmds, []string{"env", "--local-rank", strconv.Itoa(r)})
			}
			for _, args := range cmds {
				a := append(slices.Clone(args), "--root", bare, "--state-dir", full)
				b := append(slices.Clone(args), "--root", bare, "--state-dir", old)
				outA, errA, eA := runErr(t, a...)
				outB, errB, eB := runErr(t, b...)
				outB, errB = strings.ReplaceAll(outB, old, full), strings.ReplaceAll(errB, old, full)
				if outA != outB || errA != errB || (eA == nil) != (eB == nil) {
					t.Errorf("%v: from launch.node:\n%s%s%v\nfrom topology.json:\n%s%s%v", args, outA, errA, eA, outB, errB, eB)
				}
			}
		})
	}
}
