// Package prom reads the fleet from a Prometheus server: the node series
// every gpuaffinity agent exports (gpuaffinity_node_placement_info,
// gpuaffinity_node_layout_info, gpuaffinity_topology_imex_config_nodes)
// and, for the consistency report, the pairing, GPU and RDMA series the
// layout digest covers, through the server's HTTP API
// (POST /api/v1/query). Series of one agent are joined on their job and
// instance labels, which Prometheus gives every series of a target.
//
// What it reads is acted on by slurmctld and Kubernetes without a human
// reading it, so (docs/fleet.md):
//
//   - A node's name comes from what Prometheus attached to the target
//     (its target labels, as the `up` series carries them: the node
//     label a Kubernetes service discovery relabelling sets, or the
//     instance), never from a label the agent exports about itself; the
//     agent's own hostname is checked against it, and a target whose
//     agent names another host is refused, as are two targets that name
//     one node.
//   - Facts are read over a window (Options.Lookback): a target scraped
//     now gives its present series; one not scraped now but within the
//     window keeps the placement it last had (fleet.Node.Stale), so that
//     an agent restart or a missed scrape changes nothing downstream.
//   - Answers are decoded as they stream in, bounded in size
//     (decompressed), with a bound on the series one node may hold.
//
// client_golang's api/prometheus/v1 is not used: it reads a whole answer
// into memory and decodes it into a map per series, which at 50,000
// nodes is hundreds of megabytes for a CronJob given 128 MiB.
package prom

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"

	"github.com/gpuaffinity/gpuaffinity/fleet"
)

// Defaults of Options.
const (
	DefaultURL       = "http://localhost:9090"
	DefaultNodeLabel = "auto"
	DefaultTimeout   = 60 * time.Second
	DefaultLookback  = time.Hour
	// DefaultMaxResponseBytes bounds one answer, decompressed: at 50,000
	// nodes the largest (the placement series) is about 25 MB.
	DefaultMaxResponseBytes = 256 << 20
	// DefaultMaxSeriesPerNode bounds the series of one family one node
	// may hold (an 8-GPU node with 8 NICs has 64 pair series).
	DefaultMaxSeriesPerNode = 4096
)

// maxLabelBytes bounds a placement label's value: the agent's are at
// most placement.MaxValueLen (256) bytes, a host name 253.
const maxLabelBytes = 1024

// Options say which server to ask, how to name the nodes and how much to
// read.
type Options struct {
	// URL is the Prometheus server's base URL; default DefaultURL. A
	// password in it is never printed.
	URL string
	// Selector are label matchers every query of the agents' series
	// adds, with or without braces: `job="gpuaffinity"`, `{cluster="a"}`;
	// "" none.
	Selector string
	// NodeLabel is the target label whose value is the node's name in
	// the scheduler: "auto" (the default: the target's node label where
	// it has one, as deploy/kubernetes's ServiceMonitor sets it, else its
	// instance without the port), "instance", or any other label
	// Prometheus attaches to the target (a file_sd or relabelling
	// label). It is read from the `up` series, which carries only target
	// labels.
	NodeLabel string
	// Lookback is the window a target not scraped now keeps its
	// placement for; default DefaultLookback.
	Lookback time.Duration
	// Timeout bounds all the queries together; default DefaultTimeout.
	Timeout time.Duration
	// Client is the HTTP client (TLS, authentication); nil means one with
	// http.DefaultTransport's settings. Redirects are followed on the
	// same host only.
	Client *http.Client
	// Time is the evaluation time; zero means now.
	Time time.Time
	// MaxResponseBytes bounds one answer, decompressed; default
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// MaxSeriesPerNode bounds the series one node may hold in one
	// family; default DefaultMaxSeriesPerNode. A node over it is
	// refused (placement) or compared by digest only (facts).
	MaxSeriesPerNode int
	// Report also reads what fleet.Consistency compares: the live nodes'
	// layout digests and IMEX node counts, and the itemized facts of one
	// node of each distinct (group, layout, firmware) variant.
	Report bool
	// QueryLog, when set, is called after each query.
	QueryLog func(QueryStat)
}

// Fleet is what Read found.
type Fleet struct {
	// Nodes are the nodes named without conflict, sorted by name.
	Nodes []fleet.Node
	// Refused are the targets left out for their identity or their
	// size, sorted by target: the writers fail on them unless told to
	// go on without them.
	Refused []Refusal
	// Unresolved are the names of nodes the reader could not place
	// without doubt (named by a refused target, or by stale targets that
	// disagree), sorted: writers keep what an earlier run gave them.
	Unresolved []string
	// Warnings name what was read in part or decided for the reader
	// (a stale target whose placement changed, a node whose facts do not
	// match its digest), sorted.
	Warnings []string
}

// Consistency is the fleet's consistency report (fleet.Consistency of
// its nodes) with the refused targets listed in it: a refusal fails the
// report as a drift does.
func (f Fleet) Consistency() fleet.Report {
	rep := fleet.Consistency(f.Nodes)
	for _, r := range f.Refused {
		rep.Refused = append(rep.Refused, r.String())
	}
	return rep
}

// Refusal is a target left out, and why.
type Refusal struct {
	// Target is "<job>/<instance>".
	Target string `json:"target"`
	// Name is the node the target names, where it names one.
	Name   string `json:"name,omitempty"`
	Reason string `json:"reason"`
}

// String is the refusal as one line.
func (r Refusal) String() string {
	if r.Name != "" {
		return fmt.Sprintf("target %s (node %s): %s", quoted(r.Target), quoted(r.Name), r.Reason)
	}
	return fmt.Sprintf("target %s: %s", quoted(r.Target), r.Reason)
}

// ErrNoNodes is wrapped when the server has no node series.
var ErrNoNodes = errors.New("no gpuaffinity_node_placement_info series")

// Read returns the fleet's nodes, the targets it refused and the
// warnings. It fails when the server cannot be asked or answers
// wrongly, and with ErrNoNodes when no agent's placement series is
// there, now or within the lookback.
func Read(ctx context.Context, o Options) (Fleet, error) {
	r, err := newReader(o)
	if err != nil {
		return Fleet{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	return r.read(ctx)
}

type reader struct {
	o          Options
	sel        string // the selector without braces
	base       string // the URL to request, with its credentials
	server     string // the URL to print, without
	lookback   string // Lookback in PromQL's form
	client     *http.Client
	mu         sync.Mutex // guards warnings and the query log: queries run side by side
	warnings   []string
	refused    []Refusal
	unresolved []string
}

func newReader(o Options) (*reader, error) {
	o.URL = cmp.Or(o.URL, DefaultURL)
	o.NodeLabel = cmp.Or(o.NodeLabel, DefaultNodeLabel)
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	o.Lookback = cmp.Or(o.Lookback, DefaultLookback)
	o.MaxResponseBytes = cmp.Or(o.MaxResponseBytes, DefaultMaxResponseBytes)
	o.MaxSeriesPerNode = cmp.Or(o.MaxSeriesPerNode, DefaultMaxSeriesPerNode)
	if o.Time.IsZero() {
		o.Time = time.Now()
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("prometheus URL %s: want http(s)://host[:port][/path]", quoted(redactRaw(o.URL)))
	}
	if o.NodeLabel != DefaultNodeLabel && !model.LabelName(o.NodeLabel).IsValidLegacy() {
		return nil, fmt.Errorf("node label %s: not a Prometheus label name", quoted(o.NodeLabel))
	}
	if o.Timeout < 0 || o.Lookback < time.Minute || o.MaxResponseBytes < 0 || o.MaxSeriesPerNode < 0 {
		return nil, fmt.Errorf("timeout %s, lookback %s (at least 1m), response bound %d, series bound %d: want positive bounds",
			o.Timeout, o.Lookback, o.MaxResponseBytes, o.MaxSeriesPerNode)
	}
	r := &reader{
		o:        o,
		sel:      strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(o.Selector), "{"), "}"),
		base:     strings.TrimSuffix(u.String(), "/"),
		server:   u.Redacted(),
		lookback: model.Duration(o.Lookback).String(),
	}
	c := &http.Client{Transport: http.DefaultTransport}
	if o.Client != nil {
		cc := *o.Client
		c = &cc
	}
	if c.CheckRedirect == nil {
		c.CheckRedirect = sameHostRedirects
	}
	r.client = c
	return r, nil
}

// redactRaw hides a password in a URL that does not parse.
func redactRaw(s string) string {
	if at := strings.LastIndex(s, "@"); at >= 0 {
		if i := strings.Index(s, "://"); i >= 0 && i < at {
			return s[:i+3] + "xxxxx" + s[at:]
		}
	}
	return s
}

// sameHostRedirects follows at most 3 redirects, on the host first
// asked only: credentials are never sent to another.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return fmt.Errorf("more than 3 redirects")
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return fmt.Errorf("redirect to another server, %s: not followed", quoted(req.URL.Redacted()))
	}
	return nil
}

func (r *reader) warn(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
}

func (r *reader) refuse(t target, name, format string, args ...any) {
	r.refused = append(r.refused, Refusal{Target: t.String(), Name: name, Reason: fmt.Sprintf(format, args...)})
}

// sel returns metric{selector,extra...}.
func (r *reader) series(metric string, extra ...string) string {
	ms := slices.DeleteFunc(append([]string{r.sel}, extra...), func(s string) bool { return s == "" })
	return metric + "{" + strings.Join(ms, ",") + "}"
}

func (r *reader) selectorNote() string {
	if r.sel == "" {
		return ""
	}
	return " matching {" + r.sel + "}"
}

// target is a scrape target: its job and instance labels.
type target struct{ job, instance string }

func targetOf(s *series) target { return target{intern(s.get("job")), s.get("instance")} }

func (t target) String() string { return t.job + "/" + t.instance }

func compareTargets(a, b target) int {
	return cmp.Or(strings.Compare(a.job, b.job), strings.Compare(a.instance, b.instance))
}

// The placement series' family.
const placementFamily = "gpuaffinity_node_placement_info"

func (r *reader) read(ctx context.Context) (Fleet, error) {
	pl := r.series(placementFamily)
	// The placements now, those within the lookback of the targets not
	// scraped now, and the identities of the targets scraped now are
	// asked at once: Prometheus answers them side by side.
	var live, stale map[target]*targetPlacements
	ids := make(map[target][]string)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { live, err = r.placements(gctx, pl, 1); return err })
	g.Go(func() (err error) {
		stale, err = r.placements(gctx, "last_over_time("+pl+"["+r.lookback+"]) unless on(job, instance) "+pl, maxStaleVariants)
		return err
	})
	g.Go(func() error { return r.liveIdentities(gctx, pl, ids) })
	if err := g.Wait(); err != nil {
		return Fleet{}, err
	}
	if len(live) == 0 && len(stale) == 0 {
		return Fleet{Warnings: r.warnings}, fmt.Errorf("prometheus %s: %w%s now or in the last %s: no agent is scraped, or none runs a version that exports it",
			r.server, ErrNoNodes, r.selectorNote(), r.lookback)
	}
	if err := r.staleIdentities(ctx, stale, ids); err != nil {
		return Fleet{}, err
	}
	nodes := r.resolve(live, stale, ids)
	if r.o.Report {
		if err := r.report(ctx, nodes); err != nil {
			return Fleet{}, err
		}
	}
	f := Fleet{Nodes: make([]fleet.Node, 0, len(nodes)), Refused: r.refused, Warnings: r.warnings}
	placed := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		f.Nodes = append(f.Nodes, *n)
		placed[n.Name] = true
	}
	for _, rf := range r.refused {
		if rf.Name != "" && !placed[rf.Name] {
			f.Unresolved = append(f.Unresolved, rf.Name)
		}
	}
	f.Unresolved = append(f.Unresolved, r.unresolved...)
	slices.Sort(f.Unresolved)
	f.Unresolved = slices.Compact(f.Unresolved)
	slices.SortFunc(f.Nodes, func(a, b fleet.Node) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(f.Refused, func(a, b Refusal) int {
		return cmp.Or(strings.Compare(a.Target, b.Target), strings.Compare(a.Reason, b.Reason))
	})
	slices.Sort(f.Warnings)
	f.Warnings = slices.Compact(f.Warnings)
	return f, nil
}

// maxStaleVariants bounds the distinct placement series a target not
// scraped now may hold within the lookback (its labels changed before
// it went away): more is hostile.
const maxStaleVariants = 4

// placed is one placement series of a target.
type placed struct {
	node     fleet.Node
	hostname string
	idValue  string // the node label's value on the series
}

// targetPlacements are a target's placement series, up to a bound, and
// how many there were.
type targetPlacements struct {
	list  []*placed
	count int
	bad   string // why the target is refused, "" none
}

// placements runs q, a query of placement series, and gathers them by
// target, keeping at most limit per target.
func (r *reader) placements(ctx context.Context, q string, limit int) (map[target]*targetPlacements, error) {
	out := make(map[target]*targetPlacements)
	err := r.query(ctx, q, func(s *series) error {
		t := targetOf(s)
		tp := out[t]
		if tp == nil {
			tp = &targetPlacements{}
			out[t] = tp
		}
		tp.count++
		if tp.bad != "" || len(tp.list) >= limit {
			return nil
		}
		for _, l := range s.labels {
			if len(l.value) > maxLabelBytes {
				tp.bad = fmt.Sprintf("label %s of %d bytes, over the bound of %d", l.name, len(l.value), maxLabelBytes)
				tp.list = nil
				return nil
			}
		}
		tp.list = append(tp.list, r.placed(s, t))
		return nil
	})
	return out, err
}

func (r *reader) placed(s *series, t target) *placed {
	l := s.get
	n := fleet.Node{
		Target: t.String(), Model: intern(l("model")), GPUModel: intern(l("gpu_model")), Cloud: intern(l("cloud")),
		HostID: l("host_id"), Clique: intern(l("clique")), GPUMemoryFabric: intern(l("gpu_memory_fabric")),
		ChassisSerial: intern(l("chassis_serial")), Slot: intern(l("slot")), Tray: intern(l("tray")), Source: intern(l("source")),
	}
	// Tiers are contiguous from tier 0: a gap ends them.
	for _, k := range []string{"tier0", "tier1", "tier2"} {
		v := l(k)
		if v == "" {
			break
		}
		n.Tiers = append(n.Tiers, intern(v))
	}
	p := &placed{node: n, hostname: l("hostname")}
	if r.o.NodeLabel != "instance" {
		p.idValue = l(r.idLabel())
		if p.hostname == p.idValue {
			p.hostname = p.idValue // one string for both
		}
	}
	return p
}

// idLabel is the target label the node is named by ("node" for auto).
func (r *reader) idLabel() string {
	if r.o.NodeLabel == DefaultNodeLabel {
		return "node"
	}
	return r.o.NodeLabel
}

// A target's identities are the values its node label had on its `up`
// series (a target label: an agent's own labels are never on `up`): for
// a target scraped now, its `up` now (liveIdentities); for one not
// scraped now, its `up` over the lookback, asked for those targets alone
// (staleIdentities). Neither is asked where the nodes are named by their
// instance.

// addIdentity records v, the node label's value on t's up series.
func addIdentity(ids map[target][]string, t target, v string) {
	if v != "" && !slices.Contains(ids[t], v) && len(ids[t]) < maxStaleVariants {
		ids[t] = append(ids[t], v)
	}
}

func (r *reader) liveIdentities(ctx context.Context, pl string, ids map[target][]string) error {
	if r.o.NodeLabel == "instance" {
		return nil
	}
	id := r.idLabel()
	q := "group by (job, instance, " + id + ") (up) and on(job, instance) " + pl
	return r.query(ctx, q, func(s *series) error {
		addIdentity(ids, targetOf(s), s.get(id))
		return nil
	})
}

func (r *reader) staleIdentities(ctx context.Context, stale map[target]*targetPlacements, ids map[target][]string) error {
	if r.o.NodeLabel == "instance" {
		return nil
	}
	id := r.idLabel()
	ts := sortedTargets(stale)
	for start := 0; start < len(ts); start += factBatch {
		batch := ts[start:min(start+factBatch, len(ts))]
		insts := make([]string, len(batch))
		for i, t := range batch {
			insts[i] = regexp.QuoteMeta(t.instance)
		}
		q := "group by (job, instance, " + id + ") (last_over_time(up{instance=~" + strconv.Quote(strings.Join(insts, "|")) + "}[" + r.lookback + "]))"
		err := r.query(ctx, q, func(s *series) error {
			if t := targetOf(s); stale[t] != nil {
				addIdentity(ids, t, s.get(id))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// claim is a target's claim to a node name.
type claim struct {
	t    target
	live bool
	p    *placed
}

// resolve names every target's node and keeps one claim per name: the
// one live claim; else the stale ones where they agree. Two live claims
// to one name are both refused, as is a target whose name cannot be
// known or whose agent names another host.
func (r *reader) resolve(live, stale map[target]*targetPlacements, ids map[target][]string) []*fleet.Node {
	byName := make(map[string][]claim)
	add := func(t target, tp *targetPlacements, isLive bool) {
		switch {
		case tp.bad != "":
			r.refuse(t, "", "%s", tp.bad)
			return
		case isLive && tp.count > 1:
			r.refuse(t, "", "%d gpuaffinity_node_placement_info series, over the bound of 1 (an agent exports one; the rest come from elsewhere)", tp.count)
			return
		case tp.count > maxStaleVariants:
			r.refuse(t, "", "%d gpuaffinity_node_placement_info series in the last %s, over the bound of %d", tp.count, r.lookback, maxStaleVariants)
			return
		}
		var names []string
		for _, p := range tp.list {
			name, why := r.nameOf(t, ids[t], p)
			if why != "" {
				r.refuse(t, name, "%s", why)
				return
			}
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		if len(names) != 1 {
			r.warn("target %s, not scraped now: it named nodes %s within the last %s; left out", quoted(t.String()), quotedList(names), r.lookback)
			return
		}
		for _, p := range tp.list {
			byName[names[0]] = append(byName[names[0]], claim{t: t, live: isLive, p: p})
		}
	}
	for _, t := range sortedTargets(live) {
		add(t, live[t], true)
	}
	for _, t := range sortedTargets(stale) {
		add(t, stale[t], false)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []*fleet.Node
	for _, name := range names {
		cs := byName[name]
		var lives []claim
		for _, c := range cs {
			if c.live {
				lives = append(lives, c)
			}
		}
		switch {
		case len(lives) > 1:
			var ts []string
			for _, c := range lives {
				ts = append(ts, c.t.String())
			}
			for _, c := range lives {
				r.refuse(c.t, name, "targets %s all name this node: each is refused (one agent scraped by two jobs? narrow --selector)", quotedList(ts))
			}
			continue
		case len(lives) == 1:
			cs = lives
		default:
			for _, c := range cs[1:] {
				if !samePlacement(c.p.node, cs[0].p.node) {
					r.warn("node %s, not scraped now: its placement changed within the last %s (targets %s); left out", quoted(name), r.lookback, quoted(c.t.String()))
					r.unresolved = append(r.unresolved, name)
					cs = nil
					break
				}
			}
			if cs == nil {
				continue
			}
		}
		n := &cs[0].p.node
		n.Name = name
		n.Stale = !cs[0].live
		out = append(out, n)
	}
	return out
}

// samePlacement reports whether a and b place a node alike.
func samePlacement(a, b fleet.Node) bool {
	a.Target, b.Target = "", ""
	return a.Model == b.Model && a.GPUModel == b.GPUModel && a.Cloud == b.Cloud && slices.Equal(a.Tiers, b.Tiers) &&
		a.HostID == b.HostID && a.Clique == b.Clique && a.GPUMemoryFabric == b.GPUMemoryFabric &&
		a.ChassisSerial == b.ChassisSerial && a.Slot == b.Slot && a.Tray == b.Tray && a.Source == b.Source
}

func sortedTargets(m map[target]*targetPlacements) []target {
	ts := make([]target, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, compareTargets)
	return ts
}

// nameOf is the node target t names with its placement series p, or why
// it names none that can be trusted.
func (r *reader) nameOf(t target, ids []string, p *placed) (name, why string) {
	switch {
	case r.o.NodeLabel == "instance" || (r.o.NodeLabel == DefaultNodeLabel && len(ids) == 0):
		name = instanceHost(t.instance)
		if name == "" {
			return "", "no instance label"
		}
		if net.ParseIP(name) != nil {
			return "", fmt.Sprintf("its instance %s is an address, which names no node: give the target a node label (docs/fleet.md, \"Node identity\")", quoted(t.instance))
		}
	case len(ids) == 0:
		return "", fmt.Sprintf("no %s target label on its up series (a node's name is a label Prometheus attaches to the target, not one its agent exports)", r.o.NodeLabel)
	case slices.Contains(ids, p.idValue):
		name = p.idValue
	default:
		return "", fmt.Sprintf("its placement series' %s label %s is not the target's (%s): the agent's own label overrides the target's (honor_labels?)",
			r.idLabel(), quoted(p.idValue), quotedList(ids))
	}
	if p.hostname != "" && !sameHost(name, p.hostname) {
		return name, fmt.Sprintf("its agent reports host name %s: refused (a node is who the scrape target is; the agent's hostname label must agree)", quoted(p.hostname))
	}
	return name, ""
}

// instanceHost is an instance label's host, its port dropped.
func instanceHost(v string) string {
	if host, _, err := net.SplitHostPort(v); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
}

// sameHost reports whether a and b name one host: equal but for case,
// or one the other's short name (gpu17 and gpu17.cluster.example).
func sameHost(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	if a == b {
		return true
	}
	sa, _, _ := strings.Cut(a, ".")
	sb, _, _ := strings.Cut(b, ".")
	return sa == sb && (sa == a || sb == b)
}

func quotedList(ss []string) string {
	q := make([]string, 0, min(len(ss), 8))
	for i, s := range ss {
		if i == 8 {
			q = append(q, fmt.Sprintf("and %d more", len(ss)-8))
			break
		}
		q = append(q, quoted(s))
	}
	return strings.Join(q, ", ")
}
