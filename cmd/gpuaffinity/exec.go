package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/binding"
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/bind"
	"github.com/gpuaffinity/gpuaffinity/nccl"
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
	dryRun      bool
}

// execPlan is what exec applies, and what --dry-run prints.
type execPlan struct {
	rank       *int
	rankSource string
	gpu        *int
	mode       binding.Mode // "" when the map was not used
	cpus       cpuset.Set
	cpusFrom   string
	mems       cpuset.Set
	memsFrom   string
	policy     bind.Policy
	vars       []nccl.Var
	argv       []string
	path       string // resolved command; "" when not found
	pathErr    error
	env        []string
	warnings   []string
}

func (p *execPlan) warn(format string, args ...any) {
	p.warnings = append(p.warnings, fmt.Sprintf(format, args...))
}

func (p *execPlan) rankString() string {
	if p.rank == nil {
		return "none"
	}
	return strconv.Itoa(*p.rank)
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
			for _, w := range dedupe(p.warnings) {
				fmt.Fprintln(stderr, "gpuaffinity: warning:", w)
			}
			if f.dryRun {
				return writeExecPlan(cmd.OutOrStdout(), p)
			}
			if p.pathErr != nil {
				code := execExitCannotRun
				if errors.Is(p.pathErr, bind.ErrNotFound) || errors.Is(p.pathErr, os.ErrNotExist) {
					code = execExitNotFound
				}
				return exitError{code: code, err: p.pathErr}
			}
			err = bind.Exec(bind.Plan{CPUs: p.cpus, Mems: p.mems, Policy: p.policy, Path: p.path, Argv: p.argv, Env: p.env},
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
	fl.IntVar(&f.localRank, "local-rank", 0, "local rank (default: from LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, PMI_LOCAL_RANK)")
	fl.StringVar(&f.mode, "mode", string(binding.ModeExclusive), "binding mode: node (the GPU's NUMA node), socket, exclusive (the node's cores split among its GPUs' ranks)")
	fl.IntVar(&f.ranksPerGPU, "ranks-per-gpu", 1, "local ranks per GPU: rank r drives GPU r / K")
	fl.BoolVar(&f.membind, "membind", false, "memory policy MPOL_BIND to the rank's NUMA node(s) (the default)")
	fl.BoolVar(&f.preferred, "preferred", false, "memory policy MPOL_PREFERRED: the rank's node(s) first, others when full")
	fl.BoolVar(&f.noMem, "no-mem", false, "set no memory policy (first-touch allocation near the bound CPUs)")
	fl.StringVar(&f.cpus, "cpus", "", `CPUs to bind to instead of the map's ("0-7,16"; numactl --physcpubind)`)
	fl.StringVar(&f.mems, "mems", "", `NUMA nodes for the memory policy instead of the map's ("0"; numactl --membind)`)
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the plan (rank, GPU, CPUs, nodes, policy, environment, command) and run nothing")
	cmd.MarkFlagsMutuallyExclusive("membind", "preferred", "no-mem")
	cmd.MarkFlagsMutuallyExclusive("mems", "no-mem")
	return cmd
}

// planExec validates the flags, discovers the node and builds the plan.
func planExec(cmd *cobra.Command, g *globals, nf *nodeFlags, f *execFlags, args []string) (*execPlan, error) {
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
	p := &execPlan{argv: args, policy: bind.PolicyBind}
	switch {
	case f.preferred:
		p.policy = bind.PolicyPreferred
	case f.noMem:
		p.policy = bind.PolicyNone
	}
	cpusGiven, memsGiven := fl.Changed("cpus"), fl.Changed("mems")
	if cpusGiven {
		s, err := cpuset.Parse(f.cpus)
		if err != nil {
			return nil, fmt.Errorf("--cpus: %w", err)
		}
		if s.IsEmpty() {
			return nil, fmt.Errorf("--cpus %q: empty CPU list", f.cpus)
		}
		p.cpus, p.cpusFrom = s, "--cpus"
	}
	if memsGiven {
		s, err := cpuset.Parse(f.mems)
		if err != nil {
			return nil, fmt.Errorf("--mems: %w", err)
		}
		if s.IsEmpty() {
			return nil, fmt.Errorf("--mems %q: empty NUMA node list", f.mems)
		}
		p.mems, p.memsFrom = s, "--mems"
	}
	// The binding is fully given when nothing has to come from the map.
	given := cpusGiven && (memsGiven || p.policy == bind.PolicyNone)

	// --root and --demo describe another machine's files: their CPUs and
	// nodes are not this machine's to bind to.
	live := filepath.Clean(g.root) == "/" && nf.demo == ""
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
		p.rank, p.rankSource = &r, "--local-rank"
	} else {
		r, source, err := nccl.LocalRankFromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		p.rank, p.rankSource = r, source
	}

	n, err := nf.discover(cmd, g)
	defer nf.cleanup()
	haveNode := err == nil
	if err != nil {
		if !given || !live {
			return nil, err
		}
		p.warn("discovery failed, binding as --cpus/--mems say with no environment: %v", err)
	}
	if haveNode {
		if err := p.fromMap(n, f, mode, cpusGiven, memsGiven); err != nil {
			return nil, err
		}
	}

	if p.cpus.IsEmpty() {
		return nil, fmt.Errorf("local rank %s: no CPU to bind to; give --cpus", p.rankString())
	}
	if haveNode && p.mode == "" && !memsGiven && p.policy != bind.PolicyNone {
		// No map entry (no rank, or no GPU for it): the nodes of --cpus.
		p.mems, p.memsFrom = cpuNodes(n, p.cpus), "NUMA nodes of --cpus"
	}
	if p.policy != bind.PolicyNone && p.mems.IsEmpty() {
		p.warn("local rank %s: its NUMA node is unknown: no memory policy set (give --mems)", p.rankString())
		p.policy = bind.PolicyNone
	}
	if p.policy == bind.PolicyNone {
		p.mems, p.memsFrom = cpuset.Set{}, ""
	}

	// Check against the machine the binding is for: this one, unless a dry
	// run looks at another machine's files.
	var allowed, nodes cpuset.Set
	if live || !f.dryRun {
		if allowed, err = bind.AllowedCPUs(); err != nil {
			return nil, err
		}
		if nodes, err = bind.OnlineNodes(); err != nil {
			return nil, err
		}
	} else {
		allowed = n.CPU.Allowed
		for _, nn := range n.NUMANodes {
			nodes = nodes.Union(cpuset.Of(nn.ID))
		}
	}
	if bad := p.cpus.Difference(allowed); !bad.IsEmpty() {
		return nil, fmt.Errorf("CPUs %s (of %s %s) are not in this process's allowed set %s (Cpus_allowed_list): refusing to bind to them",
			bad, p.cpusFrom, p.cpus, orNone(allowed))
	}
	if bad := p.mems.Difference(nodes); !bad.IsEmpty() {
		return nil, fmt.Errorf("NUMA node(s) %s (of %s %s) do not exist: this machine has node(s) %s",
			bad, p.memsFrom, p.mems, orNone(nodes))
	}

	p.env = mergeEnv(os.Environ(), p.vars)
	p.path, p.pathErr = bind.LookPath(args[0], envValue(p.env, "PATH"))
	return p, nil
}

// fromMap maps the rank to its GPU and environment (nccl.BuildEnv, as env
// does) and to its entry of the binding map, filling what the flags left
// open.
func (p *execPlan) fromMap(n topology.Node, f *execFlags, mode binding.Mode, cpusGiven, memsGiven bool) error {
	// Only the CPUs must come from the map; nodes missing with --cpus are
	// those of the CPUs (cpuNodes).
	needMap := !cpusGiven
	if p.rank == nil {
		if needMap {
			return fmt.Errorf("no local rank (--local-rank, %s): give one, or --cpus", strings.Join(nccl.LocalRankVars, ", "))
		}
		return nil // bind as given, no environment
	}
	rank, k := *p.rank, f.ranksPerGPU
	ordinal := rank / k // the rank's GPU among the visible ones
	req := nccl.EnvRequest{Rank: &ordinal, TopoFile: n.TopoFile, Preset: os.LookupEnv}
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		req.CUDAVisibleDevices = &v
	}
	e, err := nccl.BuildEnv(n, req)
	if err != nil {
		if needMap {
			return fmt.Errorf("local rank %d: %w", rank, err)
		}
		p.warn("local rank %d: %v: no environment added, binding as --cpus/--mems say", rank, err)
		return nil
	}
	p.vars, p.gpu = e.Vars, e.GPU
	p.warnings = append(p.warnings, e.Warnings...)

	m, err := binding.Compute(n, binding.Options{Mode: mode, RanksPerGPU: k})
	if err != nil {
		if needMap {
			return fmt.Errorf("binding map: %w", err)
		}
		p.warn("binding map: %v", err)
		return nil
	}
	// The k ranks of a GPU are its slots 0..k-1 in the map's rank order.
	slot, seen := rank%k, 0
	var r *binding.Rank
	for i := range m.Ranks {
		if m.Ranks[i].GPU == *e.GPU {
			if seen == slot {
				r = &m.Ranks[i]
				break
			}
			seen++
		}
	}
	if r == nil {
		if needMap {
			return fmt.Errorf("local rank %d: the %s binding map has no slot %d for GPU %d", rank, mode, slot, *e.GPU)
		}
		return nil
	}
	p.mode = r.Mode
	p.warnings = append(p.warnings, r.Warnings...)
	if !cpusGiven {
		p.cpus, p.cpusFrom = r.CPUs, string(r.Mode)+" map"
	}
	if !memsGiven {
		p.mems, p.memsFrom = r.Mems, string(r.Mode)+" map"
	}
	// Wrappers read GPUAFFINITY_CPUS/NUMA: under exec they describe the
	// binding in force, not just the GPU's locality that env reports.
	for i := range p.vars {
		switch p.vars[i].Name {
		case "GPUAFFINITY_CPUS":
			p.vars[i].Value = p.cpus.String()
		case "GPUAFFINITY_NUMA":
			if !p.mems.IsEmpty() {
				p.vars[i].Value = p.mems.String()
			}
		}
	}
	return nil
}

// mergeEnv returns environ with vars set: earlier entries of the same
// names (and duplicates of them) dropped, vars appended in order.
func mergeEnv(environ []string, vars []nccl.Var) []string {
	set := make(map[string]bool, len(vars))
	for _, v := range vars {
		set[v.Name] = true
	}
	out := make([]string, 0, len(environ)+len(vars))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !set[name] {
			out = append(out, kv)
		}
	}
	for _, v := range vars {
		out = append(out, v.Name+"="+v.Value)
	}
	return out
}

// envValue is the value of name in env (the last entry wins, as getenv
// reads the first but mergeEnv leaves one).
func envValue(env []string, name string) string {
	val := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			val = v
		}
	}
	return val
}

// writeExecPlan prints the --dry-run plan.
func writeExecPlan(w io.Writer, p *execPlan) error {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%-8s %s\n", k+":", v) }
	rank := "none"
	if p.rank != nil {
		rank = strconv.Itoa(*p.rank)
		if p.rankSource != "" {
			rank += " (" + p.rankSource + ")"
		}
	}
	line("rank", rank)
	gpu := "none"
	if p.gpu != nil {
		gpu = strconv.Itoa(*p.gpu)
	}
	line("gpu", gpu)
	if p.mode != "" {
		line("mode", string(p.mode))
	}
	line("cpus", p.cpus.String()+" ("+p.cpusFrom+")")
	if p.policy == bind.PolicyNone {
		line("mems", "none")
	} else {
		line("mems", p.mems.String()+" ("+p.memsFrom+")")
	}
	line("policy", p.policy.String())
	line("command", shellJoin(p.argv))
	if p.pathErr != nil {
		line("path", "not found: "+p.pathErr.Error())
	} else {
		line("path", p.path)
	}
	if len(p.vars) == 0 {
		line("env", "none added")
	} else {
		line("env", strconv.Itoa(len(p.vars))+" variable(s) added")
		for _, v := range p.vars {
			fmt.Fprintf(&b, "  %s=%s\n", v.Name, shellQuote(v.Value))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shellQuote leaves a word of safe bytes as it is and single-quotes
// anything else.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.,:/=@%+^", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// cpuNodes returns the NUMA nodes holding any of cpus.
func cpuNodes(n topology.Node, cpus cpuset.Set) cpuset.Set {
	var out []int
	for _, nn := range n.NUMANodes {
		if !nn.CPUs.Intersect(cpus).IsEmpty() {
			out = append(out, nn.ID)
		}
	}
	return cpuset.Of(out...)
}

func orNone(s cpuset.Set) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
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
