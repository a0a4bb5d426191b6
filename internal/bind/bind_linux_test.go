package bind

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
)

// statusField reads a field of /proc/thread-self/status.
func statusField(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		t.Error(err)
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Errorf("/proc/thread-self/status has no %s", name)
	return ""
}

// onThrowawayThread runs f on a locked OS thread that is never unlocked:
// when the goroutine ends, the runtime ends the thread with it, so the
// affinity and memory policy f sets never reach another goroutine. f runs
// off the test goroutine: it reports with t.Error and returns, never
// t.Fatal or t.Skip.
func onThrowawayThread(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		f()
	}()
	<-done
}

func TestAllowedCPUsIsCpusAllowedList(t *testing.T) {
	var got cpuset.Set
	var want string
	onThrowawayThread(t, func() {
		var err error
		if got, err = AllowedCPUs(); err != nil {
			t.Error(err)
		}
		want = statusField(t, "Cpus_allowed_list")
	})
	if got.String() != want || got.IsEmpty() {
		t.Errorf("AllowedCPUs() = %q, Cpus_allowed_list %q", got, want)
	}
}

func TestSetCPUs(t *testing.T) {
	onThrowawayThread(t, func() {
		allowed, err := AllowedCPUs()
		if err != nil {
			t.Error(err)
			return
		}
		last := cpuset.Of(allowed.CPUs()[allowed.Len()-1])
		if err := SetCPUs(last); err != nil {
			t.Error(err)
			return
		}
		if got, _ := AllowedCPUs(); !got.Equal(last) {
			t.Errorf("after SetCPUs(%s): sched_getaffinity %s", last, got)
		}
		if got := statusField(t, "Cpus_allowed_list"); got != last.String() {
			t.Errorf("after SetCPUs(%s): Cpus_allowed_list %s", last, got)
		}
		if err := SetCPUs(cpuset.Set{}); err == nil {
			t.Error("SetCPUs(empty): no error")
		}
	})
}

func TestSetMemPolicy(t *testing.T) {
	nodes, err := OnlineNodes()
	if err != nil {
		t.Fatal(err)
	}
	first := cpuset.Of(nodes.CPUs()[0])
	for _, tc := range []struct {
		p    Policy
		mode int
	}{{PolicyBind, ModeBind}, {PolicyPreferred, ModePreferred}} {
		t.Run(tc.p.String(), func(t *testing.T) {
			var refused error
			onThrowawayThread(t, func() {
				if mode, _, err := MemPolicy(); err != nil || mode != ModeDefault {
					t.Errorf("a new thread's policy: mode %d, %v; want MPOL_DEFAULT", mode, err)
					return
				}
				if err := SetMemPolicy(tc.p, first); err != nil {
					if errors.Is(err, unix.EPERM) {
						refused = err
					} else {
						t.Error(err)
					}
					return
				}
				mode, got, err := MemPolicy()
				if err != nil || mode != tc.mode || !got.Equal(first) {
					t.Errorf("get_mempolicy after %s %s: mode %d nodes %s, %v; want mode %d", tc.p, first, mode, got, err, tc.mode)
				}
				// PolicyNone leaves the policy alone.
				if err := SetMemPolicy(PolicyNone, cpuset.Set{}); err != nil {
					t.Error(err)
				}
				if mode, _, _ := MemPolicy(); mode != tc.mode {
					t.Errorf("PolicyNone changed the mode to %d", mode)
				}
			})
			if refused != nil {
				t.Skipf("set_mempolicy refused here (seccomp without CAP_SYS_NICE?): %v", refused)
			}
		})
	}
}

func TestSetMemPolicyErrors(t *testing.T) {
	nodes, err := OnlineNodes()
	if err != nil {
		t.Fatal(err)
	}
	missing := nodes.CPUs()[nodes.Len()-1] + 1
	onThrowawayThread(t, func() {
		err := SetMemPolicy(PolicyBind, cpuset.Of(missing))
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPERM) {
			t.Errorf("MPOL_BIND to missing node %d: %v, want EINVAL", missing, err)
		}
		if err != nil && !strings.Contains(err.Error(), "set_mempolicy(MPOL_BIND") {
			t.Errorf("error does not name the call: %v", err)
		}
		if err := SetMemPolicy(PolicyBind, cpuset.Set{}); err == nil {
			t.Error("empty node list: no error")
		}
		if mode, _, _ := MemPolicy(); mode != ModeDefault {
			t.Errorf("failed calls changed the mode to %d", mode)
		}
	})
}

func TestNodeMask(t *testing.T) {
	got, err := nodeMask(cpuset.Of(0, 3, 64, 65))
	if err != nil || !slices.Equal(got, []uint64{9, 3}) {
		t.Errorf("nodeMask(0,3,64,65) = %x, %v", got, err)
	}
	if _, err := nodeMask(cpuset.Of(maxNodes)); err == nil {
		t.Errorf("node %d: no error", maxNodes)
	}
	if _, err := nodeMask(cpuset.Set{}); err == nil {
		t.Error("empty: no error")
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exe := write("tool", 0o755)
	write("data", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	path := other + ":" + dir

	if got, err := LookPath("tool", path); err != nil || got != exe {
		t.Errorf("LookPath(tool) = %q, %v; want %q", got, err, exe)
	}
	if got, err := LookPath(exe, ""); err != nil || got != exe {
		t.Errorf("LookPath(%s) = %q, %v", exe, got, err)
	}
	for _, name := range []string{"data", "sub", "nosuch"} {
		if _, err := LookPath(name, path); !errors.Is(err, ErrNotFound) {
			t.Errorf("LookPath(%s) = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := LookPath(filepath.Join(dir, "data"), path); !errors.Is(err, unix.EACCES) {
		t.Errorf("LookPath(.../data) = %v, want EACCES", err)
	}
	if _, err := LookPath(filepath.Join(dir, "nosuch"), path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LookPath(.../nosuch) = %v, want ErrNotExist", err)
	}
	// An empty PATH entry is the current directory, as for execvp.
	t.Chdir(dir)
	if got, err := LookPath("tool", other+"::"); err != nil || got != exe {
		t.Errorf("LookPath(tool) with an empty entry = %q, %v", got, err)
	}
}

func TestExecFailsAfterWarningOnce(t *testing.T) {
	nodes, err := OnlineNodes()
	if err != nil {
		t.Fatal(err)
	}
	var warnings []string
	onThrowawayThread(t, func() {
		err = Exec(Plan{
			Policy: PolicyBind, Mems: cpuset.Of(nodes.CPUs()[nodes.Len()-1] + 1),
			Path: filepath.Join(t.TempDir(), "nosuch"), Argv: []string{"nosuch"},
		}, func(w string) { warnings = append(warnings, w) })
	})
	var ee *ExecError
	if !errors.Is(err, unix.ENOENT) || !errors.As(err, &ee) || !strings.Contains(err.Error(), "execve") {
		t.Errorf("Exec(missing file) = %v, want an *ExecError of ENOENT", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "memory policy not set") {
		t.Errorf("warnings %q, want one about the memory policy", warnings)
	}
	if err := Exec(Plan{}, func(string) {}); err == nil {
		t.Error("Exec with no argv: no error")
	}
}
