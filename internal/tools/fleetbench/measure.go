package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// measureEnv, set to a file name, makes fleetbench a shim that runs its
// arguments as a command (with its own stdin, stdout and stderr), writes
// the command's wall time and peak RSS to that file and exits with the
// command's exit status.
//
// Why a shim: the peak RSS a child's rusage reports (ru_maxrss) is at
// least the high-water RSS of the process that started it. Go starts
// children with vfork semantics (clone with CLONE_VM), and at exec the
// kernel counts the address space being left, still the parent's, into
// the child's peak (fs/exec.c, exec_mmap: setmax_mm_hiwater_rss).
// fleetbench builds whole fleets and reads answers of many megabytes;
// a fresh shim holds a few.
const measureEnv = "FLEETBENCH_MEASURE"

// shim is fleetbench run with measureEnv: it runs os.Args[1:] and
// returns the exit status to exit with.
func shim(out string) int {
	// Pdeathsig is sent when the thread that started the child ends:
	// keep it the one that waits.
	runtime.LockOSThread()
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, measureEnv+"=") })
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintf(os.Stderr, "fleetbench: run %s: %v\n", os.Args[1], err)
		return 125
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss // KiB on Linux
	}
	if err := os.WriteFile(out, fmt.Appendf(nil, "%d %d\n", wall.Nanoseconds(), rss), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "fleetbench: %v\n", err)
		return 125
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// measured runs argv through the shim and returns the command's wall
// time and peak RSS in KiB; err is the shim's (an *exec.ExitError with
// the command's exit status when it failed).
func measured(cmd *exec.Cmd, file string) (time.Duration, int64, error) {
	runErr := cmd.Run()
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, errors.Join(runErr, fmt.Errorf("no measurement: %w", err))
	}
	var ns, rss int64
	if _, err := fmt.Sscan(string(data), &ns, &rss); err != nil {
		return 0, 0, errors.Join(runErr, fmt.Errorf("measurement %q: %w", data, err))
	}
	return time.Duration(ns), rss, runErr
}
