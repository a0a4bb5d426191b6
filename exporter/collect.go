package exporter

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ownDescs describes every metric of the exporter's own collection
// (Exporter.collect) and collects nothing: registered in the registry, it
// reserves the names, so a registration that conflicts with them fails.
// The collection bypasses the registry (familyBuilder).
type ownDescs struct{}

func (ownDescs) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range fixedDescs {
		ch <- d
	}
	for _, rc := range rdmaCounters {
		ch <- rc.desc
	}
}

func (ownDescs) Collect(chan<- prometheus.Metric) {}

// gatherAll gathers the registry (build info, Go, process, promhttp) and
// the exporter's own collection at once, and merges them.
func (e *Exporter) gatherAll() ([]*dto.MetricFamily, error) {
	var (
		reg    []*dto.MetricFamily
		regErr error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		reg, regErr = e.reg.Gather()
	}()
	own, ownErr := e.collectSafe()
	<-done
	mfs, mergeErr := mergeFamilies(reg, own)
	return mfs, errors.Join(regErr, ownErr, mergeErr)
}

// collectSafe is collect, a panic being its error (as the registry
// recovers a collector's).
func (e *Exporter) collectSafe() (mfs []*dto.MetricFamily, err error) {
	defer func() {
		if v := recover(); v != nil {
			mfs, err = nil, fmt.Errorf("exporter: collection panicked: %v\n%s", v, debug.Stack())
		}
	}()
	return e.collect()
}

// collect runs one collection of the exporter's own metrics: the
// collectors at once, each under the deadline, and the agent's own
// metrics meanwhile. Collector failures are their success series, not
// errors; the error is of metrics that could not be rendered.
func (e *Exporter) collect() ([]*dto.MetricFamily, error) {
	st := e.state()
	if e.shareRDMA {
		st.ports = &portsRead{r: e.rdma}
	}
	results := make([]result, len(e.parts))
	var wg sync.WaitGroup
	for i, p := range e.parts {
		if p.applies != nil && !p.applies(&st) {
			results[i].skip = true
			continue
		}
		wg.Go(func() { results[i] = e.run(p, &st) })
	}
	e.countsMu.Lock()
	b := newFamilyBuilder(e.counts)
	e.countsMu.Unlock()
	var own sink
	collectAgent(&st, e.gpus.get(st.Node), e.opts.XID, &own)
	for _, m := range own.ms {
		b.add(m)
	}
	for _, err := range own.errs {
		e.log.Error("exporter: agent metrics", "err", err)
	}
	wg.Wait()
	for i, p := range e.parts {
		r := results[i]
		if r.skip {
			continue
		}
		for _, m := range r.ms {
			b.add(m)
		}
		b.add(prometheus.MustNewConstMetric(descCollectorDuration, prometheus.GaugeValue, r.dur.Seconds(), p.name))
		b.add(prometheus.MustNewConstMetric(descCollectorSuccess, prometheus.GaugeValue, b2f(r.err == nil), p.name))
	}
	mfs, errs, n := b.families()
	e.countsMu.Lock()
	e.counts = n
	e.countsMu.Unlock()
	return mfs, errors.Join(errs...)
}

// collector is one part of a collection.
type collector struct {
	name string
	// run sends its metrics to s and returns why it failed; it should
	// stop early once ctx is done.
	run func(ctx context.Context, st *State, s *sink) error
	// applies, where set, says whether the collector has anything to do
	// for st; where it has not, the collection neither runs it nor sends
	// its scrape_collector_* series (the amdgpu collector on a node
	// without AMD GPUs).
	applies func(st *State) bool

	mu      sync.Mutex
	busy    bool   // a run (maybe past its deadline) has not returned yet
	lastErr string // the last run's error, to log changes only

	// Used by the run in progress only (busy).
	labels labelCache // the label pairs of the series the last runs sent
	lastN  int        // how many series the last run sent
}

// result is what one run of a collector gave.
type result struct {
	ms   []prometheus.Metric
	err  error
	dur  time.Duration
	skip bool // not run: the collector does not apply (collector.applies)
}

var errBusy = errors.New("still running from an earlier collection")

// run runs p under the deadline. Past it, the result says so and the
// collector's output, whenever it comes, is dropped.
func (e *Exporter) run(p *collector, st *State) (r result) {
	start := time.Now()
	defer func() {
		r.dur = time.Since(start)
		e.logChange(p, r.err)
	}()
	p.mu.Lock()
	if p.busy {
		p.mu.Unlock()
		return result{err: errBusy}
	}
	p.busy = true
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		defer func() {
			p.mu.Lock()
			p.busy = false
			p.mu.Unlock()
		}()
		s := sink{ms: make([]prometheus.Metric, 0, p.lastN), lc: &p.labels, buf: make([]series, 0, p.lastN)}
		err := func() (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
				}
			}()
			return p.run(ctx, st, &s)
		}()
		p.labels.endRun()
		p.lastN = len(s.ms)
		done <- result{ms: s.ms, err: errors.Join(append([]error{err}, s.errs...)...)}
	}()
	select {
	case r = <-done:
		return r
	case <-ctx.Done():
		return result{err: fmt.Errorf("deadline of %s exceeded", e.timeout)}
	}
}

// logChange logs a collector's error when it differs from the last run's,
// and its recovery, so a persistent failure is one line, not one a scrape.
func (e *Exporter) logChange(p *collector, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	p.mu.Lock()
	changed := msg != p.lastErr
	p.lastErr = msg
	p.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		e.log.Warn("exporter: collector failed", "collector", p.name, "err", err)
	default:
		e.log.Info("exporter: collector recovered", "collector", p.name)
	}
}

// sink collects one collector's metrics; a metric that cannot be built
// (a label value that is not UTF-8) becomes an error.
type sink struct {
	ms   []prometheus.Metric
	errs []error
	// lc, where set, is the collector's label cache: the metrics are
	// series with cached label pairs, allocated a chunk at a time in buf.
	// Without it they are prometheus.NewConstMetric's.
	lc  *labelCache
	buf []series
}

func (s *sink) add(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	if s.lc == nil {
		m, err := prometheus.NewConstMetric(d, t, v, labels...)
		if err != nil {
			s.errs = append(s.errs, err)
			return
		}
		s.ms = append(s.ms, m)
		return
	}
	pairs, err := s.lc.pairs(d, t, v, labels)
	if err != nil {
		s.errs = append(s.errs, err)
		return
	}
	s.send(d, t, v, pairs)
}

// send adds a series with label pairs of the label cache.
func (s *sink) send(d *prometheus.Desc, t prometheus.ValueType, v float64, pairs []*dto.LabelPair) {
	if len(s.buf) == cap(s.buf) {
		s.buf = make([]series, 0, seriesChunk)
	}
	s.buf = append(s.buf, series{desc: d, labels: pairs, typ: t, val: v})
	s.ms = append(s.ms, &s.buf[len(s.buf)-1])
}

// addGPU adds a series of one GPU: d's labels are gpuLabelNames, then
// extra's.
func (s *sink) addGPU(d *prometheus.Desc, t prometheus.ValueType, v float64, g *gpuLabels, extra []string) {
	if s.lc == nil {
		labels := make([]string, 0, len(g.values)+len(extra))
		s.add(d, t, v, append(append(labels, g.values...), extra...)...)
		return
	}
	pairs, err := s.lc.gpuPairs(d, t, v, g, extra)
	if err != nil {
		s.errs = append(s.errs, err)
		return
	}
	s.send(d, t, v, pairs)
}

// gpuGauge and gpuCounter send a series of the GPU g, with extra's
// labels after the GPU's (a link, an XID code).
func (s *sink) gpuGauge(d *prometheus.Desc, v float64, g *gpuLabels, extra ...string) {
	s.addGPU(d, prometheus.GaugeValue, v, g, extra)
}

func (s *sink) gpuCounter(d *prometheus.Desc, v float64, g *gpuLabels, extra ...string) {
	s.addGPU(d, prometheus.CounterValue, v, g, extra)
}

func (s *sink) gauge(d *prometheus.Desc, v float64, labels ...string) {
	s.add(d, prometheus.GaugeValue, v, labels...)
}

func (s *sink) counter(d *prometheus.Desc, v float64, labels ...string) {
	s.add(d, prometheus.CounterValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func itoa(i int) string { return strconv.Itoa(i) }
