package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// Set by the Makefile: -ldflags "-X main.version=... -X main.revision=...".
var (
	version  = "dev"
	revision = "unknown"
)

// versionLine is what version and --version print.
func versionLine() string {
	return fmt.Sprintf("gpuaffinity %s (revision %s, %s %s/%s)\n",
		version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version, revision and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}
