package exporter

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// series is one sample of a collector: what prometheus.NewConstMetric
// builds, with label pairs that come from the collector's labelCache and
// are shared by every scrape that sends the same series. A series is
// never modified once sent, and neither are its label pairs: the
// gathered families point at both.
type series struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	typ    prometheus.ValueType
	val    float64
}

func (m *series) Desc() *prometheus.Desc { return m.desc }

// Write fills out as prometheus.NewConstMetric's Write does.
func (m *series) Write(out *dto.Metric) error {
	out.Label = m.labels
	switch m.typ {
	case prometheus.CounterValue:
		out.Counter = &dto.Counter{Value: &m.val}
	case prometheus.GaugeValue:
		out.Gauge = &dto.Gauge{Value: &m.val}
	default:
		out.Untyped = &dto.Untyped{Value: &m.val}
	}
	return nil
}

// seriesChunk is how many series a sink allocates at once.
const seriesChunk = 256

// labelCache keeps the label pairs of the series one collector sent, by
// metric and label values, so that a series sent again costs no label
// allocation, validation or sorting. It belongs to one collector, whose
// runs never overlap (collector.busy), and needs no lock.
//
// It holds the series of the last runs only: after a run, when it holds
// more than twice the series that run used (devices that went away,
// renumbered GPUs), the entries that run did not use are dropped, so its
// size follows the node's, not the agent's uptime.
type labelCache struct {
	byDesc map[*prometheus.Desc]map[string]*labelEntry
	key    []byte // scratch for the key of several label values
	gen    uint64 // the current run
	used   int    // entries used in this run
	size   int    // entries in all
}

type labelEntry struct {
	pairs []*dto.LabelPair
	gen   uint64 // the last run that used the entry
}

// pairs returns the label pairs of d with the label values labels, as
// prometheus.NewConstMetric makes them, and NewConstMetric's error where
// it refuses them (a wrong number of values, a value that is not UTF-8).
func (c *labelCache) pairs(d *prometheus.Desc, t prometheus.ValueType, v float64, labels []string) ([]*dto.LabelPair, error) {
	m := c.descMap(d)
	// The key of several values joins them with 0xff, a byte no UTF-8
	// text has: values that are not UTF-8 are never cached, so two keys
	// are equal only for equal values.
	var e *labelEntry
	switch len(labels) {
	case 0:
		e = m[""]
	case 1:
		e = m[labels[0]]
	default:
		k := c.key[:0]
		for i, l := range labels {
			if i > 0 {
				k = append(k, 0xff)
			}
			k = append(k, l...)
		}
		c.key = k
		e = m[string(k)]
	}
	if e != nil {
		return c.use(e), nil
	}
	e, err := newLabelEntry(d, t, v, labels)
	if err != nil {
		return nil, err
	}
	switch len(labels) {
	case 0:
		m[""] = e
	case 1:
		m[labels[0]] = e
	default:
		m[string(c.key)] = e
	}
	return c.add(e), nil
}

// gpuPairs is pairs for a series of one GPU, whose desc's labels are
// gpuLabelNames and then extra's: the label values g.values and extra.
// Its key is the one pairs would build for them, from g.key, which spares
// joining the GPU's values at every series.
func (c *labelCache) gpuPairs(d *prometheus.Desc, t prometheus.ValueType, v float64, g *gpuLabels, extra []string) ([]*dto.LabelPair, error) {
	m := c.descMap(d)
	var e *labelEntry
	if len(extra) == 0 {
		e = m[g.key]
	} else {
		k := append(c.key[:0], g.key...)
		for _, l := range extra {
			k = append(k, 0xff)
			k = append(k, l...)
		}
		c.key = k
		e = m[string(k)]
	}
	if e != nil {
		return c.use(e), nil
	}
	labels := make([]string, 0, len(g.values)+len(extra))
	labels = append(append(labels, g.values...), extra...)
	e, err := newLabelEntry(d, t, v, labels)
	if err != nil {
		return nil, err
	}
	g.share(e.pairs)
	if len(extra) == 0 {
		m[g.key] = e
	} else {
		m[string(c.key)] = e
	}
	return c.add(e), nil
}

// descMap returns the entries of d, creating the map on first use.
func (c *labelCache) descMap(d *prometheus.Desc) map[string]*labelEntry {
	m := c.byDesc[d]
	if m == nil {
		if c.byDesc == nil {
			c.byDesc = map[*prometheus.Desc]map[string]*labelEntry{}
		}
		m = map[string]*labelEntry{}
		c.byDesc[d] = m
	}
	return m
}

// use marks an entry found in the cache as used by this run.
func (c *labelCache) use(e *labelEntry) []*dto.LabelPair {
	if e.gen != c.gen {
		e.gen = c.gen
		c.used++
	}
	return e.pairs
}

// add counts a new entry, used by this run.
func (c *labelCache) add(e *labelEntry) []*dto.LabelPair {
	e.gen = c.gen
	c.size++
	c.used++
	return e.pairs
}

// newLabelEntry builds the label pairs with prometheus.NewConstMetric, so
// they are what the library makes (sorted by name) and refused where it
// refuses them.
func newLabelEntry(d *prometheus.Desc, t prometheus.ValueType, v float64, labels []string) (*labelEntry, error) {
	m, err := prometheus.NewConstMetric(d, t, v, append([]string(nil), labels...)...)
	if err != nil {
		return nil, err
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		return nil, err
	}
	return &labelEntry{pairs: out.Label}, nil
}

// endRun closes a run: it drops the entries the run did not use when they
// are more than those it used (a Go map keeps its size once grown, so the
// kept entries move to new maps).
func (c *labelCache) endRun() {
	if c.size > 2*c.used+64 {
		byDesc := make(map[*prometheus.Desc]map[string]*labelEntry, len(c.byDesc))
		size := 0
		for d, m := range c.byDesc {
			var kept map[string]*labelEntry
			for k, e := range m {
				if e.gen != c.gen {
					continue
				}
				if kept == nil {
					kept = map[string]*labelEntry{}
				}
				kept[k] = e
				size++
			}
			if kept != nil {
				byDesc[d] = kept
			}
		}
		c.byDesc, c.size = byDesc, size
	}
	c.gen++
	c.used = 0
}
