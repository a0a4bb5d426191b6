// Package cache reads the node the agent wrote to its state directory,
// for launchers (env, cpumap; exec always discovers) that would otherwise discover the node
// again, and says which state directories and files are trusted. It
// imports no metrics code, so the launch path does not pay for it.
package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/numa"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The files the agent writes in its state directory.
const (
	TopologyFile = "topology.json" // render.JSON of the last good node
	NCCLTopoFile = "nccl-topo.xml" // nccl.TopologyXML, as `gpuaffinity nccl-topo` writes it
	EnvFile      = "env"           // node-level dotenv, as `gpuaffinity env -o dotenv --write-topo DIR` without a rank
	LaunchFile   = "launch.node"   // the node as launchers read it (topology.Node.ForLaunch), EncodeLaunch's form
)

// maxCacheSize bounds what Load reads (a DGX H100's file is 100 kB).
const maxCacheSize = 64 << 20

// ErrNoBootTime is wrapped when ROOT/proc/stat has no btime line.
var ErrNoBootTime = errors.New("no boot time")

// Options say where Load looks.
type Options struct {
	// Dir is the agent's state directory.
	Dir string
	// Root is the root the caller would discover under: its proc/stat
	// gives the boot time, its proc/self/status the allowed CPUs.
	Root string
	// TrustWithoutBoot accepts the file when Root has no boot time (a
	// fixture root, with a state directory the user named); else that
	// is a refusal.
	TrustWithoutBoot bool
	// Launch reads LaunchFile, the node as launchers need it
	// (topology.Node.ForLaunch: no PCI function list, path matrices or
	// NVLinks), where the agent wrote one with this build's layout;
	// topology.json otherwise.
	Launch bool
}

// Load reads the node the agent wrote to Dir/topology.json, for a
// command that would otherwise discover the node again. It refuses, with
// an error that says why, a directory or file another user could have
// written (owned by neither root nor this user, or writable by group or
// others: ErrUntrusted), a file that is not a regular file (a FIFO, a
// link), a file that is missing, not newer than the boot
// (btime of ROOT/proc/stat: a file from before a reboot describes another
// boot's devices), that does not decode, or whose schema is not
// topology.Schema.
//
// The CPUs this process may use are the one part of a Node that belongs
// to the process that discovered it, not to the node: Load replaces
// the agent's with the caller's (Cpus_allowed_list of
// ROOT/proc/self/status), as discovery would have read them.
func Load(opts Options) (topology.Node, error) {
	dirOwner, err := TrustedDir(opts.Dir)
	if err != nil {
		return topology.Node{}, err
	}
	if opts.Launch {
		n, err := load(opts, filepath.Join(opts.Dir, LaunchFile), dirOwner)
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrOtherBuild) {
			return n, err
		}
		// An agent from before LaunchFile, or of another build: the
		// whole node.
	}
	return load(opts, filepath.Join(opts.Dir, TopologyFile), dirOwner)
}

// load reads one state file of the node.
func load(opts Options, path string, dirOwner uint32) (topology.Node, error) {
	// Non-blocking and not through a link: a FIFO planted in its place
	// must not hang every rank of a job.
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return topology.Node{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return topology.Node{}, err
	}
	if !fi.Mode().IsRegular() {
		return topology.Node{}, fmt.Errorf("%s: %w: not a regular file (%s)", path, ErrUntrusted, fi.Mode().Type())
	}
	if err := atomicfile.CheckFile(path, fi, dirOwner); err != nil {
		return topology.Node{}, err
	}
	boot, err := BootTime(opts.Root)
	switch {
	case err == nil:
		if !fi.ModTime().After(boot) {
			return topology.Node{}, fmt.Errorf("%s: written %s, before the boot at %s", path,
				fi.ModTime().UTC().Format(time.RFC3339), boot.UTC().Format(time.RFC3339))
		}
	case errors.Is(err, ErrNoBootTime) || errors.Is(err, os.ErrNotExist):
		if !opts.TrustWithoutBoot {
			return topology.Node{}, fmt.Errorf("%s: cannot tell whether it is from this boot: %w", path, err)
		}
	default:
		return topology.Node{}, err
	}
	if fi.Size() > maxCacheSize {
		return topology.Node{}, fmt.Errorf("%s: %d bytes, more than a topology file has", path, fi.Size())
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return topology.Node{}, fmt.Errorf("read %s: %w", path, err)
	}
	var n topology.Node
	if bytes.HasPrefix(data, []byte(launchMagic)) {
		n, err = DecodeLaunch(path, data)
	} else {
		n, err = Decode(path, data)
	}
	if err != nil {
		return topology.Node{}, err
	}
	allowed, err := allowedCPUs(opts.Root)
	if err != nil {
		// As discovery: the online CPUs when the list is unreadable.
		allowed = n.CPU.Online
	}
	n.CPU.Allowed = allowed
	return n, nil
}

// Decode decodes the contents of a topology.json (path names it in
// errors) and checks its schema.
func Decode(path string, data []byte) (topology.Node, error) {
	var n topology.Node
	if err := json.Unmarshal(data, &n); err != nil {
		return topology.Node{}, fmt.Errorf("decode %s: %w", path, err)
	}
	if n.Schema != topology.Schema {
		return topology.Node{}, fmt.Errorf("%s: schema %q, want %q", path, n.Schema, topology.Schema)
	}
	return n, nil
}

// ErrUntrusted is wrapped when a state directory or file could have been
// written by another user: launchers would then take that user's word
// for the node's NICs and CPUs. It is atomicfile's, whose rule decides.
var ErrUntrusted = atomicfile.ErrUntrusted

// TrustedDir checks the state directory and returns the uid whose files
// in it are trusted besides root's and this user's: the directory's
// owner. The rule is atomicfile.CheckDir's ForReaders (writable by its
// owner alone; owned by root, this user, or a user root gave it to, as
// systemd's RuntimeDirectory= of a DynamicUser= agent): the agent checks
// its directory with it at start, and Load before it reads.
func TrustedDir(dir string) (uint32, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	return atomicfile.CheckDir(dir, fi, atomicfile.ForReaders)
}

// BootTime reads the boot time, btime of ROOT/proc/stat (seconds since
// the epoch).
func BootTime(root string) (time.Time, error) {
	r, err := rootfs.Open(root)
	if err != nil {
		return time.Time{}, err
	}
	defer r.Close()
	path := r.Path("proc/stat")
	b, err := r.ReadFile("proc/stat", 1<<20) // bounded, never blocks on a FIFO
	if err != nil {
		return time.Time{}, err
	}
	for line := range bytes.Lines(b) {
		v, ok := bytes.CutPrefix(line, []byte("btime "))
		if !ok {
			continue
		}
		sec, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: btime: %w", path, err)
		}
		return time.Unix(sec, 0), nil
	}
	return time.Time{}, fmt.Errorf("%s: %w", path, ErrNoBootTime)
}

// allowedCPUs reads the CPUs this process may use from the root's
// proc/self/status.
func allowedCPUs(root string) (cpuset.Set, error) {
	r, err := rootfs.Open(root)
	if err != nil {
		return cpuset.Set{}, err
	}
	defer r.Close()
	return numa.AllowedCPUs(r)
}
