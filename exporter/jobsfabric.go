package exporter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gpuaffinity/gpuaffinity/audit"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The fabric half of the job audit (Options.Jobs, --collector.jobs):
// at each scrape the RDMA ports' transmit data counters are sampled
// (audit.FabricSampler) and judged against the previous scrape's sample
// with audit.FabricBalance, the rule of `gpuaffinity audit
// --fabric-interval` (docs/audit.md, "Fabric balance"):
//
//	gpuaffinity_job_compute_nic_idle{device,port}            per compute NIC port
//	gpuaffinity_job_storage_nic_compute_traffic{device,port} per storage NIC port
//
// Cardinality is one series per compute or storage RDMA port (12 on a
// DGX H100), fixed by the hardware. There are none before two samples
// exist, and none for a port whose rate could not be taken this
// interval (a counter reset, a port gone, a counter unreadable: the
// collector's error names it).

var (
	descJobComputeNICIdle = newDesc("job_compute_nic_idle",
		"1 when this compute NIC port's GPU(s) run processes and it transmitted almost nothing (under 1% of the busiest compute port) since the previous scrape while the compute fabric carried traffic; else 0.",
		"device", "port")
	descJobStorageNICCompute = newDesc("job_storage_nic_compute_traffic",
		"1 when this storage NIC port transmitted at least the median busy compute NIC port's rate since the previous scrape while GPUs ran processes; else 0.",
		"device", "port")
)

// minFabricWindow is the shortest interval a rate is taken over. A
// sample closer than this to the previous one (two Prometheus replicas
// scraping at once) takes its rate from the sample before instead: over
// a few milliseconds a counter's steps (the adapter updates it in
// batches) would swamp the rate.
const minFabricWindow = time.Second

// jobsFabric keeps the fabric samples between scrapes.
type jobsFabric struct {
	root    *rootfs.Root // names the counter files
	sampler *audit.FabricSampler

	mu   sync.Mutex
	prev *audit.FabricSample // the sample the next rate starts from
	base *audit.FabricSample // the one before prev: the start for a sample too close to prev
}

func newJobsFabric(root *rootfs.Root) *jobsFabric {
	return &jobsFabric{root: root, sampler: audit.NewFabricSampler(root)}
}

// window records cur and returns the sample its rate starts from: the
// previous one, or where that is under minFabricWindow before cur, the
// one before it (prev is then kept for the next scrape). Nil until two
// samples exist.
func (j *jobsFabric) window(cur audit.FabricSample) *audit.FabricSample {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.prev == nil:
		j.prev = &cur
		return nil
	case cur.At.Sub(j.prev.At) >= minFabricWindow:
		from := j.prev
		j.base, j.prev = j.prev, &cur
		return from
	default:
		return j.base
	}
}

// collectFabric samples the counters and renders the fabric series of
// node n for uses, the GPU processes of this scrape. The sample is this
// collection's shared read of the ports where the rdma collector runs
// too (shared non-nil), else the sampler's own. A port whose rate could
// not be taken has no series; the error names it and why.
func (j *jobsFabric) collectFabric(ctx context.Context, n *topology.Node, uses []audit.Use, shared *portsRead, s *sink) error {
	var cur audit.FabricSample
	if shared != nil {
		at, ports, err := shared.read(ctx)
		if j.sampler.Now != nil {
			at = j.sampler.Now()
		}
		cur = audit.SampleOf(j.root, at, ports, err)
	} else {
		cur = j.sampler.Sample(ctx)
	}
	from := j.window(cur)
	if from == nil || n == nil {
		return errLines("fabric: sample", cur.Unread)
	}
	f := audit.FabricBalance(*n, uses, *from, cur)
	for _, p := range f.Ports {
		if p.BytesPerSecond == nil {
			continue
		}
		switch p.Role {
		case topology.RoleCompute:
			s.gauge(descJobComputeNICIdle, b2f(p.Idle), p.Device, itoa(p.Port))
		case topology.RoleStorage:
			s.gauge(descJobStorageNICCompute, b2f(p.ComputeTraffic), p.Device, itoa(p.Port))
		}
	}
	return errLines("fabric", f.Degraded)
}

// errLines joins lines into one error, each prefixed; nil for none.
func errLines(prefix string, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	errs := make([]error, len(lines))
	for i, l := range lines {
		errs[i] = fmt.Errorf("%s: %s", prefix, l)
	}
	return errors.Join(errs...)
}
