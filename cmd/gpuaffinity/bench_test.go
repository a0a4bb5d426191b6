package main

import (
	"io"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// BenchmarkCommands measures env, cpumap and exec's planning in-process:
// on a DGX H100 root built once (discovery + rendering: the path a live
// host takes), and with --demo (which also builds the fake root each
// time, thousands of small files).
func BenchmarkCommands(b *testing.B) {
	root := fakesystest.Root(b, "dgx-h100")
	for _, bc := range []struct {
		name string
		args []string
	}{
		{"env-root-dgx-h100", []string{"env", "--root", root, "--local-rank", "3"}},
		{"env-demo-dgx-h100", []string{"env", "--demo", "dgx-h100", "--local-rank", "3"}},
		// cpumap: discovery plus the map of every rank.
		{"cpumap-root-dgx-h100", []string{"cpumap", "-o", "json", "--root", root}},
		{"cpumap-demo-dgx-h100", []string{"cpumap", "-o", "json", "--demo", "dgx-h100"}},
		// exec's work before execve: discovery, env, map, plan (the
		// syscalls themselves are microseconds).
		{"exec-plan-root-dgx-h100", []string{"exec", "--dry-run", "--root", root, "--local-rank", "3", "--", "true"}},
		// check: every check on the 8-GPU node (no counter interval).
		{"check-root-dgx-h100", []string{"check", "--root", root, "--interval", "0"}},
	} {
		benchCommand(b, bc.name, bc.args)
	}
}

// benchCommand benchmarks the CLI run in-process with args (output
// discarded) as the sub-benchmark name.
func benchCommand(b *testing.B, name string, args []string) {
	b.Run(name, func(b *testing.B) {
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
	})
}
