package audit

import (
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Schema names the JSON form of a Report.
const Schema = "gpuaffinity.audit/v1"

// Verdict is how a process's allowed CPUs sit against its GPUs' local
// CPUs.
type Verdict string

const (
	// Aligned: every allowed CPU is a local CPU of its GPU(s).
	Aligned Verdict = "aligned"
	// Partly: some allowed CPUs are local, some are not.
	Partly Verdict = "partly"
	// Misaligned: no allowed CPU is local (the other socket).
	Misaligned Verdict = "misaligned"
	// Unbound: every online CPU of the node is allowed, the default of a
	// process nobody bound, on a node whose GPU is local to only some.
	Unbound Verdict = "unbound"
	// Unknown: the CPUs or the GPU's locality could not be read; Reason
	// says which.
	Unknown Verdict = "unknown"
)

// Report is one audit of a node.
type Report struct {
	Schema    string    `json:"schema"`
	Processes []Process `json:"processes"`
	// Unread names the GPU sources that could not be listed, with why
	// (NVML not available, a GPU's list answering an error, KFD's proc
	// directory unreadable): processes there may be missing.
	Unread []string `json:"unread"`
	// Fabric is the fabric balance over an interval, where it was
	// sampled (audit --fabric-interval); nil otherwise.
	Fabric *Fabric `json:"fabric,omitempty"`
}

// Process is one process using GPUs, and its verdict.
type Process struct {
	PID     int    `json:"pid"`
	Command string `json:"command,omitempty"` // status Name (comm)
	UID     *int   `json:"uid"`               // real uid; nil when unread
	// User is the uid's name from the root's etc/passwd, else the number.
	User string `json:"user,omitempty"`
	// Cgroup is the process's cgroup path (the v2 one, else v1's cpuset).
	Cgroup string `json:"cgroup,omitempty"`
	Job    *Job   `json:"job,omitempty"` // Slurm job and step
	Pod    *Pod   `json:"pod,omitempty"` // Kubernetes pod
	// GPUs are the GPU.Index values of the GPUs it drives.
	GPUs []int `json:"gpus"`
	// Sources name who listed it: "nvml", "kfd".
	Sources []string `json:"sources"`
	// CPUs and Mems are Cpus_allowed_list and Mems_allowed_list of
	// /proc/PID/status.
	CPUs cpuset.Set `json:"cpus"`
	Mems cpuset.Set `json:"mems"`
	// Threads are the threads whose allowed CPUs or memory nodes differ
	// from the process's, with their own verdicts.
	Threads []Thread `json:"threads,omitempty"`
	// GPUCPUs and GPUNUMANodes are the GPUs' locality (topology.Locality)
	// the verdict is held to.
	GPUCPUs      cpuset.Set `json:"gpu_cpus"`
	GPUNUMANodes []int      `json:"gpu_numa_nodes"`
	Verdict      Verdict    `json:"verdict"`
	Reason       string     `json:"reason"`
	// Env holds the environment's checks; nil when the environment
	// could not be read (Unread says why).
	Env []nccl.EnvCheck `json:"env,omitempty"`
	// Unread names what of the process could not be read, with why:
	// "environ: permission denied", "status: process ended".
	Unread []string `json:"unread,omitempty"`
	// Notes are what its GPU source said of it that is no gap: a KFD
	// process holding no VRAM, counted on every GPU it opened.
	Notes []string `json:"notes,omitempty"`
}

// Thread is one thread whose binding differs from its process's.
type Thread struct {
	TID     int        `json:"tid"`
	CPUs    cpuset.Set `json:"cpus"`
	Mems    cpuset.Set `json:"mems"`
	Verdict Verdict    `json:"verdict"`
	Reason  string     `json:"reason"`
}

// Job is the Slurm job step a process runs in.
type Job struct {
	ID   string `json:"id"`
	Step string `json:"step"` // "0", "batch", "extern", "interactive"
}

// Pod is the Kubernetes pod a process runs in. The cgroup names the pod
// by UID only; its name needs the API server, which audit does not ask.
type Pod struct {
	UID string `json:"uid"`
	QoS string `json:"qos"` // guaranteed, burstable, besteffort
}

// Use is one process's use of GPUs, as a GPU source lists it.
type Use struct {
	PID     int
	GPUs    []int    // GPU.Index values
	Sources []string // "nvml", "kfd"
	// Notes are the source's words on this use that are no gap (a KFD
	// process holding no VRAM): Process.Notes.
	Notes []string
}

// Options change what Run reads.
type Options struct {
	// NoEnv skips /proc/PID/environ.
	NoEnv bool
	// NoUsers skips etc/passwd: User is the uid's number. The agent's
	// series do not name users, and a site's passwd file may be
	// megabytes.
	NoUsers bool
	// ThreadReads, when above 0, bounds the threads' status files read
	// over the whole Run (each process's own cap, 4096, still applies):
	// the work of a Run is then at most three reads per process and
	// ThreadReads more. A process reached once it is spent is judged on
	// the threads read (none: on its own status) and says so in Unread,
	// as a process over the per-process cap does.
	ThreadReads int
}

// Run audits every process of uses on node n, reading /proc under root.
// unread (the GPU sources' own gaps) is carried into the Report. It
// does not fail: every gap is in the Report, named with why.
func Run(n topology.Node, root *rootfs.Root, uses []Use, unread []string, opts Options) Report {
	rep := Report{Schema: Schema, Processes: []Process{}, Unread: append([]string{}, unread...)}
	var users map[int]string
	if !opts.NoUsers {
		users = readPasswd(root)
	}
	budget := threadBudget{left: opts.ThreadReads, bounded: opts.ThreadReads > 0}
	for _, u := range mergeUses(uses) {
		rep.Processes = append(rep.Processes, auditOne(n, root, u, users, opts, &budget))
	}
	return rep
}

// mergeUses joins the uses of one PID (NVML and KFD both listing it, or a
// source listing it per GPU), PIDs ascending.
func mergeUses(uses []Use) []Use {
	byPID := map[int]int{}
	var out []Use
	for _, u := range uses {
		i, ok := byPID[u.PID]
		if !ok {
			i = len(out)
			byPID[u.PID] = i
			out = append(out, Use{PID: u.PID})
		}
		for _, g := range u.GPUs {
			if !slices.Contains(out[i].GPUs, g) {
				out[i].GPUs = append(out[i].GPUs, g)
			}
		}
		for _, s := range u.Sources {
			if !slices.Contains(out[i].Sources, s) {
				out[i].Sources = append(out[i].Sources, s)
			}
		}
		out[i].Notes = append(out[i].Notes, u.Notes...)
	}
	for i := range out {
		slices.Sort(out[i].GPUs)
	}
	sortfn.Sort(out, func(a, b Use) int { return a.PID - b.PID })
	return out
}

// auditOne reads one process and judges it.
func auditOne(n topology.Node, root *rootfs.Root, u Use, users map[int]string, opts Options, budget *threadBudget) Process {
	p := Process{PID: u.PID, GPUs: u.GPUs, Sources: u.Sources, Notes: u.Notes, GPUNUMANodes: []int{}}
	if p.GPUs == nil {
		p.GPUs = []int{}
	}
	for _, i := range u.GPUs {
		for _, g := range n.GPUs {
			if g.Index == i {
				p.GPUCPUs = p.GPUCPUs.Union(g.Locality.CPUs)
				for _, nd := range g.Locality.NUMANodes {
					if !slices.Contains(p.GPUNUMANodes, nd) {
						p.GPUNUMANodes = append(p.GPUNUMANodes, nd)
					}
				}
			}
		}
	}
	slices.Sort(p.GPUNUMANodes)

	st, err := readStatus(root, fmt.Sprintf("proc/%d/status", u.PID))
	if err != nil {
		w := why(err)
		if errors.Is(err, fs.ErrNotExist) {
			// NVML names host PIDs: an auditor in a PID namespace of its
			// own finds none of them.
			w += " (no /proc entry: or it runs in another PID namespace than this /proc's)"
		}
		p.Unread = append(p.Unread, "status: "+w)
		p.Verdict, p.Reason = Unknown, "its /proc status could not be read: "+w
		return p
	}
	p.Command, p.CPUs, p.Mems = st.name, st.cpus, st.mems
	if st.uid != nil {
		p.UID = st.uid
		p.User = userName(users, *st.uid)
	}
	if cg, err := root.ReadFile(fmt.Sprintf("proc/%d/cgroup", u.PID), maxSmallFile); err != nil {
		p.Unread = append(p.Unread, "cgroup: "+why(err))
	} else {
		p.Cgroup, p.Job, p.Pod = placeCgroup(string(cg))
	}

	// The process can run wherever any of its threads may.
	cpus, mems := p.CPUs, p.Mems
	threads, terr := readThreads(root, u.PID, budget)
	if terr != nil {
		p.Unread = append(p.Unread, "task: "+why(terr))
	}
	for _, t := range threads {
		if t.cpus.Equal(p.CPUs) && t.mems.Equal(p.Mems) {
			continue
		}
		v, r := judge(n, t.cpus, t.mems, p.GPUCPUs, p.GPUNUMANodes)
		p.Threads = append(p.Threads, Thread{TID: t.tid, CPUs: t.cpus, Mems: t.mems, Verdict: v, Reason: r})
		cpus, mems = cpus.Union(t.cpus), mems.Union(t.mems)
	}
	p.Verdict, p.Reason = judge(n, cpus, mems, p.GPUCPUs, p.GPUNUMANodes)
	if len(p.Threads) > 0 {
		p.Reason += fmt.Sprintf(" (over all its threads: %d bound otherwise than the process)", len(p.Threads))
	}

	if !opts.NoEnv {
		env, err := readEnviron(root, u.PID)
		if err != nil {
			p.Unread = append(p.Unread, "environ: "+why(err))
		} else {
			p.Env = nccl.CheckEnv(n, nccl.CheckRequest{GPUs: u.GPUs, Lookup: env, Confined: p.Pod != nil || p.Job != nil})
		}
	}
	return p
}

// judge is the verdict of allowed CPUs cpus and memory nodes mems against
// the GPUs' local CPUs and NUMA nodes.
func judge(n topology.Node, cpus, mems, gpuCPUs cpuset.Set, gpuNodes []int) (Verdict, string) {
	online := n.CPU.Online
	if online.IsEmpty() {
		online = cpus
	}
	allowed := cpus.Intersect(online)
	switch {
	case cpus.IsEmpty():
		return Unknown, "its allowed CPUs are unknown (no Cpus_allowed_list)"
	case gpuCPUs.IsEmpty():
		return Unknown, "its GPUs' local CPUs are unknown (see the topology's warnings)"
	case allowed.IsEmpty():
		return Unknown, fmt.Sprintf("none of its allowed CPUs %s is online (%s)", cpus, online)
	}
	local := allowed.Intersect(gpuCPUs)
	var v Verdict
	var reason string
	switch {
	case local.Equal(allowed):
		v, reason = Aligned, fmt.Sprintf("all its CPUs (%s) are the GPU's local CPUs %s", allowed, gpuCPUs)
	case allowed.Equal(online):
		v, reason = Unbound, fmt.Sprintf("it may run on every online CPU (%s); the GPU's local CPUs are %s", online, gpuCPUs)
	case local.IsEmpty():
		v, reason = Misaligned, fmt.Sprintf("none of its CPUs (%s) is local to the GPU (%s)", allowed, gpuCPUs)
	default:
		v, reason = Partly, fmt.Sprintf("%d of its %d CPUs are off the GPU's local CPUs %s: %s", allowed.Difference(gpuCPUs).Len(), allowed.Len(), gpuCPUs, allowed.Difference(gpuCPUs))
	}
	if v == Aligned && len(gpuNodes) > 0 && !mems.IsEmpty() && !mems.Intersects(cpuset.Of(gpuNodes...)) {
		// Allowed CPUs local, memory only from elsewhere (a cpuset's mems).
		v = Partly
		reason += fmt.Sprintf("; but its memory may come only from node(s) %s, not the GPU's %s", mems, cpuset.Of(gpuNodes...))
	}
	return v, reason
}

// joinInts is a comma list of v.
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
