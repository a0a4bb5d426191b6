// Command gpuaffinity discovers a GPU node's topology (GPUs, NICs, NUMA,
// PCIe tree), pairs every GPU with the NIC next to it, and renders what
// launchers and operators need. Each subcommand lives in its own file and
// only parses flags and calls the packages that do the work.
package main

import (
	"errors"
	"fmt"
	"os"
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func main() {
	cmd := newRootCmd()
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gpuaffinity:", err)
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}
