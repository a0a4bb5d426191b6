package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/snapshot"
)

func newSnapshotCmd(g *globals) *cobra.Command {
	var out string
	var scrub bool
	cmd := &cobra.Command{
		Use:   "snapshot -o DIR|FILE.tar.gz",
		Short: "Capture the files discovery reads, and NVML's answers, for --root",
		Long: `snapshot writes the sysfs and procfs files discovery reads (links kept as
links) and NVML's answers as nvml.json into a directory or a .tar.gz, so that
gpuaffinity --root <snapshot> reproduces this node's topology anywhere.
--scrub replaces MAC addresses, GUIDs, UUIDs and the hostname with stable
fakes. See docs/snapshot.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("-o DIR or -o FILE.tar.gz is required")
			}
			lib, source, err := nvml.Open(g.root)
			if err != nil {
				return err
			}
			g.log.Info("snapshot", "root", g.root, "nvml", source)
			opts := snapshot.Options{Root: g.root, Scrub: scrub, NVML: lib}
			var rep snapshot.Report
			// Both refuse to write through a link planted at out or into a
			// directory another user could race in (docs/snapshot.md).
			if strings.HasSuffix(out, ".tar.gz") || strings.HasSuffix(out, ".tgz") {
				rep, err = snapshot.WriteTarGzFile(opts, out)
			} else {
				rep, err = snapshot.WriteDir(opts, out)
			}
			if err != nil {
				return err
			}
			for _, w := range rep.Warnings {
				g.log.Warn("snapshot", "warning", w)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "snapshot: %s\n", rep)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "output directory, or a file ending in .tar.gz")
	cmd.Flags().BoolVar(&scrub, "scrub", false, "replace MACs, GUIDs, UUIDs and hostnames with stable fakes")
	return cmd
}
