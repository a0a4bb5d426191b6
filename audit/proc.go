package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
)

// Read bounds. A status, cgroup or passwd file is a few KiB; an
// environment is bounded by the kernel's ARG_MAX (a quarter of the stack
// limit, 2 MiB by default).
const (
	maxSmallFile = 64 << 10
	maxPasswd    = 4 << 20
	maxEnviron   = 4 << 20
	// maxThreads bounds the threads read per process; a process with
	// more is judged on its first maxThreads and says so.
	maxThreads = 4096
)

// errMore says a process has more threads than were read.
var errMore = fmt.Errorf("more than %d threads: only the first read", maxThreads)

// status is what audit reads of /proc/PID/status.
type status struct {
	name       string
	uid        *int
	cpus, mems cpuset.Set
}

// readStatus reads and parses one status file (proc(5): "Key:\tvalue"
// lines; Uid: real, effective, saved, filesystem).
func readStatus(root *rootfs.Root, rel string) (status, error) {
	data, err := root.ReadFile(rel, maxSmallFile)
	if err != nil {
		return status{}, err
	}
	var st status
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Name":
			st.name = v
		case "Uid":
			if f := strings.Fields(v); len(f) > 0 {
				if u, err := strconv.Atoi(f[0]); err == nil {
					st.uid = &u
				}
			}
		case "Cpus_allowed_list":
			if st.cpus, err = cpuset.Parse(v); err != nil {
				return st, fmt.Errorf("%s: Cpus_allowed_list %q: %w", root.Path(rel), v, err)
			}
		case "Mems_allowed_list":
			if st.mems, err = cpuset.Parse(v); err != nil {
				return st, fmt.Errorf("%s: Mems_allowed_list %q: %w", root.Path(rel), v, err)
			}
		}
	}
	return st, nil
}

// thread is one task's binding.
type thread struct {
	tid        int
	cpus, mems cpuset.Set
}

// threadBudget is what is left of Options.ThreadReads in one Run.
type threadBudget struct {
	left    int
	bounded bool
}

// errBudget says the Run's thread budget was spent before all of a
// process's threads were read.
var errBudget = errors.New("the audit's thread budget (Options.ThreadReads) spent: only the threads before it read")

// readThreads reads /proc/PID/task/*/status but the leader's (task/PID:
// /proc/PID/status, which the caller has read, is the leader thread's),
// at most maxThreads of them, and no more than what is left of budget.
// A thread that ends while it is read is left out (it no longer runs
// anywhere).
func readThreads(root *rootfs.Root, pid int, budget *threadBudget) ([]thread, error) {
	dir := fmt.Sprintf("proc/%d/task", pid)
	ents, err := root.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if t, err := strconv.Atoi(e.Name()); err == nil && t > 0 && t != pid {
			tids = append(tids, t)
		}
	}
	slices.Sort(tids)
	var more error
	if len(tids) > maxThreads {
		tids, more = tids[:maxThreads], errMore
	}
	if budget.bounded {
		if len(tids) > budget.left {
			tids, more = tids[:budget.left], errBudget
		}
		budget.left -= len(tids)
	}
	var out []thread
	for _, t := range tids {
		st, err := readStatus(root, fmt.Sprintf("%s/%d/status", dir, t))
		if ended(err) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, thread{tid: t, cpus: st.cpus, mems: st.mems})
	}
	return out, more
}

// readEnviron reads /proc/PID/environ (NUL-separated NAME=value) as a
// lookup. Reading it needs the process's owner or CAP_SYS_PTRACE
// (proc(5), ptrace access mode PTRACE_MODE_READ_FSCREDS).
func readEnviron(root *rootfs.Root, pid int) (func(string) (string, bool), error) {
	data, err := root.ReadFile(fmt.Sprintf("proc/%d/environ", pid), maxEnviron)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for kv := range bytes.SplitSeq(data, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k != "" {
			if _, dup := env[k]; !dup { // getenv(3) returns the first
				env[k] = v
			}
		}
	}
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}, nil
}

// readPasswd maps uids to names from the root's etc/passwd (passwd(5));
// nil where it is absent or unreadable (users then show as numbers:
// names from LDAP or sssd are not looked up).
func readPasswd(root *rootfs.Root) map[int]string {
	data, err := root.ReadFile("etc/passwd", maxPasswd)
	if err != nil {
		return nil
	}
	users := map[int]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 || f[0] == "" {
			continue
		}
		if uid, err := strconv.Atoi(f[2]); err == nil {
			if _, seen := users[uid]; !seen {
				users[uid] = f[0]
			}
		}
	}
	return users
}

// userName is uid's name, else the number.
func userName(users map[int]string, uid int) string {
	if name, ok := users[uid]; ok {
		return name
	}
	return strconv.Itoa(uid)
}

// ended reports whether err says the process or thread is gone: its
// /proc directory vanished (ENOENT) or the read raced its exit (ESRCH).
func ended(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// why says in a few words why a read failed.
func why(err error) string {
	switch {
	case ended(err):
		return "process ended"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, sysattr.ErrTooLarge):
		return "too large"
	case errors.Is(err, errMore):
		return errMore.Error()
	case errors.Is(err, errBudget):
		return errBudget.Error()
	}
	return err.Error()
}
