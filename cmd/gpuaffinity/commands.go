//go:build !agent_only

package main

import "github.com/spf13/cobra"

// addCommands adds every command: in process in the full build, the
// agent and fleet as hand-offs to their binaries in the launch-path
// build (agent_omitted.go).
func addCommands(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(newVersionCmd(), newTopoCmd(g), newSnapshotCmd(g), newNCCLTopoCmd(g), newCuFileCmd(g), newEnvCmd(g),
		newCpumapCmd(g), newExecCmd(g), newGresCmd(g), newCheckCmd(g), newAuditCmd(g), newAgentCmd(g), newFleetCmd(g))
	registerCompletions(cmd)
}
