package health

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/audit"
	"github.com/gpuaffinity/gpuaffinity/internal/clip"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Bounds of jobs.aligned's result: a node may run hundreds of GPU
// processes, and the reason goes into a Slurm drain reason, an NHC line
// and an NPD message (each clipped again to its own limit).
const (
	maxJobsReason  = 480 // bytes of Reason
	maxJobsDetails = 32  // lines of Details
	maxJobsPIDs    = 8   // pids named in Reason per verdict
)

// checkJobs holds the processes running on the selected GPUs to their
// GPUs' local CPUs, by package audit (the verdicts of `gpuaffinity
// audit`). The rule: a misaligned process (none of its allowed CPUs is
// local to its GPU) fails; partly, unbound and unknown ones warn, as
// does a GPU source that could not be listed; else pass. Unbound is the
// default of a job launched without CPU binding, so it never fails: a
// site that drains on it would drain most nodes of most clusters.
// Environments are not read (the verdict is about CPUs and memory).
// It runs only with Options.Jobs (`check --jobs`).
func checkJobs(_ context.Context, in *Input) Result {
	if !in.Jobs {
		return skip("not run: the running jobs are checked only with --jobs (Options.Jobs)")
	}
	if len(in.gpus) == 0 {
		return skip("no GPU")
	}
	rep, err := readJobs(in.Root, in.Node)
	if err != nil {
		return Result{Verdict: Warn, Reason: "could not audit the GPU processes: " + err.Error(),
			Hint: "run as root on the host (its /proc and PID namespace)"}
	}
	return judgeJobs(rep, in.gpus)
}

// readJobs audits the processes on the node's GPUs under root: NVML's
// process lists (the replay's under a root other than /) and KFD's
// per-process entries, then each process's /proc.
func readJobs(root string, n topology.Node) (audit.Report, error) {
	r, err := rootfs.Open(root)
	if err != nil {
		return audit.Report{}, fmt.Errorf("%s: %w", root, err)
	}
	defer r.Close()
	lib, _, err := nvml.OpenRoot(r)
	if err != nil {
		return audit.Report{}, err
	}
	uses, unread := audit.Uses(n, r, lib)
	return audit.Run(n, r, uses, unread, audit.Options{NoEnv: true}), nil
}

// judgeJobs is jobs.aligned's verdict on an audit of the GPUs gpus.
func judgeJobs(rep audit.Report, gpus []topology.GPU) Result {
	sel := map[int]bool{}
	for _, g := range gpus {
		sel[g.Index] = true
	}
	by := map[audit.Verdict][]audit.Process{}
	var n int
	for _, p := range rep.Processes {
		if !slices.ContainsFunc(p.GPUs, func(i int) bool { return sel[i] }) {
			continue // on GPUs outside the selection
		}
		n++
		by[p.Verdict] = append(by[p.Verdict], p)
	}
	var details []string
	for _, v := range []audit.Verdict{audit.Misaligned, audit.Partly, audit.Unbound, audit.Unknown} {
		for _, p := range by[v] {
			details = append(details, fmt.Sprintf("%s: %s: %s", who(p), v, p.Reason))
		}
	}
	for _, u := range rep.Unread {
		details = append(details, "not listed: "+u)
	}
	r := Result{Verdict: Pass}
	switch {
	case len(by[audit.Misaligned]) > 0:
		p := by[audit.Misaligned][0]
		r.Verdict = Fail
		r.Reason = fmt.Sprintf("%d of %s misaligned (%s): %s: %s",
			len(by[audit.Misaligned]), gpuProcs(n), pids(by[audit.Misaligned]), who(p), p.Reason)
		r.Hint = "bind the job to its GPU's CPUs (srun --cpu-bind, numactl, gpuaffinity exec; `gpuaffinity audit` shows each process); " +
			"drain on this only where every job is expected to be bound (docs/health.md)"
	case len(by[audit.Partly]) > 0 || len(by[audit.Unbound]) > 0:
		var parts []string
		for _, v := range []audit.Verdict{audit.Partly, audit.Unbound} {
			if ps := by[v]; len(ps) > 0 {
				parts = append(parts, fmt.Sprintf("%d %s (%s)", len(ps), v, pids(ps)))
			}
		}
		first := append(slices.Clone(by[audit.Partly]), by[audit.Unbound]...)[0]
		r.Verdict = Warn
		r.Reason = fmt.Sprintf("%s, %s: %s: %s", gpuProcs(n), strings.Join(parts, ", "), who(first), first.Reason)
		r.Hint = "bind each to its GPU's CPUs (srun --cpu-bind, numactl, gpuaffinity exec)"
		if len(by[audit.Unbound]) > 0 {
			r.Hint = "unbound is the default of a job launched without CPU binding (a container, torchrun, srun without --cpu-bind) and warns only; " + r.Hint
		}
	case len(by[audit.Unknown]) > 0 || len(rep.Unread) > 0:
		r.Verdict = Warn
		if ps := by[audit.Unknown]; len(ps) > 0 {
			r.Reason = fmt.Sprintf("%d of %s could not be judged (%s): %s: %s", len(ps), gpuProcs(n), pids(ps), who(ps[0]), ps[0].Reason)
		} else {
			r.Reason = fmt.Sprintf("could not list every GPU's processes (%s judged): %s", gpuProcs(n), rep.Unread[0])
		}
		r.Hint = "run as root in the host's PID namespace; a process that ended meanwhile is gone"
	case n == 0:
		r.Reason = "no GPU processes running"
	default:
		r.Reason = gpuProcs(n) + ", all on their GPUs' local CPUs"
	}
	if gaps := len(by[audit.Unknown]) + len(rep.Unread); gaps > 0 && (r.Verdict == Fail || len(by[audit.Partly])+len(by[audit.Unbound]) > 0) {
		// The gaps, said where the reason is about another verdict.
		r.Reason += fmt.Sprintf(" (also %d not judged or not listed: see details)", gaps)
	}
	r.Reason = clip.Bytes(r.Reason, maxJobsReason)
	if r.Verdict != Pass && len(details) > 1 {
		if len(details) > maxJobsDetails {
			details = append(details[:maxJobsDetails-1], fmt.Sprintf("and %d more (gpuaffinity audit lists them all)", len(details)-maxJobsDetails+1))
		}
		r.Details = details
	}
	return r
}

// who names a process: pid, command, user, Slurm step or pod, GPUs.
func who(p audit.Process) string {
	s := fmt.Sprintf("pid %d", p.PID)
	if p.Command != "" {
		s += " " + p.Command
	}
	var in []string
	if p.User != "" {
		in = append(in, p.User)
	}
	if p.Job != nil {
		in = append(in, "Slurm job "+p.Job.ID+"."+p.Job.Step)
	}
	if p.Pod != nil {
		in = append(in, "pod "+p.Pod.UID)
	}
	if len(p.GPUs) == 1 {
		in = append(in, fmt.Sprintf("GPU %d", p.GPUs[0]))
	} else {
		in = append(in, "GPUs "+joinInts(p.GPUs))
	}
	return s + " (" + strings.Join(in, ", ") + ")"
}

// pids lists the processes' pids, at most maxJobsPIDs of them.
func pids(ps []audit.Process) string {
	var s []string
	for i, p := range ps {
		if i == maxJobsPIDs {
			s = append(s, fmt.Sprintf("and %d more", len(ps)-i))
			break
		}
		s = append(s, fmt.Sprint(p.PID))
	}
	return "pid " + strings.Join(s, ", ")
}

// gpuProcs is "1 GPU process", "3 GPU processes".
func gpuProcs(n int) string {
	if n == 1 {
		return "1 GPU process"
	}
	return fmt.Sprintf("%d GPU processes", n)
}
