package main

import (
	"fmt"
	"os"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/internal/demo"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// nodeFlags are the flags of every command that discovers the node.
type nodeFlags struct {
	demo    string
	demoDir string // the built demo machine, while the command runs
	// onDisk builds the --demo machine on disk, for a command that reads
	// its files after discovery (check's counters and kernel log); the
	// others read it from memory.
	onDisk      bool
	computeNICs []string
	excludeNICs []string
	storageNICs []string
}

func (f *nodeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.demo, "demo", "", `discover an embedded example machine instead of this one ("list" names them)`)
	listVar(cmd.Flags(), &f.computeNICs, "compute-nics", nil, "NICs GPUs use (RDMA device, netdev or PCI bus id); others are not compute")
	listVar(cmd.Flags(), &f.excludeNICs, "exclude-nics", nil, "NICs GPUs never use")
	listVar(cmd.Flags(), &f.storageNICs, "storage-nics", nil, "NICs that are storage NICs, whatever the layout says")
}

// discover runs discovery on the root, or on a demo machine built into a
// temporary directory. The demo directory stays until the command ends
// (cobra's PostRun would be skipped on error, so the caller defers
// cleanup), because some commands read files there after discovery.
func (f *nodeFlags) discover(cmd *cobra.Command, g *globals) (topology.Node, error) {
	opts := discover.Options{TopoFile: g.topoFile, Roles: f.roles()}
	if f.demo != "" && !f.onDisk {
		// The example machine in memory: nothing is written to disk.
		fsys, lib, err := f.memoryRoot(cmd)
		if err != nil {
			return topology.Node{}, err
		}
		opts.FS = fsys
		if lib != nil {
			opts.NVML, opts.NVMLSource = lib, nvml.SourceReplay
		}
	} else {
		root, err := f.prepareRoot(cmd, g)
		if err != nil {
			return topology.Node{}, err
		}
		opts.Root = root
	}
	n, err := discover.Discover(opts)
	if err != nil {
		f.cleanup()
		return n, err
	}
	for _, w := range n.Warnings {
		g.log.Debug("discovery", "warning", w)
	}
	warnUnsupported(g, n)
	if f.demoDir == "" {
		f.cleanup()
	}
	return n, nil
}

// prepareRoot returns the root to discover under: --root, or with --demo
// the demo machine, built into a temporary directory that lives until
// cleanup.
func (f *nodeFlags) prepareRoot(cmd *cobra.Command, g *globals) (string, error) {
	if f.demo == "" {
		return g.root, nil
	}
	if cmd.Flags().Changed("root") || os.Getenv("GPUAFFINITY_ROOT") != "" {
		return "", fmt.Errorf("--demo and --root exclude each other")
	}
	dir, err := os.MkdirTemp(demoTempDir(), "gpuaffinity-demo-")
	if err != nil {
		return "", err
	}
	f.demoDir = dir
	if err := demo.Write(f.demo, dir); err != nil {
		f.cleanup()
		return "", fmt.Errorf("demo %q: %w (try --demo list)", f.demo, err)
	}
	return dir, nil
}

// memoryRoot is the --demo machine built in memory, and its NVML replay.
func (f *nodeFlags) memoryRoot(cmd *cobra.Command) (*rootfs.Root, gonvml.Interface, error) {
	if cmd.Flags().Changed("root") || os.Getenv("GPUAFFINITY_ROOT") != "" {
		return nil, nil, fmt.Errorf("--demo and --root exclude each other")
	}
	r, lib, err := demo.Memory(f.demo)
	if err != nil {
		return nil, nil, fmt.Errorf("demo %q: %w (try --demo list)", f.demo, err)
	}
	return r, lib, nil
}

// roles are the NIC role pins of --compute-nics and --exclude-nics.
func (f *nodeFlags) roles() topology.RoleOptions {
	return topology.RoleOptions{ComputeNICs: splitList(f.computeNICs), ExcludeNICs: splitList(f.excludeNICs),
		StorageNICs: splitList(f.storageNICs)}
}

// warnUnsupported tells, on every command, of accelerators on the bus
// that gpuaffinity does not drive yet (the node's warning names them).
func warnUnsupported(g *globals, n topology.Node) {
	if w := topology.UnsupportedWarning(n.Unsupported, len(n.GPUs)); w != "" {
		g.log.Warn(w)
	}
}

// root is the root discovery read: the demo machine's while it lives.
func (f *nodeFlags) root(g *globals) string {
	if f.demoDir != "" {
		return f.demoDir
	}
	return g.root
}

// cleanup removes the demo machine, if any.
func (f *nodeFlags) cleanup() {
	if f.demoDir != "" {
		os.RemoveAll(f.demoDir)
		f.demoDir = ""
	}
}

// demoTempDir picks where a demo machine is built: a memory file system
// when one is writable (a demo root is thousands of small files, which
// some disks create slowly), else the default temporary directory.
func demoTempDir() string {
	if os.Getenv("TMPDIR") != "" {
		return ""
	}
	for _, d := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/dev/shm"} {
		if d == "" {
			continue
		}
		if f, err := os.CreateTemp(d, ".gpuaffinity-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return d
		}
	}
	return ""
}

// defaultStateDir is where the agent writes, and env and cpumap look.
const defaultStateDir = "/run/gpuaffinity"

// stateDirDefault is --state-dir's default: GPUAFFINITY_STATE_DIR, else
// /run/gpuaffinity.
func stateDirDefault() string {
	if d := os.Getenv("GPUAFFINITY_STATE_DIR"); d != "" {
		return d
	}
	return defaultStateDir
}

// loadExpect reads an expectations file (--expect) for health.ParseExpect.
func loadExpect(path string) (*health.Expect, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return health.ParseExpect(b, path)
}
