package exporter

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// State is what the agent knows of the node when a scrape starts.
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
	// Root is the filesystem root RDMA counters are read under ("/" live).
	Root string
	// State returns the agent's current state; it is called once per scrape.
	State func() State
	// NVML returns the NVML library to read at scrape time; a nil func or a
	// nil result means NVML is not available.
	NVML func() gonvml.Interface
	// XID holds the counts of the agent's NVML event watch; nil for none.
	XID *XIDCounter
	// Timeout is each collector's deadline; 0 means 5 s.
	Timeout time.Duration
	// Version, Revision are the build's, for gpuaffinity_build_info.
	Logger *slog.Logger
}

// Exporter renders the node and its live counters as Prometheus metrics.
type Exporter struct {
	opts Options
	reg  *prometheus.Registry
}

// New returns an Exporter for opts.
func New(opts Options) (*Exporter, error) {
	return &Exporter{opts: opts, reg: prometheus.NewRegistry()}, nil
}

// Handler serves /metrics. Concurrent scrapes share one collection; a
// failing collector marks itself unsuccessful and the rest still answers 200.
func (e *Exporter) Handler() http.Handler {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer gathers one collection (what Handler serves).
func (e *Exporter) Gatherer() prometheus.Gatherer { return e.reg }

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
