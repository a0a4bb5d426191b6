package main

import (
	"io"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/fakesys"
)

// BenchmarkEnv measures `gpuaffinity env --local-rank 3` in-process:
// on a DGX H100 root built once (discovery + rendering: the path a live
// host takes), and with --demo (which also builds the fake root each
// time, thousands of small files).
func BenchmarkEnv(b *testing.B) {
	root := fakesys.Root(b, "dgx-h100")
	for _, bc := range []struct {
		name string
		args []string
	}{
		{"root-dgx-h100", []string{"env", "--root", root, "--local-rank", "3"}},
		{"demo-dgx-h100", []string{"env", "--demo", "dgx-h100", "--local-rank", "3"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				cmd := newRootCmd()
				cmd.SetOut(io.Discard)
				cmd.SetErr(io.Discard)
				cmd.SetArgs(bc.args)
				if err := cmd.Execute(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
