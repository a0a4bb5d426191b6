// Package health checks a GPU node's health from its discovered topology
// (topology.Node), the kernel log and RDMA port counters (read through a
// Reader; the checks read no file themselves, but for jobs.aligned,
// which with Options.Jobs audits the running GPU processes under the
// root by package audit): GPU count and
// visibility, PCIe link width, NVML memory health, NVLink fabric
// registration and health (one clique per multi-node NVLink node) and the
// IMEX channel multi-node NVLink needs, fatal XIDs,
// NVLinks, compute NIC ports, rates, error counters and firmware, GPU↔NIC
// alignment, GPUDirect RDMA prerequisites and the storage layer (a
// GPUDirect Storage path, ACS, IOMMU mode, storage NIC ports, NVMe links,
// GPU↔storage NIC locality). AMD Instinct GPUs are judged by what amdgpu
// and KFD say (KFD visibility, XGMI links, RAS counts, PCIe replays,
// amdkfd peer memory or dma-buf, the IOMMU mode RCCL asks for); the
// checks of NVIDIA's machinery judge NVIDIA GPUs only. Every check has a stable id
// and returns pass, warn, fail or skip with a one-line reason naming the
// device and a hint. It opens no network connection; docs/health.md
// describes each check.
package health

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Schema names the JSON contract of Report.
const Schema = "gpuaffinity.health/v1"

// Verdict is a check's outcome.
type Verdict string

const (
	Pass Verdict = "pass"
	Warn Verdict = "warn"
	Fail Verdict = "fail"
	Skip Verdict = "skip" // could not be checked here (no data, not applicable)
)

// rank orders verdicts by severity.
func (v Verdict) rank() int {
	switch v {
	case Fail:
		return 3
	case Warn:
		return 2
	case Pass:
		return 1
	}
	return 0
}

// Group says which profile rule applies to a check.
type Group string

const (
	GroupGPU Group = "gpu" // GPU, NVLink and amd.* checks: always enforced
	// GroupFabric holds the checks of what a job between nodes needs
	// (compute NICs, GPU↔NIC, gpu.imex, amd.iommu): enforced per profile.
	GroupFabric Group = "fabric"
	// GroupStorage holds the storage.* checks: enforced by pretrain only.
	GroupStorage Group = "storage"
	// GroupJobs holds jobs.aligned, which judges the running processes,
	// not the node: it runs only with Options.Jobs, and then every profile
	// enforces it (a site that asked for it drains on it).
	GroupJobs Group = "jobs"
)

// Profile chooses which failures are enforced.
type Profile string

const (
	// Pretrain enforces every check, the network fabric included.
	Pretrain Profile = "pretrain"
	// Finetune enforces the fabric checks only with Options.MultiNode;
	// otherwise their failures become warnings.
	Finetune Profile = "finetune"
	// Inference enforces the GPU checks; fabric failures are warnings.
	// Only Pretrain enforces the storage checks (GroupStorage): under
	// Finetune and Inference their failures are warnings.
	Inference Profile = "inference"
)

// ParseProfile reads a profile name.
func ParseProfile(s string) (Profile, error) {
	switch p := Profile(s); p {
	case Pretrain, Finetune, Inference:
		return p, nil
	}
	return "", fmt.Errorf("profile %q: want pretrain, finetune or inference", s)
}

// Result is one check's outcome.
type Result struct {
	ID      string  `json:"id"`
	Verdict Verdict `json:"verdict"`
	// Reason is one line naming the device ("GPU 3 (0000:9a:00.0): ...").
	Reason string `json:"reason"`
	// Hint says what to do about a warn or fail.
	Hint string `json:"hint,omitempty"`
	// Details lists every offending device where there are several
	// (Reason names the first).
	Details []string `json:"details,omitempty"`
	// Downgraded is set where the profile turned a failure into a warning.
	Downgraded bool    `json:"downgraded,omitempty"`
	Seconds    float64 `json:"seconds"`
}

// Check is one health check.
type Check struct {
	ID    string
	Group Group
	What  string // one line for docs and --list
	Run   func(ctx context.Context, in *Input) Result
}

// Options configure a run.
type Options struct {
	// Root is the filesystem root the node was discovered under ("/" for
	// the live host); the default Reader reads the kernel log and port
	// counters under it, and jobs.aligned (Jobs) the processes. The
	// other checks read no file themselves: the rest comes from the Node.
	Root      string
	Profile   Profile // "" means Pretrain
	MultiNode bool
	// Expect holds the node to learned expectations; nil means the node's
	// own consistency (all GPUs alike, all compute NICs alike).
	Expect *Expect
	// GPUs narrows the checks to these GPU indices and their paired
	// compute NICs; nil means all.
	GPUs []int
	// Interval is the time between the two reads of the NIC error
	// counters; 0 skips nic.errors.
	Interval time.Duration
	// Timeout bounds each check; a check that runs past it fails with
	// "timed out". 0 means 10 s.
	Timeout time.Duration
	// Kmsg is the kernel log to scan for XIDs; "" means /dev/kmsg on the
	// live root and <root>/dev/kmsg elsewhere. Only the default Reader
	// uses it.
	Kmsg string
	// Reader reads the port counters and the kernel log; nil means
	// NewReader(Root, Kmsg, nil). The agent passes one built on the
	// exporter's rdma.CounterReader; tests pass their own.
	Reader Reader
	// Only, when not empty, runs only the checks with these ids.
	Only []string
	// Jobs runs jobs.aligned: the processes running on the selected GPUs,
	// read from NVML's process lists, KFD's per-process entries and
	// /proc under Root (package audit), held to their GPUs' local CPUs.
	// Off, the check skips: the agent's gate leaves it off.
	Jobs bool
	// Sleep waits between counter reads (tests replace it).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Input is what a check sees.
type Input struct {
	Node topology.Node
	Options
	gpus []topology.GPU // the selected GPUs
	nics []topology.NIC // the selected compute NICs
}

// Report is the result of Run.
type Report struct {
	Schema   string    `json:"schema"`
	Hostname string    `json:"hostname,omitempty"`
	Profile  Profile   `json:"profile"`
	GPUs     []int     `json:"gpus,omitempty"` // the selection; empty for all
	Healthy  bool      `json:"healthy"`
	Verdict  Verdict   `json:"verdict"` // worst verdict of all results
	Results  []Result  `json:"results"`
	Time     time.Time `json:"time"`
}

// Failed returns the failed results in check order.
func (r Report) Failed() []Result {
	var out []Result
	for _, x := range r.Results {
		if x.Verdict == Fail {
			out = append(out, x)
		}
	}
	return out
}

// Summary is the first failure as "<id>: <reason>", or "" when healthy.
func (r Report) Summary() string {
	if f := r.Failed(); len(f) > 0 {
		return f[0].ID + ": " + f[0].Reason
	}
	return ""
}

// Checks returns every check in run order.
func Checks() []Check { return slices.Clone(allChecks) }

// Run runs the checks on the node.
func Run(ctx context.Context, n topology.Node, opts Options) (Report, error) {
	if opts.Profile == "" {
		opts.Profile = Pretrain
	}
	if _, err := ParseProfile(string(opts.Profile)); err != nil {
		return Report{}, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	opts.Root = rootfs.Clean(opts.Root)
	if opts.Sleep == nil {
		opts.Sleep = sleepCtx
	}
	if opts.Reader == nil {
		opts.Reader = NewReader(opts.Root, opts.Kmsg, nil)
	}
	for _, id := range opts.Only {
		if !slices.ContainsFunc(allChecks, func(c Check) bool { return c.ID == id }) {
			return Report{}, fmt.Errorf("no check %q", id)
		}
	}
	in := &Input{Node: n, Options: opts}
	if err := in.selectDevices(); err != nil {
		return Report{}, err
	}
	rep := Report{Schema: Schema, Hostname: n.Hostname, Profile: opts.Profile, GPUs: opts.GPUs,
		Verdict: Skip, Time: time.Now().UTC()}
	for _, c := range allChecks {
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, c.ID) {
			continue
		}
		r := runOne(ctx, c, in)
		if r.Verdict == Fail && !in.enforced(c.Group) {
			r.Verdict, r.Downgraded = Warn, true
		}
		if r.Verdict.rank() > rep.Verdict.rank() {
			rep.Verdict = r.Verdict
		}
		rep.Results = append(rep.Results, r)
	}
	rep.Healthy = rep.Verdict != Fail
	return rep, nil
}

// enforced reports whether the profile keeps a failure of the group's
// checks a failure.
func (in *Input) enforced(g Group) bool {
	switch g {
	case GroupFabric:
		return in.fabricRequired()
	case GroupStorage:
		return in.Profile == Pretrain
	}
	return true
}

func (in *Input) fabricRequired() bool {
	switch in.Profile {
	case Finetune:
		return in.MultiNode
	case Inference:
		return false
	}
	return true
}

// runOne runs a check under the per-check deadline. A check that does not
// return in time is abandoned (its goroutine ends when it next looks at
// ctx) and fails with "timed out".
func runOne(ctx context.Context, c Check, in *Input) Result {
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, in.Timeout)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- Result{Verdict: Fail, Reason: fmt.Sprintf("check panicked: %v", p)}
			}
		}()
		done <- c.Run(cctx, in)
	}()
	var r Result
	select {
	case r = <-done:
	case <-cctx.Done():
		r = Result{Verdict: Fail, Reason: "timed out after " + in.Timeout.String(),
			Hint: "the check is stuck (hung driver or file system); rerun, then look at dmesg"}
	}
	r.ID = c.ID
	r.Seconds = time.Since(start).Seconds()
	return r
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// selectDevices picks the GPUs of the selection and the compute NICs
// paired with them (all compute NICs without a selection).
func (in *Input) selectDevices() error {
	n := in.Node
	if in.GPUs == nil {
		in.gpus = n.GPUs
		for _, c := range n.NICs {
			if c.Role == topology.RoleCompute {
				in.nics = append(in.nics, c)
			}
		}
		return nil
	}
	want := map[string]bool{}
	for _, i := range in.GPUs {
		k := slices.IndexFunc(n.GPUs, func(g topology.GPU) bool { return g.Index == i })
		if k < 0 {
			return fmt.Errorf("GPU %d: not on this node (%d GPUs)", i, len(n.GPUs))
		}
		in.gpus = append(in.gpus, n.GPUs[k])
		for _, p := range n.Pairs {
			if p.GPU == i {
				// The GPU's own NICs whose ports are down stay in the
				// selection: nic.port_state names them.
				for _, name := range append(slices.Clone(p.NICs), p.DownNICs...) {
					want[name] = true
				}
			}
		}
	}
	for _, c := range n.NICs {
		if c.Role == topology.RoleCompute && want[c.Name] {
			in.nics = append(in.nics, c)
		}
	}
	return nil
}

// gpuName names a GPU in reasons.
func gpuName(g topology.GPU) string { return fmt.Sprintf("GPU %d (%s)", g.Index, g.BusID) }

// verdictOf builds a result from a list of problems: fail (or warn) with
// the first named, pass with ok otherwise.
func verdictOf(bad []string, v Verdict, hint, ok string) Result {
	if len(bad) == 0 {
		return Result{Verdict: Pass, Reason: ok}
	}
	r := Result{Verdict: v, Reason: bad[0], Hint: hint}
	if len(bad) > 1 {
		r.Reason += fmt.Sprintf(" (and %d more)", len(bad)-1)
		r.Details = bad
	}
	return r
}

func skip(format string, a ...any) Result {
	return Result{Verdict: Skip, Reason: fmt.Sprintf(format, a...)}
}

func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
