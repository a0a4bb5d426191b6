package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// evalTime is T, the time every query is evaluated at: the series are
// the hour before it.
var evalTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// gapBefore is how long before T the gapped nodes vanished: their last
// sample is older than Prometheus's 5-minute lookback delta, and their up
// is 0 since.
const gapBefore = 10 * time.Minute

// family is one metric family the fleet reader queries. Windowed
// families have a sample every interval over the window before T, the
// others only two, in the last minutes before T (enough for an instant
// query at T).
type family struct {
	name     string
	windowed bool
}

var families = []family{
	{"up", true},
	{"gpuaffinity_node_placement_info", true},
	{"gpuaffinity_node_layout_info", true},
	{"gpuaffinity_topology_imex_config_nodes", false},
	{"gpuaffinity_gpu_info", false},
	{"gpuaffinity_topology_pair_info", false},
	{"gpuaffinity_rdma_info", false},
}

// series is one series of a node: its labels, the target's last.
type series struct {
	labels []label
	value  float64 // while the node is up
}

type label struct{ name, value string }

// series returns the node's series of family f, each with the target
// labels the shipped ServiceMonitor gives them (job, instance, node).
// Labels with empty values are left out, as Prometheus drops them at the
// scrape.
func (nd *node) series(f string) []series {
	var out []series
	add := func(v float64, ls ...label) {
		s := series{value: v}
		for _, l := range ls {
			if l.value != "" {
				s.labels = append(s.labels, l)
			}
		}
		s.labels = append(s.labels, label{"job", "gpuaffinity"}, label{"instance", nd.instance}, label{"node", nd.name})
		out = append(out, s)
	}
	m := nd.m
	gpuLabels := func(i int) []label {
		g := m.gpus[i]
		return []label{{"gpu", strconv.Itoa(i)}, {"UUID", nd.uuids[i]}, {"pci_bus_id", nvmlBusID(g.bus)},
			{"model_name", m.gpuModel}, {"Hostname", nd.name}}
	}
	switch f {
	case "up":
		add(1)
	case "gpuaffinity_node_placement_info":
		tier := func(i int) string {
			if i < len(nd.tiers) {
				return nd.tiers[i]
			}
			return ""
		}
		add(1, label{"hostname", nd.name}, label{"model", m.model}, label{"gpu_model", m.gpuModel}, label{"cloud", m.cloud},
			label{"tier0", tier(0)}, label{"tier1", tier(1)}, label{"tier2", tier(2)}, label{"host_id", nd.hostID},
			label{"clique", nd.clique}, label{"chassis_serial", nd.chassis}, label{"slot", nd.slot}, label{"tray", nd.tray},
			label{"source", nd.source})
	case "gpuaffinity_node_layout_info":
		add(1, label{"hostname", nd.name}, label{"model", m.model}, label{"gpu_model", m.gpuModel},
			label{"layout", nd.layout}, label{"firmware", nd.fwDigest})
	case "gpuaffinity_topology_imex_config_nodes":
		if m.imex > 0 {
			add(float64(m.imex))
		}
	case "gpuaffinity_gpu_info":
		for i, g := range m.gpus {
			add(1, append(gpuLabels(i), label{"uuid", nd.uuids[i]}, label{"bus_id", g.bus}, label{"model", m.gpuModel},
				label{"numa_node", strconv.Itoa(g.numa)})...)
		}
	case "gpuaffinity_topology_pair_info":
		for i := range m.gpus {
			for _, nic := range nd.pairs[i] {
				add(1, append(gpuLabels(i), label{"nic", nic}, label{"class", nd.class[i]})...)
			}
		}
	case "gpuaffinity_rdma_info":
		for i, nic := range m.nics {
			add(1, label{"device", nic.dev}, label{"port", "1"}, label{"link_layer", nic.linkLayer}, label{"fabric", nic.fabric},
				label{"role", nic.role}, label{"netdev", nic.netdev}, label{"bus_id", nic.bus}, label{"firmware", nd.firmware[i]})
		}
	default:
		panic("fleetbench: no family " + f)
	}
	return out
}

// nvmlBusID writes a sysfs bus id as NVML does: "00000000:1B:00.0".
func nvmlBusID(id string) string {
	domain, rest, _ := strings.Cut(id, ":")
	return strings.Repeat("0", 8-len(domain)) + strings.ToUpper(domain) + ":" + strings.ToUpper(rest)
}

// sampling says when the series have samples.
type sampling struct {
	interval, window time.Duration
}

// times returns the sample times of a series of family f of a node,
// oldest first, and for each the value's factor (1 present, 0 the up of
// a gapped node).
func (s sampling) times(f family, gapped bool) (ts []time.Time, up []bool) {
	gap := evalTime.Add(-gapBefore)
	if !f.windowed {
		// Two samples in the last minutes: before T, or before the gap.
		end := evalTime
		if gapped {
			end = gap
		}
		return []time.Time{end.Add(-2 * time.Minute), end.Add(-time.Minute)}, []bool{true, true}
	}
	for t := evalTime.Add(-s.window); t.Before(evalTime); t = t.Add(s.interval) {
		present := !gapped || t.Before(gap)
		if !present && f.name != "up" {
			continue
		}
		ts, up = append(ts, t), append(up, present)
	}
	return ts, up
}

// writeOpenMetrics writes the fleet's series as OpenMetrics text with
// timestamps, as promtool tsdb create-blocks-from openmetrics reads it:
// each family's lines together under its # TYPE, each series' samples
// in increasing time order, # EOF at the end. It returns the number of
// series and samples written.
func writeOpenMetrics(w io.Writer, nodes []*node, s sampling) (nseries, nsamples int, err error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var line []byte
	for _, f := range families {
		fmt.Fprintf(bw, "# TYPE %s gauge\n", f.name)
		for _, nd := range nodes {
			ts, present := s.times(f, nd.gapped)
			for _, sr := range nd.series(f.name) {
				nseries++
				head := appendSeries(nil, f.name, sr.labels)
				for i, t := range ts {
					v := sr.value
					if !present[i] {
						v = 0
					}
					line = append(line[:0], head...)
					line = append(line, ' ')
					line = strconv.AppendFloat(line, v, 'g', -1, 64)
					line = append(line, ' ')
					line = strconv.AppendInt(line, t.Unix(), 10)
					line = append(line, '\n')
					bw.Write(line)
					nsamples++
				}
			}
		}
	}
	bw.WriteString("# EOF\n")
	return nseries, nsamples, bw.Flush()
}

// appendSeries appends name{labels} with OpenMetrics escaping.
func appendSeries(b []byte, name string, ls []label) []byte {
	b = append(b, name...)
	b = append(b, '{')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l.name...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, l.value) // the values are ASCII: Go's and OpenMetrics' escapes agree
	}
	return append(b, '}')
}
