// Package launch builds what `gpuaffinity exec` does for one local rank as
// a value, Plan: the rank and its GPU (topology's one selector), its CPUs
// and memory nodes (package binding's map), the memory policy, the
// environment `gpuaffinity env` gives the rank (package nccl) and the
// command. `exec --dry-run` prints the plan and `exec` applies the same
// value (internal/bind); `cpumap` prints the map the plan takes its
// binding from. Build does no I/O: the caller hands in this process's
// environment, allowed CPUs, NUMA nodes and command lookup.
package launch

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/binding"
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/bind"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// ErrRequest is wrapped when the request cannot give a binding.
var ErrRequest = errors.New("cannot plan exec")

// Request is what the plan is built from.
type Request struct {
	// Argv is the command and its arguments; Argv[0] is looked up with
	// LookPath in the PATH of the merged environment.
	Argv []string
	// Rank is the local rank (nil: none); RankSource names where it came
	// from ("--local-rank", "LOCAL_RANK", ...).
	Rank       *int
	RankSource string
	// Mode and RanksPerGPU select the binding map (package binding);
	// RanksPerGPU 0 is nccl.RanksPerGPU's default (1, or the compute
	// partitions per GPU of a partitioned AMD node).
	Mode        binding.Mode
	RanksPerGPU int
	// Policy is the memory policy (bind.PolicyBind unless asked).
	Policy bind.Policy
	// CPUs and Mems, when not empty, replace the map's (--cpus, --mems).
	CPUs, Mems cpuset.Set
	// Environ is this process's environment ("NAME=value"): the command
	// gets it with the rank's variables added; CUDA_VISIBLE_DEVICES in
	// it selects the rank's GPU, and platform settings already in it keep
	// their value.
	Environ []string
	// Allowed and Nodes are the CPUs this process may run on and the NUMA
	// nodes of the machine the binding is for (bind.AllowedCPUs and
	// bind.OnlineNodes on the live host; the node's own for a dry run of
	// another machine's files).
	Allowed, Nodes cpuset.Set
	// LookPath resolves Argv[0] in a PATH (bind.LookPath); nil leaves the
	// command unresolved.
	LookPath func(file, path string) (string, error)
	// NoMNNVL sets NCCL_MNNVL_ENABLE=0 (exec --no-mnnvl, as env's).
	NoMNNVL bool
}

// Plan is what exec applies and what --dry-run prints.
type Plan struct {
	Rank       *int
	RankSource string
	GPU        *int
	Mode       binding.Mode // "" when the map was not used
	CPUs       cpuset.Set
	CPUsFrom   string
	Mems       cpuset.Set
	MemsFrom   string
	Policy     bind.Policy
	Vars       []nccl.Var
	Argv       []string
	Path       string // the resolved command; "" when not found
	PathErr    error
	Env        []string
	Warnings   []string
}

func (p *Plan) warn(format string, args ...any) {
	p.Warnings = append(p.Warnings, fmt.Sprintf(format, args...))
}

func (p *Plan) rankString() string {
	if p.Rank == nil {
		return "none"
	}
	return strconv.Itoa(*p.Rank)
}

// Build plans exec for node n (nil when discovery failed: then only
// --cpus/--mems can bind, with no environment).
func Build(n *topology.Node, req Request) (*Plan, error) {
	if len(req.Argv) == 0 {
		return nil, fmt.Errorf("%w: no command", ErrRequest)
	}
	if req.RanksPerGPU < 1 {
		// Unset: one rank per compute partition on a partitioned AMD
		// node (nccl.RanksPerGPU), else one per GPU.
		req.RanksPerGPU = 1
		if n != nil {
			lookup := envLookup(req.Environ)
			er := nccl.EnvRequest{Preset: lookup}
			if cvd, ok := lookup("CUDA_VISIBLE_DEVICES"); ok {
				er.CUDAVisibleDevices = &cvd
			}
			req.RanksPerGPU = nccl.RanksPerGPU(*n, er)
		}
	}
	p := &Plan{Argv: req.Argv, Policy: req.Policy, Rank: req.Rank, RankSource: req.RankSource}
	cpusGiven, memsGiven := !req.CPUs.IsEmpty(), !req.Mems.IsEmpty()
	if cpusGiven {
		p.CPUs, p.CPUsFrom = req.CPUs, "--cpus"
	}
	if memsGiven {
		p.Mems, p.MemsFrom = req.Mems, "--mems"
	}
	if n != nil {
		if err := p.fromMap(*n, req, cpusGiven, memsGiven); err != nil {
			return nil, err
		}
	}
	if p.CPUs.IsEmpty() {
		return nil, fmt.Errorf("%w: local rank %s: no CPU to bind to; give --cpus", ErrRequest, p.rankString())
	}
	if n != nil && p.Mode == "" && !memsGiven && p.Policy != bind.PolicyNone {
		// No map entry (no rank, or no GPU for it): the nodes of --cpus.
		p.Mems, p.MemsFrom = cpuNodes(*n, p.CPUs), "NUMA nodes of --cpus"
	}
	if p.Policy != bind.PolicyNone && p.Mems.IsEmpty() {
		p.warn("local rank %s: its NUMA node is unknown: no memory policy set (give --mems)", p.rankString())
		p.Policy = bind.PolicyNone
	}
	if p.Policy == bind.PolicyNone {
		p.Mems, p.MemsFrom = cpuset.Set{}, ""
	}
	if bad := p.CPUs.Difference(req.Allowed); !bad.IsEmpty() {
		return nil, fmt.Errorf("%w: CPUs %s (of %s %s) are not in this process's allowed set %s (Cpus_allowed_list): refusing to bind to them",
			ErrRequest, bad, p.CPUsFrom, p.CPUs, orNone(req.Allowed))
	}
	if bad := p.Mems.Difference(req.Nodes); !bad.IsEmpty() {
		return nil, fmt.Errorf("%w: NUMA node(s) %s (of %s %s) do not exist: this machine has node(s) %s",
			ErrRequest, bad, p.MemsFrom, p.Mems, orNone(req.Nodes))
	}
	p.Env = MergeEnv(req.Environ, p.Vars)
	if req.LookPath != nil {
		p.Path, p.PathErr = req.LookPath(req.Argv[0], envValue(p.Env, "PATH"))
	}
	return p, nil
}

// fromMap maps the rank to its GPU and environment (nccl.BuildEnv, as env
// does) and to its entry of the binding map (binding.Map.ForRank, as
// cpumap does), filling what the flags left open.
func (p *Plan) fromMap(n topology.Node, req Request, cpusGiven, memsGiven bool) error {
	// Only the CPUs must come from the map; nodes missing with --cpus are
	// those of the CPUs.
	needMap := !cpusGiven
	if p.Rank == nil {
		if needMap {
			return fmt.Errorf("%w: no local rank (--local-rank, %s): give one, or --cpus", ErrRequest, strings.Join(LocalRankVars, ", "))
		}
		return nil // bind as given, no environment
	}
	rank := *p.Rank
	lookup := envLookup(req.Environ)
	cvd, hasCVD := lookup("CUDA_VISIBLE_DEVICES")
	envReq := nccl.EnvRequest{Rank: &rank, RanksPerGPU: req.RanksPerGPU, TopoFile: n.TopoFile, Preset: lookup, NoMNNVL: req.NoMNNVL}
	if hasCVD {
		envReq.CUDAVisibleDevices = &cvd
	}
	e, err := nccl.BuildEnv(n, envReq)
	if err != nil {
		if needMap {
			return fmt.Errorf("local rank %d: %w", rank, err)
		}
		p.warn("local rank %d: %v: no environment added, binding as --cpus/--mems say", rank, err)
		return nil
	}
	p.Vars, p.GPU = e.Vars, e.GPU
	p.Warnings = append(p.Warnings, e.Warnings...)

	m, err := binding.Compute(n, binding.Options{Mode: req.Mode, RanksPerGPU: req.RanksPerGPU})
	if err != nil {
		if needMap {
			return fmt.Errorf("binding map: %w", err)
		}
		p.warn("binding map: %v", err)
		return nil
	}
	sel, err := topology.ProcessGPUs(n, envReq.CUDAVisibleDevices, lookup)
	if err == nil {
		var r binding.Rank
		if r, err = m.ForRank(n, sel, rank); err == nil {
			p.Mode = r.Mode
			p.Warnings = append(p.Warnings, r.Warnings...)
			if !cpusGiven {
				p.CPUs, p.CPUsFrom = r.CPUs, string(r.Mode)+" map"
			}
			if !memsGiven {
				p.Mems, p.MemsFrom = r.Mems, string(r.Mode)+" map"
			}
		}
	}
	if err != nil {
		if needMap {
			return fmt.Errorf("local rank %d: %w", rank, err)
		}
		p.warn("local rank %d: %v", rank, err)
		return nil
	}
	// Wrappers read GPUAFFINITY_CPUS/NUMA: under exec they describe the
	// binding in force, not just the GPU's locality that env reports.
	for i := range p.Vars {
		switch p.Vars[i].Name {
		case "GPUAFFINITY_CPUS":
			p.Vars[i].Value = p.CPUs.String()
		case "GPUAFFINITY_NUMA":
			if !p.Mems.IsEmpty() {
				p.Vars[i].Value = p.Mems.String()
			}
		}
	}
	return nil
}

// MergeEnv returns environ with vars set: earlier entries of the same
// names (and duplicates of them) dropped, vars appended in order.
func MergeEnv(environ []string, vars []nccl.Var) []string {
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

// envLookup answers os.LookupEnv's question from an environ list: the
// first entry of a name, as getenv(3) reads it.
func envLookup(environ []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, kv := range environ {
			if k, v, ok := strings.Cut(kv, "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	}
}

// envValue is the value of name in env (the last entry wins, as getenv
// reads the first but MergeEnv leaves one).
func envValue(env []string, name string) string {
	val := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			val = v
		}
	}
	return val
}

// WriteDryRun prints the plan as `exec --dry-run` shows it.
func WriteDryRun(w io.Writer, p *Plan) error {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%-8s %s\n", k+":", v) }
	rank := "none"
	if p.Rank != nil {
		rank = strconv.Itoa(*p.Rank)
		if p.RankSource != "" {
			rank += " (" + p.RankSource + ")"
		}
	}
	line("rank", rank)
	gpu := "none"
	if p.GPU != nil {
		gpu = strconv.Itoa(*p.GPU)
	}
	line("gpu", gpu)
	if p.Mode != "" {
		line("mode", string(p.Mode))
	}
	line("cpus", p.CPUs.String()+" ("+p.CPUsFrom+")")
	if p.Policy == bind.PolicyNone {
		line("mems", "none")
	} else {
		line("mems", p.Mems.String()+" ("+p.MemsFrom+")")
	}
	line("policy", p.Policy.String())
	line("command", ShellJoin(p.Argv))
	switch {
	case p.PathErr != nil:
		line("path", "not found: "+p.PathErr.Error())
	case p.Path == "":
		line("path", "not looked up")
	default:
		line("path", p.Path)
	}
	if len(p.Vars) == 0 {
		line("env", "none added")
	} else {
		line("env", strconv.Itoa(len(p.Vars))+" variable(s) added")
		for _, v := range p.Vars {
			fmt.Fprintf(&b, "  %s=%s\n", v.Name, ShellQuote(v.Value))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ShellQuote leaves a word of safe bytes as it is and single-quotes
// anything else.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.,:/=@%+^", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellJoin quotes every word of argv (ShellQuote) and joins them.
func ShellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = ShellQuote(a)
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
