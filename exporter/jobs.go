package exporter

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/audit"
	"github.com/gpuaffinity/gpuaffinity/internal/clip"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The jobs collector (Options.Jobs, the agent's --collector.jobs): the
// processes running on the GPUs now, each held to its GPU's locality by
// package audit (the verdicts of `gpuaffinity audit`, docs/audit.md),
// counted per GPU and verdict; with Options.JobsInfo, one info series
// per GPU and Slurm job step or pod. It is off by default: it reads
// every GPU process's /proc entries at each scrape, and sees the host's
// processes only from the host's PID namespace.
//
// What a scrape reads is bounded (docs/metrics.md, "Jobs"): the GPU
// sources' lists (NVML's per GPU, KFD's proc directory), then for at most
// maxJobProcesses processes their status, cgroup and task/ listing, and
// at most maxJobThreadReads threads' status files over all of them (audit
// caps each process at 4096). Never environ (environments hold secrets;
// the env check stays in the audit command), never numa_maps, never
// etc/passwd (the series name no user).

// CollectorJobs is the name of the jobs collector in
// gpuaffinity_scrape_collector_* series. Unlike the collectors of
// CollectorNames it is off unless Options.Jobs is set, so it is not one
// of them (--collector.disable-defaults does not touch it).
const CollectorJobs = "jobs"

// Bounds of one scrape's audit.
const (
	// maxJobProcesses bounds the processes whose /proc entries a scrape
	// reads; the GPU processes beyond it (by PID) are counted as unknown
	// and the collector fails, saying so.
	maxJobProcesses = 1024
	// maxJobThreadReads bounds the threads' status files a scrape reads
	// over all processes (audit.Options.ThreadReads).
	maxJobThreadReads = 16384
	// maxJobInfoPerGPU bounds the job_info series of one GPU; the jobs
	// and pods beyond it (in label order) are one series with job
	// "other" and the worst of their verdicts.
	maxJobInfoPerGPU = 16
	// maxJobLabel bounds a job, step or pod label value: a Slurm job id
	// is a 32-bit number (ten digits), a step a number or batch, extern,
	// interactive, a pod UID 36 characters.
	maxJobLabel = 40
)

// verdictOrder are the verdicts, in the order their series are sent.
var verdictOrder = []audit.Verdict{audit.Aligned, audit.Partly, audit.Misaligned, audit.Unbound, audit.Unknown}

var (
	descGPUProcesses = newGPUDesc("gpu_processes",
		"GPU processes using the GPU now, by audit verdict (aligned, partly, misaligned, unbound, unknown; docs/audit.md). All five are sent for a GPU whose process list was read whole; where it was not (gpu_processes_listed 0), only the verdicts with processes.",
		"verdict")
	descGPUProcessesListed = newGPUDesc("gpu_processes_listed",
		"1 when the GPU's process list was read whole at this scrape (NVML's lists, KFD's entries); 0 when not (NVML unavailable, ERROR_NO_PERMISSION, KFD unreadable): its gpu_processes are then a lower bound, never 0.")
	descJobInfo = newGPUDesc("job_info",
		"1 per GPU and Slurm job step (job, step) or Kubernetes pod (pod UID) with a process on the GPU; verdict is the worst of its processes there (misaligned, partly, unbound, unknown, aligned). Only with --collector.jobs.info.",
		"job", "step", "pod", "verdict")
)

// jobsCollector audits the GPU processes under fs at each scrape, and
// the fabric balance for them (jobsfabric.go).
type jobsCollector struct {
	fs     *rootfs.Root
	nvml   func() gonvml.Interface
	labels *gpuLabelCache
	info   bool // send job_info
	fabric *jobsFabric
}

// hasGPU reports whether the last discovery found a GPU: the jobs
// collector runs only there (its series are per GPU).
func hasGPU(st *State) bool { return st.Node != nil && len(st.Node.GPUs) > 0 }

// collect lists the GPU processes once (audit.List: NVML and KFD), then
// renders their verdicts and the fabric balance for the GPUs they keep
// busy. NVML's read cannot be interrupted; ctx is consulted between the
// listing and the rest.
func (c *jobsCollector) collect(ctx context.Context, st *State, s *sink) error {
	n := st.Node
	if n == nil {
		return errNoNode
	}
	gpus := c.labels.get(n)
	var lib gonvml.Interface
	if c.nvml != nil {
		lib = c.nvml()
	}
	l := audit.List(*n, c.fs, lib)
	if err := ctx.Err(); err != nil {
		return err
	}
	verr := jobVerdictMetrics(n, c.fs, l, gpus, c.info, s)
	return errors.Join(verr, c.fabric.collectFabric(ctx, n, l.Uses, st.ports, s))
}

// jobVerdictMetrics audits the GPU processes of one scrape's listing l (one
// audit.List per scrape; l.Uses is what the fabric series take too) on
// node n under root, and sends gpu_processes, gpu_processes_listed and,
// with info, job_info for every GPU of n. The error says what was not
// listed or not judged: the series still sent say what was.
func jobVerdictMetrics(n *topology.Node, root *rootfs.Root, l audit.Listing, gpus *gpuLabelSet, info bool, s *sink) error {
	uses, over := capJobProcesses(l.Uses)
	rep := audit.Run(*n, root, uses, nil, audit.Options{NoEnv: true, NoUsers: true, ThreadReads: maxJobThreadReads})
	rep.Processes = append(rep.Processes, over...)
	jobMetrics(n, gpus, rep, l.Unlisted, info, s)

	var errs []error
	if len(l.Unlisted) > 0 {
		errs = append(errs, fmt.Errorf("process lists of GPU(s) %s not read whole (gpu_processes_listed 0): %s",
			joinIndexes(l.Unlisted), clip.Bytes(strings.Join(l.Unread, "; "), 1024)))
	}
	if len(over) > 0 {
		errs = append(errs, fmt.Errorf("%d GPU processes, only the first %d (by PID) judged: the other %d are counted as unknown",
			maxJobProcesses+len(over), maxJobProcesses, len(over)))
	}
	spent := 0
	for _, p := range rep.Processes {
		if slices.ContainsFunc(p.Unread, func(u string) bool { return strings.Contains(u, "thread budget") }) {
			spent++
		}
	}
	if spent > 0 {
		errs = append(errs, fmt.Errorf("the scrape's budget of %d thread status reads was spent: %d GPU processes judged without all their threads", maxJobThreadReads, spent))
	}
	return errors.Join(errs...)
}

// capJobProcesses keeps the uses of the first maxJobProcesses PIDs
// (ascending) for the audit and returns the others as unknown processes,
// unread, so that they are still counted on their GPUs.
func capJobProcesses(uses []audit.Use) (keep []audit.Use, over []audit.Process) {
	gpusOf := map[int][]int{}
	for _, u := range uses {
		for _, g := range u.GPUs {
			if !slices.Contains(gpusOf[u.PID], g) {
				gpusOf[u.PID] = append(gpusOf[u.PID], g)
			}
		}
	}
	if len(gpusOf) <= maxJobProcesses {
		return uses, nil
	}
	pids := make([]int, 0, len(gpusOf))
	for pid := range gpusOf {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	last := pids[maxJobProcesses-1]
	for _, u := range uses {
		if u.PID <= last {
			keep = append(keep, u)
		}
	}
	for _, pid := range pids[maxJobProcesses:] {
		over = append(over, audit.Process{PID: pid, GPUs: gpusOf[pid], Verdict: audit.Unknown,
			Reason: fmt.Sprintf("not read: over the agent's %d processes a scrape", maxJobProcesses)})
	}
	return keep, over
}

// jobMetrics sends the series of rep's processes for every GPU of n;
// unlisted are the GPUs whose lists were not read whole.
func jobMetrics(n *topology.Node, gpus *gpuLabelSet, rep audit.Report, unlisted []int, info bool, s *sink) {
	type jobKey struct{ job, step, pod string }
	counts := map[int]*[5]int{}
	jobs := map[int]map[jobKey]audit.Verdict{}
	for _, p := range rep.Processes {
		v := slices.Index(verdictOrder, p.Verdict)
		if v < 0 {
			v = slices.Index(verdictOrder, audit.Unknown)
		}
		var k jobKey
		if p.Job != nil {
			k.job, k.step = jobLabel(p.Job.ID), jobLabel(p.Job.Step)
		}
		if p.Pod != nil {
			k.pod = jobLabel(p.Pod.UID)
		}
		for _, g := range p.GPUs {
			if counts[g] == nil {
				counts[g] = &[5]int{}
			}
			counts[g][v]++
			if !info || k == (jobKey{}) {
				continue
			}
			if jobs[g] == nil {
				jobs[g] = map[jobKey]audit.Verdict{}
			}
			if w, ok := jobs[g][k]; !ok || worse(verdictOrder[v], w) {
				jobs[g][k] = verdictOrder[v]
			}
		}
	}
	for i := range n.GPUs {
		ng := &n.GPUs[i]
		id := gpus.discovered(ng)
		listed := !slices.Contains(unlisted, ng.Index)
		s.gpuGauge(descGPUProcessesListed, b2f(listed), id)
		c := counts[ng.Index]
		if c == nil {
			c = &[5]int{}
		}
		for v, verdict := range verdictOrder {
			if listed || c[v] > 0 {
				s.gpuGauge(descGPUProcesses, float64(c[v]), id, string(verdict))
			}
		}
		if !info {
			continue
		}
		keys := make([]jobKey, 0, len(jobs[ng.Index]))
		for k := range jobs[ng.Index] {
			keys = append(keys, k)
		}
		sortfn.Sort(keys, func(a, b jobKey) int {
			return strings.Compare(a.job+"\xff"+a.step+"\xff"+a.pod, b.job+"\xff"+b.step+"\xff"+b.pod)
		})
		var other audit.Verdict
		for j, k := range keys {
			v := jobs[ng.Index][k]
			if j >= maxJobInfoPerGPU {
				if other == "" || worse(v, other) {
					other = v
				}
				continue
			}
			s.gpuGauge(descJobInfo, 1, id, k.job, k.step, k.pod, string(v))
		}
		if other != "" {
			s.gpuGauge(descJobInfo, 1, id, "other", "", "", string(other))
		}
	}
}

// verdictRank orders the verdicts for job_info, worst first: a job with
// one misaligned process on a GPU is misaligned there.
var verdictRank = []audit.Verdict{audit.Misaligned, audit.Partly, audit.Unbound, audit.Unknown, audit.Aligned}

// worse reports whether a is worse than b (verdictRank).
func worse(a, b audit.Verdict) bool {
	return slices.Index(verdictRank, a) < slices.Index(verdictRank, b)
}

// jobLabel is a job, step or pod value as a label value: kept where it
// is at most maxJobLabel bytes of [0-9A-Za-z._+-] (what Slurm's job ids
// and steps and a pod's UID are), else "invalid". audit's cgroup parsing
// takes a job id of digits and a pod UID of the UUID form, but a step
// of any characters but '/', and any length: a cgroup path is named by
// whoever may create the cgroup.
func jobLabel(v string) string {
	if len(v) > maxJobLabel {
		return "invalid"
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '.', c == '_', c == '+', c == '-':
		default:
			return "invalid"
		}
	}
	return v
}

// joinIndexes is a comma list of GPU indexes.
func joinIndexes(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = itoa(x)
	}
	return strings.Join(s, ",")
}
