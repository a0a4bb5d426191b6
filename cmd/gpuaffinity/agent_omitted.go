//go:build omit_agent

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// The binaries this build (-tags omit_agent, the launch-path binary)
// hands commands to. It leaves the agent, the fleet commands and their
// metrics and Prometheus client libraries out, so that env and exec,
// which run once per rank, start without loading and initialising them.
// agentBinary is the agent alone (-tags agent_only): the daemon on every
// node, linked with nothing it does not run, to keep its resident memory
// small (docs/bench.md, "Agent memory"). fleetBinary is the full build,
// every command in process, for the fleet commands (a CronJob or timer
// on one machine, not per node).
const (
	agentBinary = "gpuaffinity-agent"
	fleetBinary = "gpuaffinity-fleet"
)

// newAgentCmd runs `gpuaffinity agent ...` as `gpuaffinity-agent agent
// ...`, the same arguments, in this process's place: the binary beside
// this one (installed together), else the first on PATH.
func newAgentCmd(*globals) *cobra.Command {
	return execCmd(agentBinary, "agent", "Run the daemon: state files, health gate, /metrics /healthz /readyz /health /topology")
}

// newFleetCmd runs `gpuaffinity fleet ...` as `gpuaffinity-fleet fleet
// ...`, the same way.
func newFleetCmd(*globals) *cobra.Command {
	return execCmd(fleetBinary, "fleet", "The cluster's topology from every node's agent, through Prometheus: Slurm topology, node labels, consistency report")
}

func execCmd(binary, use, short string) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short + " (runs " + binary + ")",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := findBinary(binary)
			if err != nil {
				return err
			}
			argv := append([]string{binary}, os.Args[1:]...)
			return fmt.Errorf("exec %s: %w", path, syscall.Exec(path, argv, os.Environ()))
		},
	}
}

// findBinary finds binary beside this one, else on PATH.
func findBinary(binary string) (string, error) {
	if self, err := os.Executable(); err == nil {
		if self, err = filepath.EvalSymlinks(self); err == nil {
			p := filepath.Join(filepath.Dir(self), binary)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath(binary)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("this gpuaffinity is the launch-path build, without the agent and fleet commands: install %s beside it (make build writes all three to bin/)", binary)
	}
	return p, err
}
