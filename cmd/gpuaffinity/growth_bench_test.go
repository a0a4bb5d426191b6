package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/launch"
)

// BenchmarkEnvGrowth measures `env --local-rank 0 --root ROOT --state-dir
// DIR` in-process, the node taken from an agent's state directory, on
// the size steps of growthMachines (the machines of
// discover.BenchmarkDiscoverGrowth). Each root is built on disk and the
// agent run on it once, outside the timer. Besides ns/op it reports the
// device count and ns/device (ns/op divided by GPU functions + NIC
// physical functions + SR-IOV VFs). docs/bench.md, "Cost growth", has
// the figures.
func BenchmarkEnvGrowth(b *testing.B) {
	for _, name := range append(slices.Clone(launch.LocalRankVars), "CUDA_VISIBLE_DEVICES", "GPUAFFINITY_ROOT", "GPUAFFINITY_STATE_DIR") {
		b.Setenv(name, "")
		os.Unsetenv(name)
	}
	for _, m := range fakesystest.GrowthMachines(b) {
		b.Run(m.Name, func(b *testing.B) {
			root := b.TempDir()
			if err := fakesys.Build(m.Spec, root); err != nil {
				b.Fatal(err)
			}
			state := writeAgentState(b, root)
			args := []string{"env", "--local-rank", "0", "--root", root, "--state-dir", state}
			// The node must come from the state directory: under a root
			// with nothing but the process status, env gives the same
			// answer only when it does not discover.
			want, err := growthEnv(args)
			if err != nil {
				b.Fatal(err)
			}
			bare := b.TempDir()
			status, err := os.ReadFile(filepath.Join(root, "proc/self/status"))
			if err != nil {
				b.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(bare, "proc/self"), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bare, "proc/self/status"), status, 0o644); err != nil {
				b.Fatal(err)
			}
			if got, err := growthEnv([]string{"env", "--local-rank", "0", "--root", bare, "--state-dir", state}); err != nil || got != want {
				b.Fatalf("env did not take the node from the state directory: %v\n%s\nwant\n%s", err, got, want)
			}
			b.ReportAllocs()
			for b.Loop() {
				cmd := newRootCmd()
				cmd.SetOut(io.Discard)
				cmd.SetErr(io.Discard)
				cmd.SetArgs(args)
				if err := cmd.Execute(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(m.Devices()), "devices")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(m.Devices()), "ns/device")
		})
	}
}

// growthEnv runs the CLI with args and returns its stdout.
func growthEnv(args []string) (string, error) {
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}
