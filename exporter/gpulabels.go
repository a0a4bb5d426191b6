package exporter

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/pci"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The join labels. Every series of one GPU carries, besides gpu, the
// labels dcgm-exporter puts on its per-GPU series, with the values it
// gives them, so that a query can join the two on(UUID) or
// on(Hostname, gpu) (docs/metrics.md, "Joining with dcgm-exporter and
// node_exporter"). dcgm-exporter 4.5.3-4.8.2 writes them in
// internal/pkg/rendermetrics/render_metrics.go (gpuMetricsFormat) from
// the values of internal/pkg/collector/gpu_collector.go (toMetric):
//
//	gpu         DCGM's GPU id (the NVML index here)
//	UUID        the GPU's UUID, "GPU-" and NVML's hex digits
//	pci_bus_id  DCGM's PCI bus id, NVML's form "00000000:1B:00.0"
//	modelName   the GPU's name, "NVIDIA H100 80GB HBM3"
//	Hostname    $NODE_NAME, else the host name (internal/pkg/hostname)
//
// modelName is model_name here, the name dcgm-exporter gives the same
// value on its NVLink series (linkMetricsFormat): promlint, and so
// promtool check metrics, refuses camelCase label names. The other names
// are dcgm-exporter's (promlint accepts UUID and Hostname, which have no
// lower-case letter before an upper-case one).
//
// dcgm-exporter's device label ("nvidia" and its gpu id) is left out: it
// says nothing gpu does not, and device names the RDMA device on the
// RDMA series, as on node_exporter's.
//
// The values are functions of the GPU: each GPU of a discovery has one
// set, built once per discovery (gpuLabelCache), so the labels add no
// series and cost a scrape no allocation.
var gpuLabelNames = []string{"gpu", "UUID", "pci_bus_id", "model_name", "Hostname"}

// gpuLabels is one GPU's join label values. It is never modified once
// built: series of many scrapes share it.
type gpuLabels struct {
	index  int      // the gpu label's value as a number
	values []string // the values of gpuLabelNames, in their order
	// key is values joined with 0xff: the labelCache key of the GPU's
	// series without further labels, and the head of the others' keys.
	key string
	// pairs are the label pairs of values, which the cached label pairs
	// of all the GPU's series share (labelCache.gpuPairs): one set of
	// pairs a GPU, not one a series, for the collector to keep and the
	// garbage collector to scan.
	pairs []*dto.LabelPair
}

func newGPULabels(index int, uuid, busID, model, host string) *gpuLabels {
	g := &gpuLabels{index: index, values: []string{itoa(index), uuid, pciBusID(busID), model, host}}
	g.key = strings.Join(g.values, "\xff")
	g.pairs = make([]*dto.LabelPair, len(gpuLabelNames))
	for i := range gpuLabelNames {
		g.pairs[i] = &dto.LabelPair{Name: &gpuLabelNames[i], Value: &g.values[i]}
	}
	return g
}

// share replaces the pairs of ps that equal one of g's by g's.
func (g *gpuLabels) share(ps []*dto.LabelPair) {
	for i, p := range ps {
		for _, q := range g.pairs {
			if p.GetName() == q.GetName() && p.GetValue() == q.GetValue() {
				ps[i] = q
				break
			}
		}
	}
}

// pciBusID writes a PCI bus id in the sysfs form ("0000:1b:00.0", as
// topology.GPU.BusID and nvml.GPU.BusID hold it) as NVML writes it, and so
// DCGM and dcgm-exporter: NVML_DEVICE_PCI_BUS_ID_FMT, "%08X:%02X:%02X.0"
// (nvml.h), an 8-digit domain and upper-case hex ("00000000:1B:00.0").
// An id not in the sysfs form is only upper-cased; "" stays "".
func pciBusID(id string) string {
	a, err := pci.ParseAddress(id)
	if err != nil || strings.Count(id, ":") != 2 {
		return strings.ToUpper(id)
	}
	return a.NVMLString()
}

// gpuLabelSet holds the join labels of one discovery's GPUs.
type gpuLabelSet struct {
	node    *topology.Node
	host    string
	byIndex map[int]*gpuLabels // the discovery's GPUs, by topology.GPU.Index
	byNVML  map[int]*gpuLabels // the same, by NVML index (the XID counts')

	mu     sync.Mutex
	others map[nvmlGPUKey]*gpuLabels // GPUs NVML answers for that the discovery does not know
}

// nvmlGPUKey is what the join labels of a GPU the discovery does not
// know are made of.
type nvmlGPUKey struct {
	index            int
	uuid, bus, model string
}

func newGPULabelSet(n *topology.Node, host string) *gpuLabelSet {
	set := &gpuLabelSet{node: n, host: host, byIndex: map[int]*gpuLabels{}, byNVML: map[int]*gpuLabels{}}
	if n == nil {
		return set
	}
	set.host = cmp.Or(host, n.Hostname)
	for i := range n.GPUs {
		ng := &n.GPUs[i]
		g := newGPULabels(ng.Index, ng.UUID, ng.BusID, ng.Model, set.host)
		set.byIndex[ng.Index] = g
		if ng.NVMLIndex != nil {
			set.byNVML[*ng.NVMLIndex] = g
		}
	}
	return set
}

// discovered returns the labels of the discovery's GPU ng. They are the
// discovery's values only, never what NVML answers at a scrape, so that
// they do not change while the discovery stands.
func (s *gpuLabelSet) discovered(ng *topology.GPU) *gpuLabels {
	if g := s.byIndex[ng.Index]; g != nil {
		return g
	}
	return newGPULabels(ng.Index, ng.UUID, ng.BusID, ng.Model, s.host) // not of s.node
}

// nvmlOnly returns the labels of a GPU NVML answers for that the
// discovery does not know (before the first discovery, or one that
// appeared since): NVML's values, kept for the discovery's life.
func (s *gpuLabelSet) nvmlOnly(g *nvml.GPU) *gpuLabels {
	k := nvmlGPUKey{g.Index, g.UUID, g.BusID, g.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.others[k]; l != nil {
		return l
	}
	if s.others == nil {
		s.others = map[nvmlGPUKey]*gpuLabels{}
	}
	l := newGPULabels(g.Index, g.UUID, g.BusID, g.Name, s.host)
	s.others[k] = l
	return l
}

// xid returns the labels of the GPU with NVML index i, for its XID
// series: the discovery's GPU of that index, else gpu and Hostname only.
func (s *gpuLabelSet) xid(i int) *gpuLabels {
	if g := s.byNVML[i]; g != nil {
		return g
	}
	return s.nvmlOnly(&nvml.GPU{Index: i})
}

// gpuLabelCache keeps the gpuLabelSet of the current State.Node (which the
// agent replaces, never modifies); the collectors that run at once share
// it.
type gpuLabelCache struct {
	host string // the Hostname label, when known without a discovery

	mu  sync.Mutex
	set *gpuLabelSet
}

// get returns the set of n, building it when n is not the last node.
func (c *gpuLabelCache) get(n *topology.Node) *gpuLabelSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil || c.set.node != n {
		c.set = newGPULabelSet(n, c.host)
	}
	return c.set
}

// hostname is the Hostname label's value, resolved once as dcgm-exporter
// resolves its own (internal/pkg/hostname, getLocalHostname): the
// option, else $NODE_NAME (the DaemonSet sets it to spec.nodeName), else
// the host name of root, <root>/proc/sys/kernel/hostname (the file
// os.Hostname reads on Linux and discovery reads as topology.Node.Hostname).
// "" when none is known; the GPU series then take the discovery's
// hostname.
func hostname(option, root string) string {
	if option != "" {
		return option
	}
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/hostname")); err == nil {
		if h := strings.TrimSpace(string(b)); h != "" {
			return h
		}
	}
	if rootfs.IsLive(root) {
		if h, err := os.Hostname(); err == nil {
			return h
		}
	}
	return ""
}
