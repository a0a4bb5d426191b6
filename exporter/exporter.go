package exporter

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/singleflight"

	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/placement"
	"github.com/gpuaffinity/gpuaffinity/rdma"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// State is what the agent knows of the node when a scrape starts. The
// exporter only reads Node and Health: the agent must not modify them once
// handed over (replace the pointer instead), because a collector past its
// deadline may still be reading them.
type State struct {
	// Node is the last good discovery; nil before the first one succeeded.
	Node *topology.Node
	// Discovery describes the last discovery attempt.
	Discovery DiscoveryStatus
	// Health is the last health gate's report; nil before the first gate.
	Health *health.Report
	// ExpectedNVLinks maps a GPU's NVML index to the number of NVLinks it
	// should have up (from --expect); a GPU missing from it expects the
	// links NVML lists.
	ExpectedNVLinks map[int]int
	// StateWriteOK is false when writing the files under --state-dir failed.
	StateWriteOK bool
	// Placement is where the node sits in its cloud's or site's network,
	// as the agent read it with the discovery (never at scrape time); nil
	// where it has none. Like Node it is replaced, never modified.
	Placement *placement.Placement

	// ports is this collection's shared read of the RDMA ports, where
	// both the rdma and the jobs collector run (portsread.go).
	ports *portsRead
}

// DiscoveryStatus is the outcome of the agent's last discovery.
type DiscoveryStatus struct {
	Last        time.Time // last attempt; zero before the first
	LastSuccess time.Time // last success; zero before the first
	OK          bool      // the last attempt succeeded
	Duration    time.Duration
	Err         string // why the last attempt failed
}

// Options configure an Exporter.
type Options struct {
	// Root is the filesystem root RDMA counters are read under ("/" live;
	// "" means "/").
	Root string
	// State returns the agent's current state; it is called once per
	// collection. Nil means an empty State.
	State func() State
	// NVML returns the NVML library to read at scrape time; a nil func or a
	// nil result means NVML is not available.
	NVML func() gonvml.Interface
	// XID holds the counts of the agent's NVML event watch; nil for none.
	XID *XIDCounter
	// Timeout is each collector's deadline; 0 means 5 s.
	Timeout time.Duration
	// Logger gets collector failures (once per change, not per scrape);
	// nil discards them.
	Logger *slog.Logger
	// Registry is the registry the exporter registers the build info, Go
	// and process collectors in (Handler adds promhttp's metrics), and
	// that Gatherer and Handler serve with the exporter's own metrics;
	// nil means a new prometheus.NewRegistry(). Tests pass
	// prometheus.NewPedanticRegistry(). The exporter's own metrics are
	// not gathered through it (see familyBuilder): it holds a collector
	// that describes them, reserving their names, and collects nothing.
	// Serve Gatherer or Handler, not the registry.
	Registry *prometheus.Registry
	// ReadFile reads RDMA attribute and counter files; nil means
	// rdma.CounterReader's bounded single read. Tests use it to answer
	// EINVAL (see rdma.CounterReader).
	ReadFile func(name string) ([]byte, error)
	// Hostname is the value of the GPU series' Hostname label (one of
	// dcgm-exporter's join labels, docs/metrics.md). "" means, as
	// dcgm-exporter does, $NODE_NAME where set (the DaemonSet sets it to
	// the Kubernetes node name), else the host name of Root
	// (<Root>/proc/sys/kernel/hostname), read once by New.
	Hostname string
	// MaxRequestsInFlight bounds the scrapes Handler serves at once, as
	// node_exporter's --web.max-requests: more are answered 503 at once,
	// before any compression or collection. 0 or less means no limit.
	MaxRequestsInFlight int
	// Collectors switches collectors by name (CollectorNames): false
	// disables one, which then sends none of its series (nor its
	// gpuaffinity_scrape_collector_* series); true or absent leaves it
	// enabled. Nil enables all. RegisterCollectorFlags's Collectors fills
	// it from a command line. A name that is no collector is an error of
	// New.
	Collectors map[string]bool
	// Jobs turns on the jobs collector (CollectorJobs, the agent's
	// --collector.jobs): at each scrape the processes on the GPUs, from
	// NVML's process lists and KFD's per-process entries, each held to
	// its GPU's locality (package audit; no environment read), counted
	// per GPU and verdict. Off by default: it reads every GPU process's
	// /proc entries, and needs the host's PID namespace (docs/metrics.md,
	// "Jobs").
	Jobs bool
	// JobsInfo adds, with Jobs, gpuaffinity_job_info: one series per GPU
	// and Slurm job step or pod with a process on it (the agent's
	// --collector.jobs.info).
	JobsInfo bool
}

// DefaultTimeout is a collector's deadline when Options.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// Exporter renders the node and its live counters as Prometheus metrics.
//
// Each collection runs five collectors at once: nvml (NVIDIA GPUs and
// NVLinks, read from NVML), amdgpu (AMD GPUs, read from amdgpu's sysfs;
// only where the last discovery has one), rdma (RDMA ports, read from
// sysfs), topology (the last good discovery's pairing) and storage (its
// storage layer), and with Options.Jobs a sixth, jobs (the GPU
// processes' audit, jobs.go, and the fabric balance, jobsfabric.go);
// Options.Collectors may switch the five off, and the NVLink series
// apart (the nvlink collector, which runs under that name where nvml is
// off). Each has Options.Timeout to finish; one
// that fails reports gpuaffinity_scrape_collector_success 0 and keeps the
// series it could read, one past its deadline reports 0 and its output is
// dropped. A collector still running from an earlier collection is not
// started again: it reports 0 until it returns. The agent's own metrics
// (discovery, health gate, state files, XIDs, build info) come from State
// and memory and are always present.
type Exporter struct {
	opts    Options
	reg     *prometheus.Registry
	gather  *coalescer
	rdma    *rdma.CounterReader
	timeout time.Duration
	log     *slog.Logger
	parts   []*collector
	nvml    nvmlParts // what the NVML collector renders
	gpus    *gpuLabelCache

	// The job audit's (Options.Jobs): the root its files are read under,
	// and the fabric samples kept between scrapes.
	jobs *jobsCollector // with Options.Jobs
	// shareRDMA: the rdma and jobs collectors share one read of the
	// ports per collection (State.ports).
	shareRDMA bool

	countsMu sync.Mutex
	counts   familyCounts // of the last collection, to size the next
}

// New returns an Exporter for opts and registers its collectors, the
// build info (gpuaffinity_build_info), and the Go and process collectors
// in the registry.
func New(opts Options) (*Exporter, error) {
	on, err := enabledCollectors(opts.Collectors)
	if err != nil {
		return nil, err
	}
	e := &Exporter{opts: opts, reg: opts.Registry, timeout: opts.Timeout, log: opts.Logger}
	if e.reg == nil {
		e.reg = prometheus.NewRegistry()
	}
	if e.timeout <= 0 {
		e.timeout = DefaultTimeout
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	root := rootfs.Clean(opts.Root)
	e.gpus = &gpuLabelCache{host: hostname(opts.Hostname, root)}
	if e.gpus.host == "" {
		e.log.Warn("no host name for the GPU series' Hostname label (no option, $NODE_NAME or readable proc/sys/kernel/hostname under the root): it takes the discovery's, empty where that has none, and on(Hostname, gpu) joins with dcgm-exporter then fail",
			"root", root)
	}
	e.rdma = &rdma.CounterReader{Root: root, ReadFile: opts.ReadFile}
	e.rdma.Counters, e.rdma.CountersExt, e.rdma.HwCounters = rdmaCounterFiles()
	e.nvml = nvmlParts{gpus: on[CollectorNVML], links: on[CollectorNVLink]}
	switch {
	case e.nvml.gpus:
		e.parts = append(e.parts, &collector{name: CollectorNVML, run: e.collectNVML})
	case e.nvml.links:
		e.parts = append(e.parts, &collector{name: CollectorNVLink, run: e.collectNVML})
	}
	if on[CollectorAMDGPU] {
		e.parts = append(e.parts, &collector{name: CollectorAMDGPU, run: (&amdCollector{root: root, labels: e.gpus}).collect, applies: hasAMDGPU})
	}
	if on[CollectorRDMA] {
		e.parts = append(e.parts, &collector{name: CollectorRDMA, run: e.collectRDMA})
		e.shareRDMA = opts.Jobs // the fabric's counters come from the same read
	}
	if on[CollectorTopology] {
		e.parts = append(e.parts, &collector{name: CollectorTopology, run: (&discoveryCollector{labels: e.gpus, render: collectTopology}).collect})
	}
	if on[CollectorStorage] {
		e.parts = append(e.parts, &collector{name: CollectorStorage, run: (&discoveryCollector{labels: e.gpus, render: collectStorage}).collect})
	}
	if opts.Jobs {
		fs, err := rootfs.Open(root)
		if err != nil {
			return nil, fmt.Errorf("exporter: jobs: %w", err)
		}
		e.jobs = &jobsCollector{fs: fs, nvml: opts.NVML, labels: e.gpus, info: opts.JobsInfo, fabric: newJobsFabric(fs)}
		e.parts = append(e.parts, &collector{name: CollectorJobs, run: e.jobs.collect, applies: hasGPU})
	}
	for _, c := range []prometheus.Collector{
		ownDescs{},
		versioncollector.NewCollector(ns),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := e.reg.Register(c); err != nil {
			return nil, fmt.Errorf("exporter: register: %w", err)
		}
	}
	e.gather = &coalescer{g: prometheus.GathererFunc(e.gatherAll)}
	return e, nil
}

// Handler serves /metrics. Concurrent scrapes share one collection; a
// failing collector marks itself unsuccessful and the rest still answers
// 200. It adds promhttp's promhttp_metric_handler_* metrics. It answers
// gzip where the client asks for it, as promhttp would, but with
// a stateless encoder (see gzipHandler). Beyond Options.MaxRequestsInFlight
// scrapes at once it answers 503 before it takes a compressor or gathers
// (limitInFlight); the 503s are counted in
// promhttp_metric_handler_requests_total{code="503"}, as node_exporter's.
func (e *Exporter) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(e.reg, limitInFlight(e.opts.MaxRequestsInFlight,
		gzipHandler(promhttp.HandlerFor(e.gather, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      slogPrinter{e.log},
			Registry:      e.reg,
			// gzipHandler compresses; identity keeps promhttp's Vary header.
			OfferedCompressions: []promhttp.Compression{promhttp.Identity},
		}))))
}

// Gatherer gathers one collection (what Handler serves). Concurrent
// Gather calls share one collection.
func (e *Exporter) Gatherer() prometheus.Gatherer { return e.gather }

// DisabledRDMAFiles lists the RDMA counter files the exporter stopped
// reading because they answered EINVAL.
func (e *Exporter) DisabledRDMAFiles() []string { return e.rdma.DisabledFiles() }

// CounterReader is the reader the rdma collector scrapes with. Counter
// reads outside a scrape (the agent's health checks, through
// health.NewReader) go through it too, so a file that answered EINVAL is
// remembered once for both and never read again.
func (e *Exporter) CounterReader() *rdma.CounterReader { return e.rdma }

func (e *Exporter) state() State {
	if e.opts.State == nil {
		return State{}
	}
	return e.opts.State()
}

// coalescer makes concurrent Gather calls share one registry Gather.
// (promhttp.HandlerOpts.CoalesceGather does the same for the handler only
// and is marked experimental in client_golang v1.25.0.)
type coalescer struct {
	g  prometheus.Gatherer
	sf singleflight.Group
}

// Gather returns the shared collection's families; the slice is the
// caller's own, the families are shared and must not be modified.
func (c *coalescer) Gather() ([]*dto.MetricFamily, error) {
	v, err, _ := c.sf.Do("", func() (any, error) { return c.g.Gather() })
	mfs, _ := v.([]*dto.MetricFamily)
	return slices.Clone(mfs), err
}

// slogPrinter adapts slog to promhttp's error log.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.l.Error(fmt.Sprint(v...)) }

// XIDCounter counts XID events per GPU and code. It is safe for
// concurrent use; the zero value is ready.
type XIDCounter struct {
	mu    sync.Mutex
	count map[xidKey]uint64
	last  map[int]time.Time
}

type xidKey struct {
	gpu  int
	code uint64
}

// Add counts one XID of code on the GPU with NVML index gpu at t.
func (c *XIDCounter) Add(gpu int, code uint64, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count == nil {
		c.count = map[xidKey]uint64{}
		c.last = map[int]time.Time{}
	}
	c.count[xidKey{gpu, code}]++
	if t.After(c.last[gpu]) {
		c.last[gpu] = t
	}
}

// snapshot copies the counts and last times.
func (c *XIDCounter) snapshot() (map[xidKey]uint64, map[int]time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.count), maps.Clone(c.last)
}
