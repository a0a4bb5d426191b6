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

// agentBinary is the full build, which the agent runs as: this build
// (-tags omit_agent, the launch-path binary) leaves the agent and its
// metrics libraries out, so that env and exec, which run once per rank,
// start without loading and initialising them.
const agentBinary = "gpuaffinity-agent"

// newAgentCmd runs `gpuaffinity agent ...` as `gpuaffinity-agent agent
// ...`, the same arguments, in this process's place: the binary beside
// this one (installed together), else the first on PATH.
func newAgentCmd(*globals) *cobra.Command {
	return execAgentCmd("agent", "Run the daemon: state files, health gate, /metrics /healthz /readyz /health /topology")
}

// newFleetCmd runs `gpuaffinity fleet ...` the same way: its Prometheus
// client is the full build's.
func newFleetCmd(*globals) *cobra.Command {
	return execAgentCmd("fleet", "The cluster's topology from every node's agent, through Prometheus: Slurm topology, node labels, consistency report")
}

func execAgentCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short + " (runs " + agentBinary + ")",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := findAgent()
			if err != nil {
				return err
			}
			argv := append([]string{agentBinary}, os.Args[1:]...)
			return fmt.Errorf("exec %s: %w", path, syscall.Exec(path, argv, os.Environ()))
		},
	}
}

func findAgent() (string, error) {
	if self, err := os.Executable(); err == nil {
		if self, err = filepath.EvalSymlinks(self); err == nil {
			p := filepath.Join(filepath.Dir(self), agentBinary)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath(agentBinary)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("this gpuaffinity is the launch-path build, without the agent: install %s beside it (make build writes both to bin/)", agentBinary)
	}
	return p, err
}
