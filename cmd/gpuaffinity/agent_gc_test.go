//go:build !omit_agent

package main

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// unsetEnv clears name for the test and restores it after (t.Setenv
// records the old value; the unset makes it absent, not empty).
func unsetEnv(t *testing.T, name string) {
	t.Setenv(name, "")
	os.Unsetenv(name)
}

// The daemon collects at agentGCPercent with no memory limit, and each
// variable the environment sets wins for its own setting only: a
// GOMEMLIMIT (the DaemonSet's 80MiB) keeps the limit and still paces at
// 50, a GOGC keeps the pacing and still drops commandGC's 64 MiB limit.
func TestDaemonGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	const envLimit = 80 << 20
	for _, c := range []struct {
		name           string
		gogc, memlimit bool
		wantGC         int
		wantLimit      int64
		startGC        int
		startLimit     int64
	}{
		// commandGC ran first: collector off below 64 MiB.
		{name: "neither", startGC: -1, startLimit: commandMemoryLimit, wantGC: agentGCPercent, wantLimit: math.MaxInt64},
		// The runtime read GOMEMLIMIT=80MiB, GOGC is 100; commandGC left both.
		{name: "GOMEMLIMIT", memlimit: true, startGC: 100, startLimit: envLimit, wantGC: agentGCPercent, wantLimit: envLimit},
		// The runtime read GOGC=200 and commandGC left both.
		{name: "GOGC", gogc: true, startGC: 200, startLimit: math.MaxInt64, wantGC: 200, wantLimit: math.MaxInt64},
		{name: "both", gogc: true, memlimit: true, startGC: 200, startLimit: envLimit, wantGC: 200, wantLimit: envLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			unsetEnv(t, "GOGC")
			unsetEnv(t, "GOMEMLIMIT")
			if c.gogc {
				t.Setenv("GOGC", "200")
			}
			if c.memlimit {
				t.Setenv("GOMEMLIMIT", "80MiB")
			}
			debug.SetGCPercent(c.startGC)
			debug.SetMemoryLimit(c.startLimit)
			daemonGC()
			if got := debug.SetGCPercent(100); got != c.wantGC {
				t.Errorf("GOGC %d, want %d", got, c.wantGC)
			}
			if got := debug.SetMemoryLimit(math.MaxInt64); got != c.wantLimit {
				t.Errorf("memory limit %d, want %d", got, c.wantLimit)
			}
		})
	}
}

// GOMAXPROCS as node_exporter decides it: the flag when given, else the
// environment's GOMAXPROCS (which the runtime applied at start), else
// agentMaxProcs, 1.
func TestDaemonProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	if agentMaxProcs != 1 {
		t.Errorf("agentMaxProcs %d, want node_exporter's --runtime.gomaxprocs default, 1", agentMaxProcs)
	}
	for _, c := range []struct {
		name      string
		env       bool
		flagGiven bool
		flag      int
		want      int
	}{
		{name: "default", flag: agentMaxProcs, want: 1},
		{name: "flag", flagGiven: true, flag: 3, want: 3},
		{name: "env", env: true, flag: agentMaxProcs, want: 5}, // the runtime's value, from GOMAXPROCS=5
		{name: "flag over env", env: true, flagGiven: true, flag: 2, want: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			unsetEnv(t, "GOMAXPROCS")
			runtime.GOMAXPROCS(7)
			if c.env {
				t.Setenv("GOMAXPROCS", "5")
				runtime.GOMAXPROCS(5) // as the runtime does at start
			}
			daemonProcs(c.flag, c.flagGiven)
			if got := runtime.GOMAXPROCS(0); got != c.want {
				t.Errorf("GOMAXPROCS %d, want %d", got, c.want)
			}
		})
	}
}
