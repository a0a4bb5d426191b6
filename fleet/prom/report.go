package prom

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/fleet/nodeview"
)

// report reads what fleet.Consistency compares, for the nodes scraped
// now: their layout and firmware digests, their IMEX node counts, and
// the itemized facts of one node of each variant.
func (r *reader) report(ctx context.Context, nodes []*fleet.Node) error {
	byTarget := make(map[string]*fleet.Node, len(nodes))
	for _, n := range nodes {
		if !n.Stale {
			byTarget[n.Target] = n
		}
	}
	// The digests and the IMEX counts, side by side: each query writes
	// fields of its own.
	counts := make(map[*fleet.Node]int)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		q := "group by (job, instance, layout, firmware) (" + r.series("gpuaffinity_node_layout_info") + ")"
		return r.query(gctx, q, func(s *series) error {
			n := byTarget[targetOf(s).String()]
			if n == nil {
				return nil
			}
			if counts[n]++; counts[n] == 1 {
				n.Layout, n.Firmware = intern(s.get("layout")), intern(s.get("firmware"))
			}
			return nil
		})
	})
	g.Go(func() error {
		q := "max by (job, instance) (" + r.series("gpuaffinity_topology_imex_config_nodes") + ")"
		return r.query(gctx, q, func(s *series) error {
			if n := byTarget[targetOf(s).String()]; n != nil && s.value >= 0 && s.value <= math.MaxInt32 {
				n.IMEXNodes = int(s.value)
			}
			return nil
		})
	})
	if err := g.Wait(); err != nil {
		return err
	}
	for n, c := range counts {
		if c > 1 {
			r.warn("node %s: %d gpuaffinity_node_layout_info series, want 1: not compared", quoted(n.Name), c)
			n.Layout, n.Firmware = "", ""
		}
	}
	return r.variantFacts(ctx, nodes)
}

// maxFactTries is how many nodes of one variant are asked for their
// facts before the variant is compared by digest only.
const maxFactTries = 3

// variantFacts gives one node of each variant (nodes of one group with
// one layout and one firmware digest) its itemized facts, read from the
// series the digests cover. Nodes with the same digests have the same
// facts, so one node speaks for its variant: at 50,000 nodes with 2 %
// drifted that is about a thousand nodes' facts, not fifty thousand.
// Facts that do not hash to the node's digests (a scrape caught half
// way, an agent that lies) are not used; the variant's next node is
// asked.
func (r *reader) variantFacts(ctx context.Context, nodes []*fleet.Node) error {
	type variant struct {
		members []*fleet.Node
		done    bool
	}
	variants := make(map[[3]string]*variant)
	var keys [][3]string
	for _, n := range nodes { // sorted by name
		if n.Stale || n.Layout == "" && n.Firmware == "" {
			continue
		}
		k := [3]string{n.Group(), n.Layout, n.Firmware}
		v := variants[k]
		if v == nil {
			v = &variant{}
			variants[k] = v
			keys = append(keys, k)
		}
		v.members = append(v.members, n)
	}
	for try := range maxFactTries {
		var ask []*fleet.Node
		var of []*variant
		for _, k := range keys {
			if v := variants[k]; !v.done && try < len(v.members) {
				ask = append(ask, v.members[try])
				of = append(of, v)
			}
		}
		if len(ask) == 0 {
			return nil
		}
		facts, err := r.facts(ctx, ask)
		if err != nil {
			return err
		}
		for i, n := range ask {
			f, ok := facts[n.Target]
			if !ok {
				continue
			}
			if nodeview.Digest(f.layout) != n.Layout || nodeview.Digest(f.firmware) != n.Firmware {
				r.warn("node %s: the facts its series give do not hash to its layout and firmware digests (a scrape read half way, or an agent that reports wrongly): not used",
					quoted(n.Name))
				continue
			}
			n.Facts = append(f.layout, f.firmware...)
			slices.SortFunc(n.Facts, func(a, b fleet.Fact) int { return strings.Compare(a.Key, b.Key) })
			of[i].done = true
		}
	}
	return nil
}

// nodeFacts are a node's facts as the series give them, split as its
// digests are.
type nodeFacts struct{ layout, firmware []fleet.Fact }

// factBatch bounds the nodes one fact query names, so that the query
// stays a few kilobytes.
const factBatch = 200

// facts reads the itemized facts of nodes (nodeview.NodeFacts, rebuilt from
// the series): GPUs and their models (gpuaffinity_gpu_info), each GPU's
// NICs and class (gpuaffinity_topology_pair_info), each RDMA device's
// role, fabric and firmware (gpuaffinity_rdma_info). A node with more
// series of a family than the bound is left out, with a warning.
func (r *reader) facts(ctx context.Context, nodes []*fleet.Node) (map[string]nodeFacts, error) {
	out := make(map[string]nodeFacts, len(nodes))
	for start := 0; start < len(nodes); start += factBatch {
		batch := nodes[start:min(start+factBatch, len(nodes))]
		if err := r.factBatch(ctx, batch, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *reader) factBatch(ctx context.Context, nodes []*fleet.Node, out map[string]nodeFacts) error {
	want := make(map[string]*fleet.Node, len(nodes))
	insts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		want[n.Target] = n
		inst := n.Target[strings.LastIndexByte(n.Target, '/')+1:] // a job may hold '/', an instance does not
		insts = append(insts, regexp.QuoteMeta(inst))
	}
	slices.Sort(insts)
	inst := "instance=~" + strconv.Quote(strings.Join(slices.Compact(insts), "|"))
	// Each family's query counts its own series per node; the three run
	// side by side.
	type counter struct {
		family string
		count  map[string]int
		over   map[string]bool
	}
	counted := func(c *counter, s *series) (string, bool) {
		t := targetOf(s).String()
		if want[t] == nil || c.over[t] {
			return t, false
		}
		if c.count[t]++; c.count[t] > r.o.MaxSeriesPerNode {
			c.over[t] = true
			r.warn("node %s: more than %d %s series, the bound on one node's (--max-series-per-node): its facts are not read", quoted(want[t].Name), r.o.MaxSeriesPerNode, c.family)
			return t, false
		}
		return t, true
	}
	newCounter := func(family string) *counter {
		return &counter{family: family, count: make(map[string]int), over: make(map[string]bool)}
	}
	type pair struct {
		nics  []string
		class string
	}
	gpus := make(map[string]map[string]string) // target → gpu → model
	pairs := make(map[string]map[string]*pair) // target → gpu → pair
	type nic struct{ role, fabric, firmware string }
	nics := make(map[string]map[string]nic) // target → device → nic
	cg, cp, cr := newCounter("gpuaffinity_gpu_info"), newCounter("gpuaffinity_topology_pair_info"), newCounter("gpuaffinity_rdma_info")

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		q := "group by (job, instance, gpu, model) (" + r.series("gpuaffinity_gpu_info", inst) + ")"
		return r.query(gctx, q, func(s *series) error {
			if t, keep := counted(cg, s); keep {
				if gpus[t] == nil {
					gpus[t] = make(map[string]string)
				}
				gpus[t][s.get("gpu")] = intern(s.get("model"))
			}
			return nil
		})
	})
	g.Go(func() error {
		q := "group by (job, instance, gpu, nic, class) (" + r.series("gpuaffinity_topology_pair_info", inst) + ")"
		return r.query(gctx, q, func(s *series) error {
			if t, keep := counted(cp, s); keep {
				if pairs[t] == nil {
					pairs[t] = make(map[string]*pair)
				}
				g := s.get("gpu")
				p := pairs[t][g]
				if p == nil {
					p = &pair{}
					pairs[t][g] = p
				}
				p.nics = append(p.nics, intern(s.get("nic")))
				p.class = intern(s.get("class"))
			}
			return nil
		})
	})
	g.Go(func() error {
		q := "group by (job, instance, device, role, fabric, firmware) (" + r.series("gpuaffinity_rdma_info", `role!=""`, inst) + ")"
		return r.query(gctx, q, func(s *series) error {
			if t, keep := counted(cr, s); keep {
				if nics[t] == nil {
					nics[t] = make(map[string]nic)
				}
				nics[t][intern(s.get("device"))] = nic{intern(s.get("role")), intern(s.get("fabric")), intern(s.get("firmware"))}
			}
			return nil
		})
	})
	if err := g.Wait(); err != nil {
		return err
	}
	over := make(map[string]bool)
	for _, c := range []*counter{cg, cp, cr} {
		for t := range c.over {
			over[t] = true
		}
	}
	for t := range want {
		if over[t] {
			continue
		}
		var f nodeFacts
		f.layout = append(f.layout, fleet.Fact{Key: nodeview.KeyGPUs, Value: strconv.Itoa(len(gpus[t]))})
		for g, model := range gpus[t] {
			f.layout = append(f.layout, fleet.Fact{Key: nodeview.GPUKey(g, "model"), Value: model})
			var p pair
			if pp := pairs[t][g]; pp != nil {
				p = *pp
			}
			f.layout = append(f.layout, fleet.Fact{Key: nodeview.GPUKey(g, "nics"), Value: nodeview.PairFact(p.nics, p.class)})
		}
		for dev, c := range nics[t] {
			f.layout = append(f.layout, fleet.Fact{Key: nodeview.NICKey(dev, "role"), Value: c.role},
				fleet.Fact{Key: nodeview.NICKey(dev, "fabric"), Value: c.fabric})
			f.firmware = append(f.firmware, fleet.Fact{Key: nodeview.NICKey(dev, "firmware"), Value: c.firmware})
		}
		out[t] = f
	}
	return nil
}
