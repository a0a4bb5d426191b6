//go:build agent_only

package main

import "github.com/spf13/cobra"

// addCommands adds the agent alone (and version): gpuaffinity-agent, the
// daemon every node runs, links no other command's code (the files of
// the other commands are built with !agent_only), so that its resident
// memory holds only what it runs (docs/bench.md, "Agent memory").
func addCommands(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(newVersionCmd(), newAgentCmd(g))
}
