//go:build !agent_only

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// outputFileFlag defines -f/--output-file, the file a command writes, on
// cmd. -o/--output is the output format on every command (topo, env,
// cpumap, check); on the commands that write a file it once named the
// file, so it stays defined, hidden, and refused with the new spelling:
// `gres -o json` must not write a file named json.
func outputFileFlag(cmd *cobra.Command, p *string, usage string) {
	cmd.Flags().StringVarP(p, "output-file", "f", "", usage)
	var old string
	cmd.Flags().StringVarP(&old, "output", "o", "", "refused: use -f/--output-file")
	cmd.Flags().MarkHidden("output")
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if c.Flags().Changed("output") {
			return fmt.Errorf("-o/--output is the output format in gpuaffinity, and %s has none; it writes to a file with -f/--output-file (gpuaffinity %s -f %s)",
				c.Name(), c.Name(), old)
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}
