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
)

// nodeCollector is the exporter's prometheus.Collector: every metric but
// build info, Go and process metrics.
type nodeCollector struct{ e *Exporter }

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range fixedDescs {
		ch <- d
	}
	for _, rc := range rdmaCounters {
		ch <- rc.desc
	}
}

// Collect runs the collectors at once, each under the deadline, and sends
// the agent's own metrics meanwhile.
func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	st := e.state()
	results := make([]result, len(e.parts))
	var wg sync.WaitGroup
	for i, p := range e.parts {
		wg.Go(func() { results[i] = e.run(p, &st) })
	}
	var own sink
	collectAgent(&st, e.opts.XID, &own)
	for _, m := range own.ms {
		ch <- m
	}
	for _, err := range own.errs {
		e.log.Error("exporter: agent metrics", "err", err)
	}
	wg.Wait()
	for i, p := range e.parts {
		r := results[i]
		for _, m := range r.ms {
			ch <- m
		}
		ch <- prometheus.MustNewConstMetric(descCollectorDuration, prometheus.GaugeValue, r.dur.Seconds(), p.name)
		ch <- prometheus.MustNewConstMetric(descCollectorSuccess, prometheus.GaugeValue, b2f(r.err == nil), p.name)
	}
}

// collector is one part of a collection.
type collector struct {
	name string
	// run sends its metrics to s and returns why it failed; it should
	// stop early once ctx is done.
	run func(ctx context.Context, st *State, s *sink) error

	mu      sync.Mutex
	busy    bool   // a run (maybe past its deadline) has not returned yet
	lastErr string // the last run's error, to log changes only
}

// result is what one run of a collector gave.
type result struct {
	ms  []prometheus.Metric
	err error
	dur time.Duration
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
		var s sink
		err := func() (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
				}
			}()
			return p.run(ctx, st, &s)
		}()
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
}

func (s *sink) add(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		s.errs = append(s.errs, err)
		return
	}
	s.ms = append(s.ms, m)
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
