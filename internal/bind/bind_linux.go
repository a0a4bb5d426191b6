package bind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
)

// Policy is a memory policy that Exec may set.
type Policy int

const (
	// PolicyNone leaves the memory policy as inherited (normally
	// MPOL_DEFAULT: allocate on the node of the CPU that first touches a
	// page).
	PolicyNone Policy = iota
	// PolicyBind is MPOL_BIND: allocate only on the given nodes; an
	// allocation the nodes cannot satisfy fails (numactl --membind).
	PolicyBind
	// PolicyPreferred is MPOL_PREFERRED (one node) or MPOL_PREFERRED_MANY
	// (several, Linux 5.15+): allocate there first, elsewhere when they are
	// full (numactl --preferred / --preferred-many).
	PolicyPreferred
)

// String names the policy as the dry-run plan and numa_maps do.
func (p Policy) String() string {
	switch p {
	case PolicyNone:
		return "none"
	case PolicyBind:
		return "bind"
	case PolicyPreferred:
		return "preferred"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Kernel mode numbers of get_mempolicy(2) (include/uapi/linux/mempolicy.h).
const (
	ModeDefault       = unix.MPOL_DEFAULT
	ModePreferred     = unix.MPOL_PREFERRED
	ModeBind          = unix.MPOL_BIND
	ModeInterleave    = unix.MPOL_INTERLEAVE
	ModeLocal         = unix.MPOL_LOCAL
	ModePreferredMany = unix.MPOL_PREFERRED_MANY
	// modeFlags are the MPOL_F_* flags that may be or-ed into a mode.
	modeFlags = unix.MPOL_F_STATIC_NODES | unix.MPOL_F_RELATIVE_NODES | unix.MPOL_F_NUMA_BALANCING
)

// maxCPUs is the widest CPU mask AllowedCPUs asks the kernel for before
// giving up; Linux's NR_CPUS is at most 8192 on the configurations that
// ship.
const maxCPUs = cpuset.MaxCPU

// maxNodes bounds the node masks of set_mempolicy and get_mempolicy
// (MAX_NUMNODES is at most 1024, CONFIG_NODES_SHIFT ≤ 10).
const maxNodes = 1024

// AllowedCPUs returns the CPUs the calling thread may run on:
// sched_getaffinity(0), the mask /proc/self/status shows as
// Cpus_allowed_list (taskset, the cgroup cpuset, the launcher's binding).
func AllowedCPUs() (cpuset.Set, error) {
	for n := 1024; ; n *= 2 {
		set := unix.NewCPUSet(n)
		err := unix.SchedGetaffinityDynamic(0, set)
		if errors.Is(err, unix.EINVAL) && n < maxCPUs {
			continue // the kernel's mask is wider than n bits
		}
		if err != nil {
			return cpuset.Set{}, fmt.Errorf("sched_getaffinity: %w", err)
		}
		var cpus []int
		for c := range n {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
		return cpuset.Of(cpus...), nil
	}
}

// SetCPUs binds the calling thread to cpus: sched_setaffinity(0). The
// caller must have locked its goroutine to the thread
// (runtime.LockOSThread) for the binding to mean anything to it. The
// kernel silently drops CPUs outside the thread's cpuset; check cpus
// against AllowedCPUs first.
func SetCPUs(cpus cpuset.Set) error {
	if cpus.IsEmpty() {
		return fmt.Errorf("sched_setaffinity: empty CPU list")
	}
	list := cpus.CPUs()
	set := unix.NewCPUSet(list[len(list)-1] + 1)
	for _, c := range list {
		set.Set(c)
	}
	if err := unix.SchedSetaffinityDynamic(0, set); err != nil {
		return fmt.Errorf("sched_setaffinity(%s): %w", cpus, err)
	}
	return nil
}

// nodeMask packs nodes into the unsigned long array set_mempolicy reads.
func nodeMask(nodes cpuset.Set) ([]uint64, error) {
	list := nodes.CPUs()
	if len(list) == 0 {
		return nil, fmt.Errorf("empty NUMA node list")
	}
	if last := list[len(list)-1]; last >= maxNodes {
		return nil, fmt.Errorf("NUMA node %d out of range [0,%d)", last, maxNodes)
	}
	mask := make([]uint64, list[len(list)-1]/64+1)
	for _, n := range list {
		mask[n/64] |= 1 << (n % 64)
	}
	return mask, nil
}

// setMempolicy calls set_mempolicy(mode, mask, maxnode). The kernel reads
// maxnode-1 bits (mm/mempolicy.c get_nodes), hence the +1, which
// x/sys/unix's SetMemPolicyDynamic does not add.
func setMempolicy(mode int, mask []uint64) error {
	_, _, e := unix.Syscall(unix.SYS_SET_MEMPOLICY, uintptr(mode),
		uintptr(unsafe.Pointer(&mask[0])), uintptr(len(mask)*64+1))
	runtime.KeepAlive(mask)
	if e != 0 {
		return e
	}
	return nil
}

// SetMemPolicy sets the calling thread's memory policy: set_mempolicy(2)
// with MPOL_BIND or MPOL_PREFERRED over nodes (MPOL_PREFERRED_MANY for
// several preferred nodes, falling back to MPOL_PREFERRED of the first
// on kernels before 5.15). PolicyNone does nothing. Errors wrap the errno:
// EPERM where a container's seccomp profile wants CAP_SYS_NICE, EINVAL for
// nodes outside the cpuset's mems.
func SetMemPolicy(p Policy, nodes cpuset.Set) error {
	if p == PolicyNone {
		return nil
	}
	mask, err := nodeMask(nodes)
	if err != nil {
		return fmt.Errorf("set_mempolicy(%s, %s): %w", p, nodes, err)
	}
	mode, name := ModeBind, "MPOL_BIND"
	if p == PolicyPreferred {
		mode, name = ModePreferred, "MPOL_PREFERRED"
		if nodes.Len() > 1 {
			mode, name = ModePreferredMany, "MPOL_PREFERRED_MANY"
		}
	} else if p != PolicyBind {
		return fmt.Errorf("set_mempolicy: unknown policy %v", p)
	}
	err = setMempolicy(mode, mask)
	if errors.Is(err, unix.EINVAL) && mode == ModePreferredMany {
		// Before Linux 5.15: MPOL_PREFERRED takes the first node of the mask.
		mode, name = ModePreferred, "MPOL_PREFERRED"
		err = setMempolicy(mode, mask)
	}
	if err != nil {
		return fmt.Errorf("set_mempolicy(%s, nodes %s): %w", name, nodes, err)
	}
	return nil
}

// MemPolicy returns the calling thread's memory policy, get_mempolicy(2):
// the mode (ModeDefault, ModeBind, …, without MPOL_F_* flags) and its
// nodes.
func MemPolicy() (mode int, nodes cpuset.Set, err error) {
	var m int32
	mask := make([]uint64, maxNodes/64)
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&m)),
		uintptr(unsafe.Pointer(&mask[0])), uintptr(maxNodes+1), 0, 0, 0)
	runtime.KeepAlive(mask)
	if e != 0 {
		return 0, cpuset.Set{}, fmt.Errorf("get_mempolicy: %w", e)
	}
	var list []int
	for i, w := range mask {
		for b := range 64 {
			if w&(1<<b) != 0 {
				list = append(list, i*64+b)
			}
		}
	}
	return int(m) &^ modeFlags, cpuset.Of(list...), nil
}

// OnlineNodes returns the NUMA nodes of this machine
// (/sys/devices/system/node/online). A kernel without CONFIG_NUMA has no
// such file and one node, 0.
func OnlineNodes() (cpuset.Set, error) {
	b, err := os.ReadFile("/sys/devices/system/node/online")
	if errors.Is(err, os.ErrNotExist) {
		return cpuset.Of(0), nil
	}
	if err != nil {
		return cpuset.Set{}, err
	}
	s, err := cpuset.Parse(string(b))
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("/sys/devices/system/node/online: %w", err)
	}
	return s, nil
}

// ErrNotFound is wrapped by LookPath when no executable file is found.
var ErrNotFound = errors.New("executable file not found")

// LookPath resolves file as execvp(3) would, against path (a PATH value)
// rather than this process's PATH: a name with a slash is taken as it is,
// others are searched in each directory of path ("" or "." meaning the
// current directory). The answer is made absolute.
func LookPath(file, path string) (string, error) {
	if file == "" {
		return "", fmt.Errorf("%w: empty command name", ErrNotFound)
	}
	if strings.Contains(file, "/") {
		if err := executable(file); err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		return filepath.Abs(file)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if executable(p) == nil {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("%q: %w in PATH %q", file, ErrNotFound, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("is a directory: %w", unix.EACCES)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("not executable: %w", unix.EACCES)
	}
	return unix.Access(p, unix.X_OK)
}

// Plan is what Exec applies.
type Plan struct {
	CPUs   cpuset.Set // CPUs to bind to; empty leaves the affinity alone
	Mems   cpuset.Set // NUMA nodes of the memory policy
	Policy Policy     // PolicyNone sets no memory policy
	Path   string     // the resolved command (LookPath)
	Argv   []string   // its arguments, Argv[0] included
	Env    []string   // its environment, "NAME=value"
}

// Exec binds the calling thread as p says and execve's p.Path on it. On
// success it does not return. Setting the memory policy is best effort:
// when the kernel refuses it (EPERM without CAP_SYS_NICE under a
// container's seccomp profile, EINVAL for nodes outside the cpuset's
// mems), warn is called once with the reason and Exec goes on with the
// CPU binding; first-touch allocation then keeps memory near the bound
// CPUs. Failing to bind the CPUs is an error, failing to execve an
// *ExecError.
func Exec(p Plan, warn func(string)) error {
	if len(p.Argv) == 0 {
		return fmt.Errorf("execve: no command")
	}
	// Affinity and memory policy are per thread, and execve keeps only the
	// calling thread: every step must run on the same one. The lock is
	// never released; the thread is replaced or the process exits.
	runtime.LockOSThread()
	if err := SetMemPolicy(p.Policy, p.Mems); err != nil {
		warn(fmt.Sprintf("memory policy not set, CPU binding only: %v", err))
	}
	if !p.CPUs.IsEmpty() {
		if err := SetCPUs(p.CPUs); err != nil {
			return err
		}
	}
	if err := unix.Exec(p.Path, p.Argv, p.Env); err != nil {
		return &ExecError{Path: p.Path, Err: err}
	}
	return nil // not reached
}

// ExecError is Exec's error when execve itself fails (the command could
// not be run), as opposed to a failure to bind before it.
type ExecError struct {
	Path string
	Err  error
}

func (e *ExecError) Error() string { return "execve " + e.Path + ": " + e.Err.Error() }
func (e *ExecError) Unwrap() error { return e.Err }
