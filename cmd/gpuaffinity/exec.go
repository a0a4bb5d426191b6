//go:build !agent_only

package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/binding"
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/bind"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/launch"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Exit statuses of exec's own failures to start the command, as env(1),
// nohup(1) and POSIX shells use them.
const (
	execExitCannotRun = 126 // found but not executable, or execve failed
	execExitNotFound  = 127 // no such command
)

// execFlags are exec's own flags.
type execFlags struct {
	localRank   int
	mode        string
	ranksPerGPU int
	membind     bool
	preferred   bool
	noMem       bool
	cpus        string
	mems        string
	noMNNVL     bool
	dryRun      bool
}

func newExecCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] -- CMD [ARGS...]",
		Short: "Bind to one local rank's CPUs and memory, set its environment, and exec a command",
		Long: `exec runs CMD in place of itself (execve: same pid, no child process, so
signals and the exit status are CMD's own) after

  - adding the environment ` + "`gpuaffinity env`" + ` prints for the local rank to its
    own (same names replaced),
  - binding to the rank's CPUs (sched_setaffinity), from the binding map
    (--mode, --ranks-per-gpu) or --cpus,
  - setting the memory policy to the rank's NUMA node(s) (set_mempolicy):
    MPOL_BIND with --membind (the default), MPOL_PREFERRED with --preferred,
    none with --no-mem; --mems overrides the nodes. Best effort: where the
    kernel refuses (EPERM in containers without CAP_SYS_NICE), one warning,
    and CPU binding goes on.

The local rank comes from --local-rank, else from LOCAL_RANK, SLURM_LOCALID,
OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or PMI_LOCAL_RANK, as for env.
--cpus and --mems work without a rank or a GPU (then no environment is
added). CPUs outside this process's allowed set and NUMA nodes that do not
exist are errors. --dry-run prints the plan and runs nothing; with --root
or --demo (another machine's files) exec runs only with --cpus and
--mems/--no-mem. Put -- before CMD. Details: docs/exec.md.`,
		Example: `  gpuaffinity exec -- python train.py
  torchrun --nproc-per-node 8 --no-python gpuaffinity exec -- python train.py
  gpuaffinity exec --cpus 0-7 --mems 0 -- ./bench
  gpuaffinity exec --demo dgx-h100 --local-rank 3 --dry-run -- python train.py`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := planExec(cmd, g, &nf, &f, args)
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			for _, w := range dedupe(p.Warnings) {
				fmt.Fprintln(stderr, "gpuaffinity: warning:", w)
			}
			if f.dryRun {
				return launch.WriteDryRun(cmd.OutOrStdout(), p)
			}
			if p.PathErr != nil {
				code := execExitCannotRun
				if errors.Is(p.PathErr, bind.ErrNotFound) || errors.Is(p.PathErr, os.ErrNotExist) {
					code = execExitNotFound
				}
				return exitError{code: code, err: p.PathErr}
			}
			err = bind.Exec(bind.Plan{CPUs: p.CPUs, Mems: p.Mems, Policy: p.Policy, Path: p.Path, Argv: p.Argv, Env: p.Env},
				func(w string) { fmt.Fprintln(stderr, "gpuaffinity: warning:", w) })
			var ee *bind.ExecError
			if errors.As(err, &ee) {
				return exitError{code: execExitCannotRun, err: err}
			}
			return err
		},
	}
	// CMD's own flags are CMD's: flag parsing stops at the first argument
	// that is not a flag (and at --).
	cmd.Flags().SetInterspersed(false)
	nf.register(cmd)
	fl := cmd.Flags()
	fl.IntVar(&f.localRank, "local-rank", 0, localRankHelp)
	fl.StringVar(&f.mode, "mode", string(binding.ModeExclusive), "binding mode: node (the GPU's NUMA node), socket, exclusive (the node's cores split among its GPUs' ranks)")
	fl.IntVar(&f.ranksPerGPU, "ranks-per-gpu", 1, "local ranks per GPU: rank r drives GPU r / K (default 1; on AMD GPUs split into K compute partitions, K: one rank per partition)")
	fl.BoolVar(&f.membind, "membind", false, "memory policy MPOL_BIND to the rank's NUMA node(s) (the default)")
	fl.BoolVar(&f.preferred, "preferred", false, "memory policy MPOL_PREFERRED: the rank's node(s) first, others when full")
	fl.BoolVar(&f.noMem, "no-mem", false, "set no memory policy (first-touch allocation near the bound CPUs)")
	fl.StringVar(&f.cpus, "cpus", "", `CPUs to bind to instead of the map's ("0-7,16"; numactl --physcpubind)`)
	fl.StringVar(&f.mems, "mems", "", `NUMA nodes for the memory policy instead of the map's ("0"; numactl --membind)`)
	fl.BoolVar(&f.noMNNVL, "no-mnnvl", false, "set NCCL_MNNVL_ENABLE=0: NCCL uses the network between nodes instead of multi-node NVLink (as env --no-mnnvl)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the plan (rank, GPU, CPUs, nodes, policy, environment, command) and run nothing")
	cmd.MarkFlagsMutuallyExclusive("membind", "preferred", "no-mem")
	cmd.MarkFlagsMutuallyExclusive("mems", "no-mem")
	return cmd
}

// planExec validates the flags, discovers the node and builds the plan
// (package launch).
func planExec(cmd *cobra.Command, g *globals, nf *nodeFlags, f *execFlags, args []string) (*launch.Plan, error) {
	fl := cmd.Flags()
	if len(args) == 0 {
		return nil, errors.New("no command: usage: gpuaffinity exec [flags] -- CMD [ARGS...]")
	}
	mode, err := binding.ParseMode(f.mode)
	if err != nil {
		return nil, fmt.Errorf("--mode: %w", err)
	}
	if f.ranksPerGPU < 1 {
		return nil, fmt.Errorf("--ranks-per-gpu %d: want 1 or more", f.ranksPerGPU)
	}
	perGPU := f.ranksPerGPU
	if !fl.Changed("ranks-per-gpu") {
		perGPU = 0 // launch's default: 1, or one rank per compute partition
	}
	req := launch.Request{Argv: args, Mode: mode, RanksPerGPU: perGPU, Policy: bind.PolicyBind,
		Environ: os.Environ(), LookPath: bind.LookPath, NoMNNVL: f.noMNNVL}
	switch {
	case f.preferred:
		req.Policy = bind.PolicyPreferred
	case f.noMem:
		req.Policy = bind.PolicyNone
	}
	cpusGiven, memsGiven := fl.Changed("cpus"), fl.Changed("mems")
	if cpusGiven {
		if req.CPUs, err = parseSet("--cpus", f.cpus, "CPU list"); err != nil {
			return nil, err
		}
	}
	if memsGiven {
		if req.Mems, err = parseSet("--mems", f.mems, "NUMA node list"); err != nil {
			return nil, err
		}
	}
	// The binding is fully given when nothing has to come from the map.
	given := cpusGiven && (memsGiven || req.Policy == bind.PolicyNone)

	// --root and --demo describe another machine's files: their CPUs and
	// nodes are not this machine's to bind to.
	live := rootfs.IsLive(g.root) && nf.demo == ""
	if !live && !f.dryRun && !given {
		what := "--root " + g.root
		if nf.demo != "" {
			what = "--demo " + nf.demo
		}
		return nil, fmt.Errorf("%s describes another machine: its CPUs and NUMA nodes are not this one's to bind to; give --cpus and --mems (or --no-mem), or --dry-run to see the plan", what)
	}

	if fl.Changed("local-rank") {
		if f.localRank < 0 {
			return nil, fmt.Errorf("--local-rank %d: want 0 or more", f.localRank)
		}
		r := f.localRank
		req.Rank, req.RankSource = &r, "--local-rank"
	} else if req.Rank, req.RankSource, err = launch.LocalRankFromEnv(os.Getenv); err != nil {
		return nil, err
	}

	n, err := nf.discover(cmd, g)
	defer nf.cleanup()
	var node *topology.Node
	var early []string
	if err != nil {
		if !given || !live {
			return nil, err
		}
		early = append(early, fmt.Sprintf("discovery failed, binding as --cpus/--mems say with no environment: %v", err))
	} else {
		node = &n
	}

	// Check against the machine the binding is for: this one, unless a dry
	// run looks at another machine's files.
	if live || !f.dryRun {
		if req.Allowed, err = bind.AllowedCPUs(); err != nil {
			return nil, err
		}
		if req.Nodes, err = bind.OnlineNodes(); err != nil {
			return nil, err
		}
	} else {
		req.Allowed = n.CPU.Allowed
		for _, nn := range n.NUMANodes {
			req.Nodes = req.Nodes.Union(cpuset.Of(nn.ID))
		}
	}
	p, err := launch.Build(node, req)
	if err != nil {
		return nil, err
	}
	p.Warnings = append(early, p.Warnings...)
	return p, nil
}

// parseSet reads a non-empty CPU or node list flag.
func parseSet(flag, v, what string) (cpuset.Set, error) {
	s, err := cpuset.Parse(v)
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("%s: %w", flag, err)
	}
	if s.IsEmpty() {
		return cpuset.Set{}, fmt.Errorf("%s %q: empty %s", flag, v, what)
	}
	return s, nil
}

func dedupe(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
