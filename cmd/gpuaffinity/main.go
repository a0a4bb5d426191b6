// Command gpuaffinity discovers a GPU node's topology (GPUs, NICs, NUMA,
// PCIe tree), pairs every GPU with the NIC next to it, and renders what
// launchers and operators need. Each subcommand lives in its own file and
// only parses flags and calls the packages that do the work.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func main() {
	commandGC()
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

// commandMemoryLimit is the heap at which a command's garbage collector
// starts: a command allocates a few megabytes and exits, so collecting
// before then is work for nothing (and on a 2-core node each cycle's
// fresh metadata pages cost more than the heap it frees). A command that
// grows past it (snapshot of a very large machine) is collected as usual
// from there.
const commandMemoryLimit = 64 << 20

// commandGC turns the collector off below commandMemoryLimit, unless GOGC
// or GOMEMLIMIT says otherwise. The agent sets its own (daemonGC).
func commandGC() {
	_, gogc := os.LookupEnv("GOGC")
	_, limit := os.LookupEnv("GOMEMLIMIT")
	if !gogc && !limit {
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(commandMemoryLimit)
	}
}
