// Package prom reads the fleet from a Prometheus server: the node series
// every gpuaffinity agent exports (gpuaffinity_node_placement_info,
// gpuaffinity_node_layout_info, gpuaffinity_topology_imex_config_nodes)
// and the pairing, GPU and RDMA series the layout digest covers, through
// the server's HTTP API (client_golang's api/prometheus/v1), one instant
// query per family. Series of one agent are joined on their job and
// instance labels, which Prometheus gives every series of a target.
package prom

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gpuaffinity/gpuaffinity/fleet"
)

// Defaults of Options.
const (
	DefaultURL       = "http://localhost:9090"
	DefaultNodeLabel = "hostname"
	DefaultTimeout   = 30 * time.Second
)

// Options say which server to ask and how to name the nodes.
type Options struct {
	// URL is the Prometheus server's base URL; default DefaultURL.
	URL string
	// Selector are label matchers every query adds, with or without
	// braces: `job="gpuaffinity"`, `{cluster="a"}`; "" none.
	Selector string
	// NodeLabel is the label of gpuaffinity_node_placement_info whose
	// value is the node's name in the scheduler: hostname (the agent's
	// own, the default), node (a relabelling's Kubernetes node name),
	// instance (the scrape target, its port dropped) or any other.
	NodeLabel string
	// Timeout bounds all the queries together; default DefaultTimeout.
	Timeout time.Duration
	// Client is the HTTP client (TLS, authentication); nil means
	// http.DefaultClient's transport.
	Client *http.Client
	// Time is the evaluation time; zero means now.
	Time time.Time
}

// Read returns the fleet's nodes, sorted by name, and warnings naming
// each target it left out or read in part (no name, a name taken by
// another target, series of a family missing).
func Read(ctx context.Context, o Options) ([]fleet.Node, []string, error) {
	o.URL = cmp.Or(o.URL, DefaultURL)
	o.NodeLabel = cmp.Or(o.NodeLabel, DefaultNodeLabel)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Time.IsZero() {
		o.Time = time.Now()
	}
	if !model.LabelName(o.NodeLabel).IsValidLegacy() {
		return nil, nil, fmt.Errorf("node label %q: not a Prometheus label name", o.NodeLabel)
	}
	cfg := api.Config{Address: o.URL}
	if o.Client != nil {
		cfg.Client = o.Client
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("prometheus %s: %w", o.URL, err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	r := reader{api: v1.NewAPI(c), o: o, sel: strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(o.Selector), "{"), "}")}
	return r.read(ctx)
}

type reader struct {
	api      v1.API
	o        Options
	sel      string
	warnings []string
}

// query runs metric{selector} (and extra, a further matcher) and returns
// its samples.
func (r *reader) query(ctx context.Context, metric, extra string) (model.Vector, error) {
	m := strings.Join(slices.DeleteFunc([]string{r.sel, extra}, func(s string) bool { return s == "" }), ",")
	q := metric + "{" + m + "}"
	res, warns, _, err := r.api.Query(ctx, q, r.o.Time)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: query %s: %w", r.o.URL, q, err)
	}
	for _, w := range warns {
		r.warnings = append(r.warnings, fmt.Sprintf("prometheus %s: query %s: %s", r.o.URL, q, w))
	}
	v, ok := res.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("prometheus %s: query %s: got a %s, want a vector", r.o.URL, q, res.Type())
	}
	return v, nil
}

// target is the join key of a sample: "<job>/<instance>".
func target(m model.Metric) string {
	return string(m["job"]) + "/" + string(m["instance"])
}

func (r *reader) read(ctx context.Context) ([]fleet.Node, []string, error) {
	placements, err := r.query(ctx, "gpuaffinity_node_placement_info", "")
	if err != nil {
		return nil, nil, err
	}
	nodes := map[string]*fleet.Node{} // by target
	byName := map[string]string{}     // name → target
	slices.SortFunc(placements, func(a, b *model.Sample) int { return strings.Compare(target(a.Metric), target(b.Metric)) })
	for _, s := range placements {
		t := target(s.Metric)
		if nodes[t] != nil {
			r.warn("%s: more than one gpuaffinity_node_placement_info series; the first is used", t)
			continue
		}
		name := r.name(s.Metric)
		if name == "" {
			r.warn("%s: no %s label on gpuaffinity_node_placement_info: left out", t, r.o.NodeLabel)
			continue
		}
		if other, ok := byName[name]; ok {
			r.warn("%s: node name %q is %s's already: left out", t, name, other)
			continue
		}
		byName[name] = t
		nodes[t] = placementNode(s.Metric, name, t)
	}
	if len(nodes) == 0 {
		return nil, r.warnings, fmt.Errorf("prometheus %s: %w%s: no agent is scraped, or none runs a version that exports it",
			r.o.URL, ErrNoNodes, r.selectorNote())
	}
	facts := map[string]map[string]string{} // target → key → value
	fact := func(t, k, v string) {
		if nodes[t] == nil {
			return
		}
		if facts[t] == nil {
			facts[t] = map[string]string{}
		}
		facts[t][k] = v
	}

	layouts, err := r.query(ctx, "gpuaffinity_node_layout_info", "")
	if err != nil {
		return nil, nil, err
	}
	for _, s := range layouts {
		if n := nodes[target(s.Metric)]; n != nil {
			n.Layout, n.Firmware = string(s.Metric["layout"]), string(s.Metric["firmware"])
		}
	}
	imex, err := r.query(ctx, "gpuaffinity_topology_imex_config_nodes", "")
	if err != nil {
		return nil, nil, err
	}
	for _, s := range imex {
		if n := nodes[target(s.Metric)]; n != nil {
			n.IMEXNodes = int(s.Value)
		}
	}

	gpus, err := r.query(ctx, "gpuaffinity_gpu_info", "")
	if err != nil {
		return nil, nil, err
	}
	gpuSet := map[string]map[string]bool{} // target → gpu
	for _, s := range gpus {
		t, g := target(s.Metric), string(s.Metric["gpu"])
		if gpuSet[t] == nil {
			gpuSet[t] = map[string]bool{}
		}
		gpuSet[t][g] = true
		fact(t, fleet.GPUKey(g, "model"), string(s.Metric["model"]))
	}
	pairs, err := r.query(ctx, "gpuaffinity_topology_pair_info", "")
	if err != nil {
		return nil, nil, err
	}
	type pairKey struct{ t, gpu string }
	pairNICs := map[pairKey][]string{}
	pairClass := map[pairKey]string{}
	for _, s := range pairs {
		k := pairKey{target(s.Metric), string(s.Metric["gpu"])}
		pairNICs[k] = append(pairNICs[k], string(s.Metric["nic"]))
		pairClass[k] = string(s.Metric["class"])
	}
	for t, set := range gpuSet {
		fact(t, fleet.KeyGPUs, strconv.Itoa(len(set)))
		for g := range set {
			k := pairKey{t, g}
			fact(t, fleet.GPUKey(g, "nics"), fleet.PairFact(pairNICs[k], pairClass[k]))
		}
	}
	rdmaInfo, err := r.query(ctx, "gpuaffinity_rdma_info", "")
	if err != nil {
		return nil, nil, err
	}
	for _, s := range rdmaInfo {
		t, dev := target(s.Metric), string(s.Metric["device"])
		if string(s.Metric["role"]) == "" {
			continue // a device the discovery does not know: not in the digest
		}
		for _, field := range []string{"role", "fabric", "firmware"} {
			fact(t, fleet.NICKey(dev, field), string(s.Metric[model.LabelName(field)]))
		}
	}

	out := make([]fleet.Node, 0, len(nodes))
	for t, n := range nodes {
		if facts[t] == nil {
			facts[t] = map[string]string{fleet.KeyGPUs: "0"}
		} else if _, ok := facts[t][fleet.KeyGPUs]; !ok {
			facts[t][fleet.KeyGPUs] = "0"
		}
		for k, v := range facts[t] {
			n.Facts = append(n.Facts, fleet.Fact{Key: k, Value: v})
		}
		slices.SortFunc(n.Facts, func(a, b fleet.Fact) int { return strings.Compare(a.Key, b.Key) })
		if n.Layout == "" {
			r.warn("%s (%s): no gpuaffinity_node_layout_info series", n.Name, t)
		}
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b fleet.Node) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(r.warnings)
	return out, r.warnings, nil
}

func (r *reader) selectorNote() string {
	if r.sel == "" {
		return ""
	}
	return " matching {" + r.sel + "}"
}

func (r *reader) warn(format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
}

// name is the node's name: the value of the node label, an instance's
// port dropped.
func (r *reader) name(m model.Metric) string {
	v := string(m[model.LabelName(r.o.NodeLabel)])
	if r.o.NodeLabel == "instance" {
		if host, _, err := net.SplitHostPort(v); err == nil {
			v = host
		}
	}
	return v
}

func placementNode(m model.Metric, name, t string) *fleet.Node {
	l := func(k string) string { return string(m[model.LabelName(k)]) }
	n := &fleet.Node{
		Name: name, Target: t, Model: l("model"), GPUModel: l("gpu_model"), Cloud: l("cloud"),
		HostID: l("host_id"), Clique: l("clique"), GPUMemoryFabric: l("gpu_memory_fabric"),
		ChassisSerial: l("chassis_serial"), Slot: l("slot"), Tray: l("tray"),
	}
	// Tiers are contiguous from tier 0: a gap ends them.
	for _, k := range []string{"tier0", "tier1", "tier2"} {
		v := l(k)
		if v == "" {
			break
		}
		n.Tiers = append(n.Tiers, v)
	}
	return n
}

// ErrNoNodes is wrapped when the server has no node series.
var ErrNoNodes = errors.New("no gpuaffinity_node_placement_info series")
