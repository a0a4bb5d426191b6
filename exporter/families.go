package exporter

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// familyBuilder turns one collection of the exporter's own metrics into
// metric families, as prometheus.Registry.Gather does with a collector's
// metrics (processMetric, checkMetricConsistency, NormalizeMetricFamilies)
// but without its per-metric costs: no channel, a dto.Metric and its value
// allocated a chunk at a time, no hash per metric. It gives the same
// families: one per name, sorted by name, their metrics sorted by label
// values; a metric with the labels of one added before it (the registry
// keeps the first one collected) or of another type than its family's
// first is left out with an error, as the registry does.
//
// The registry's other checks hold by construction: every desc is
// newDesc's (valid names, no const labels), every metric is
// prometheus.NewConstMetric's or a series whose label pairs it made
// (labelCache), so their values are UTF-8 and match the desc's labels.
type familyBuilder struct {
	byDesc map[*prometheus.Desc]*dto.MetricFamily
	errs   []error
	hint   familyCounts // chunk sizes: the last collection's counts
	n      familyCounts // the counts of this one

	metrics  []dto.Metric
	gauges   []dto.Gauge
	counters []dto.Counter
}

// familyCounts counts the metrics of a collection, and of them the
// series' gauges and counters.
type familyCounts struct{ metrics, gauges, counters int }

func newFamilyBuilder(hint familyCounts) *familyBuilder {
	return &familyBuilder{byDesc: make(map[*prometheus.Desc]*dto.MetricFamily, len(fixedDescs)+len(rdmaCounters)), hint: hint}
}

// chunk is the size of a new chunk: what the last collection used, less
// what this one used so far, at least 32.
func chunk(hint, used int) int { return max(hint-used, 32) }

// add adds one metric.
func (b *familyBuilder) add(m prometheus.Metric) {
	d := m.Desc()
	mf := b.byDesc[d]
	if mf == nil {
		meta, ok := descFamilies[d]
		if !ok {
			b.errs = append(b.errs, fmt.Errorf("exporter: metric of an unknown descriptor %s", d))
			return
		}
		mf = &dto.MetricFamily{Name: meta.name, Help: meta.help}
		b.byDesc[d] = mf
	}
	dm := b.metric()
	if s, ok := m.(*series); ok {
		dm.Label = s.labels
		switch s.typ {
		case prometheus.CounterValue:
			c := b.counter()
			c.Value = &s.val
			dm.Counter = c
		case prometheus.GaugeValue:
			g := b.gauge()
			g.Value = &s.val
			dm.Gauge = g
		default:
			dm.Untyped = &dto.Untyped{Value: &s.val}
		}
	} else if err := m.Write(dm); err != nil {
		b.errs = append(b.errs, fmt.Errorf("error collecting metric %v: %w", d, err))
		return
	}
	var t dto.MetricType
	switch {
	case dm.Gauge != nil:
		t = dto.MetricType_GAUGE
	case dm.Counter != nil:
		t = dto.MetricType_COUNTER
	case dm.Untyped != nil:
		t = dto.MetricType_UNTYPED
	case dm.Summary != nil:
		t = dto.MetricType_SUMMARY
	case dm.Histogram != nil:
		t = dto.MetricType_HISTOGRAM
	default:
		b.errs = append(b.errs, fmt.Errorf("empty metric collected: %s", dm))
		return
	}
	if mf.Type == nil {
		mf.Type = t.Enum()
	} else if *mf.Type != t {
		b.errs = append(b.errs, fmt.Errorf("collected metric %q { %s} is not a %s", mf.GetName(), dm, mf.GetType()))
		return
	}
	mf.Metric = append(mf.Metric, dm)
}

// metric, gauge and counter hand out zero values from chunks, so that a
// collection allocates each kind a few times, not once a metric.
func (b *familyBuilder) metric() *dto.Metric {
	return nextZero(&b.metrics, b.hint.metrics, &b.n.metrics)
}

func (b *familyBuilder) gauge() *dto.Gauge {
	return nextZero(&b.gauges, b.hint.gauges, &b.n.gauges)
}

func (b *familyBuilder) counter() *dto.Counter {
	return nextZero(&b.counters, b.hint.counters, &b.n.counters)
}

// nextZero hands out the next zero value of *buf, starting a new chunk
// (sized by the last collection's count hint, less the used already)
// when the current one is full.
func nextZero[T any](buf *[]T, hint int, used *int) *T {
	if len(*buf) == cap(*buf) {
		*buf = make([]T, 0, chunk(hint, *used))
	}
	*used++
	*buf = (*buf)[:len(*buf)+1]
	return &(*buf)[len(*buf)-1]
}

// families returns the families, sorted by name, with their metrics
// sorted as the registry sorts them (internal.MetricSorter: by label
// values, in label name order), the errors of add and of duplicates, and
// the counts for the next collection's builder.
func (b *familyBuilder) families() ([]*dto.MetricFamily, []error, familyCounts) {
	out := make([]*dto.MetricFamily, 0, len(b.byDesc))
	for _, mf := range b.byDesc {
		if len(mf.Metric) == 0 {
			continue // none could be added; the registry has no such family either
		}
		// Stable: of metrics with equal labels the first added stays
		// first, and is the one kept.
		if !slices.IsSortedFunc(mf.Metric, compareLabelValues) {
			sortfn.SortStable(mf.Metric, compareLabelValues)
		}
		kept := mf.Metric[:1]
		for _, m := range mf.Metric[1:] {
			if compareLabelValues(kept[len(kept)-1], m) == 0 {
				b.errs = append(b.errs, fmt.Errorf("collected metric %q { %s} was collected before with the same name and label values", mf.GetName(), m))
				continue
			}
			kept = append(kept, m)
		}
		mf.Metric = kept
		out = append(out, mf)
	}
	sortfn.Sort(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, b.errs, b.n
}

// compareLabelValues orders metrics as internal.MetricSorter does, for
// metrics without timestamps.
func compareLabelValues(a, b *dto.Metric) int {
	if len(a.Label) != len(b.Label) {
		return cmp.Compare(len(a.Label), len(b.Label))
	}
	for i, l := range a.Label {
		if c := strings.Compare(l.GetValue(), b.Label[i].GetValue()); c != 0 {
			return c
		}
	}
	return 0
}

// mergeFamilies merges two lists of families sorted by name. A name in
// both is kept from own, with an error: the registry reserves the
// exporter's names (ownDescs), so only an unchecked collector can clash.
func mergeFamilies(reg, own []*dto.MetricFamily) ([]*dto.MetricFamily, error) {
	out := make([]*dto.MetricFamily, 0, len(reg)+len(own))
	var errs []error
	i, j := 0, 0
	for i < len(reg) || j < len(own) {
		switch {
		case j == len(own) || (i < len(reg) && reg[i].GetName() < own[j].GetName()):
			out = append(out, reg[i])
			i++
		case i == len(reg) || own[j].GetName() < reg[i].GetName():
			out = append(out, own[j])
			j++
		default:
			errs = append(errs, fmt.Errorf("metric family %s is both the exporter's and a registered collector's: the collector's is dropped", own[j].GetName()))
			out = append(out, own[j])
			i++
			j++
		}
	}
	return out, errors.Join(errs...)
}
