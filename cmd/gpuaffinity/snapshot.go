//go:build !agent_only

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/internal/demo"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/snapshot"
)

func newSnapshotCmd(g *globals) *cobra.Command {
	var out string
	var scrub bool
	var machine string
	cmd := &cobra.Command{
		Use:   "snapshot -f DIR|FILE.tar.gz [--demo NAME]",
		Short: "Capture the files discovery reads, and NVML's answers, for --root",
		Long: `snapshot writes the sysfs and procfs files discovery reads (links kept as
links) and NVML's answers as nvml.json into a directory or a .tar.gz, so that
gpuaffinity --root <snapshot> reproduces this node's topology anywhere.
--scrub replaces MAC addresses, GUIDs, UUIDs and the hostname with stable
fakes. With --demo NAME it writes an embedded example machine instead, so
that other tools (lstopo with HWLOC_FSROOT, node_exporter --path.sysfs) can
read the same machine. See docs/snapshot.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("-f DIR or -f FILE.tar.gz is required")
			}
			root := g.root
			if machine != "" {
				if machine == "list" {
					_, err := fmt.Fprintln(cmd.OutOrStdout(), strings.Join(demo.Machines(), "\n"))
					return err
				}
				if cmd.Flags().Changed("root") || os.Getenv("GPUAFFINITY_ROOT") != "" {
					return fmt.Errorf("--demo and --root exclude each other")
				}
				if !isTarGz(out) {
					// The example machine's root as it is, nvml.json
					// included, for other tools (lstopo, node_exporter)
					// to read.
					if err := writeDemo(machine, out); err != nil {
						return err
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "snapshot: example machine %s written to %s\n", machine, out)
					return nil
				}
				dir, err := os.MkdirTemp(demoTempDir(), "gpuaffinity-demo-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if err := demo.Write(machine, dir); err != nil {
					return fmt.Errorf("demo %q: %w (try --demo list)", machine, err)
				}
				root = dir
			}
			lib, source, err := nvml.Open(root)
			if err != nil {
				return err
			}
			g.log.Info("snapshot", "root", root, "nvml", source)
			opts := snapshot.Options{Root: root, Scrub: scrub, NVML: lib}
			var rep snapshot.Report
			// Both refuse to write through a link planted at out or into a
			// directory another user could race in (docs/snapshot.md).
			if isTarGz(out) {
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
	outputFileFlag(cmd, &out, "output directory, or a file ending in .tar.gz")
	cmd.Flags().BoolVar(&scrub, "scrub", false, "replace MACs, GUIDs, UUIDs and hostnames with stable fakes")
	cmd.Flags().StringVar(&machine, "demo", "", `write an embedded example machine's root (nvml.json included) instead of capturing this one ("list" names them)`)
	return cmd
}

func isTarGz(out string) bool {
	return strings.HasSuffix(out, ".tar.gz") || strings.HasSuffix(out, ".tgz")
}

// writeDemo builds the example machine into dir, which must not exist or
// be empty: a snapshot never mixes with files already there.
func writeDemo(name, dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("snapshot --demo: %s is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("snapshot --demo: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("snapshot --demo: %w", err)
	}
	if err := demo.Write(name, dir); err != nil {
		return fmt.Errorf("demo %q: %w (try --demo list)", name, err)
	}
	return nil
}
