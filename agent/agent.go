package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/coreos/go-systemd/v22/activation"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/net/netutil"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/exporter"
	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/placement"
	"github.com/gpuaffinity/gpuaffinity/render"
	"github.com/gpuaffinity/gpuaffinity/systemd"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Options configure an Agent.
type Options struct {
	// Root is the filesystem root to discover under: "/" for this host
	// (live NVML and netlink), a fixture or snapshot directory otherwise.
	Root string
	// TopoFile and Roles are discovery's (--topo-file, --compute-nics,
	// --exclude-nics).
	TopoFile string
	Roles    topology.RoleOptions
	// StateDir receives topology.json, launch.node, nccl-topo.xml and env; "" writes
	// none.
	StateDir string
	// NFDFile, when set, is a Node Feature Discovery feature file
	// rewritten after each health gate.
	NFDFile string
	// NFDGFDClique also writes GPU Feature Discovery's
	// nvidia.com/gpu.clique label into NFDFile
	// (health.NFDOptions.GFDClique), for nodes GFD does not label.
	NFDGFDClique bool
	// Rescan is the time between discoveries; 0 discovers only at start
	// and on Rescan.
	Rescan time.Duration
	// Profile and Expect configure the health gate (health.Options).
	Profile health.Profile
	Expect  *health.Expect
	// ListenAddresses are the HTTP addresses ("host:port", ":19400").
	ListenAddresses []string
	// SystemdSocket serves on the sockets systemd passes (socket
	// activation) instead of ListenAddresses.
	SystemdSocket bool
	// MaxRequests bounds the /metrics scrapes served at once
	// (--web.max-requests, node_exporter's flag): more are answered 503
	// at once (exporter.Options.MaxRequestsInFlight). 0 means no limit.
	MaxRequests int
	// MaxConnections bounds the connections each listener holds open
	// (--web.max-connections, Prometheus's flag, with
	// x/net/netutil.LimitListener as Prometheus uses it): more wait in the
	// kernel's accept queue, not in the agent's memory. 0 means no limit.
	MaxConnections int
	// WebConfigFile is exporter-toolkit's web configuration file (TLS,
	// basic auth; docs/agent.md); "" serves plain HTTP.
	WebConfigFile string
	// Collectors switches the exporter's collectors
	// (exporter.Options.Collectors); nil means all on.
	Collectors map[string]bool
	// Jobs and JobsInfo turn on the exporter's job audit
	// (exporter.Options.Jobs, JobsInfo; --collector.jobs,
	// --collector.jobs.info).
	Jobs, JobsInfo bool
	// Version is shown on the landing page.
	Version string
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
	// ShutdownTimeout bounds the HTTP servers' graceful shutdown; 0
	// means 5 s.
	ShutdownTimeout time.Duration
	// DiscoveryTimeout bounds how long Run waits for a discovery round
	// (discovery, state files, health gate); 0 means 2 minutes. A round
	// still running then is reported as failed ("discovery timed out
	// after ...") and left to finish in its goroutine (a read that
	// blocks, a hung NVML Init: Go cannot interrupt either); no other
	// round starts until it has returned.
	DiscoveryTimeout time.Duration
	// NVML replaces the NVML library nvml.Open(Root) would give (tests:
	// a replay whose Init fails). It is not re-opened on rescans.
	NVML gonvml.Interface
	// Placement says where the agent learns the node's place in the
	// network (gpuaffinity_node_placement_info); the zero value reads
	// nothing.
	Placement PlacementOptions
}

// PlacementOptions configure how the agent reads the node's placement:
// with each discovery round, never at scrape time.
type PlacementOptions struct {
	// Cloud is the metadata service to ask: PlacementAuto asks the one of
	// the cloud DMI names where that cloud has a node-local source (GCP
	// and OCI for the placement, GCP and Azure for the VM's type, which
	// their DMI does not name) and nothing elsewhere; platform.GCP,
	// platform.OCI or platform.Azure ask that one; "" or PlacementOff asks
	// none.
	Cloud string
	// BaseURL and Timeout are placement.Options'; zero means the
	// link-local service and placement.DefaultTimeout.
	BaseURL string
	Timeout time.Duration
	// Switches are the site's names for the switches above the node,
	// tier 0 (its leaf) first, at most three. They replace the cloud's
	// tiers; the cloud's host and GPU memory fabric are kept.
	Switches []string
}

// Placement modes beside a cloud name.
const (
	PlacementAuto = "auto"
	PlacementOff  = "off"
)

// Agent is the daemon. New prepares it and binds its listeners; Run
// serves until its context ends.
type Agent struct {
	opts    Options
	log     *slog.Logger
	nv      *nvmlHold
	xids    exporter.XIDCounter
	exp     *exporter.Exporter
	handler http.Handler
	flags   web.FlagConfig

	listeners []net.Listener
	rescan    chan struct{}
	ready     chan struct{}
	ran       atomic.Bool

	roundStart atomic.Int64  // UnixNano of the running round's start; 0 between rounds
	busy       chan struct{} // closed when the last round's goroutine returned; Run's goroutine only
	xidRunning atomic.Bool   // the XID watch runs
	xidMu      sync.Mutex
	xidErr     string // the watch's last error, logged once

	mu       sync.RWMutex
	state    exporter.State
	topology []byte // the JSON of state.Node
	gateErr  string // why the last health gate could not run

	placementErr string // the last placement read's error, logged once; round's goroutine only
	// placementLast is the last placement the cloud's metadata service
	// gave, kept through a failed read; round's goroutine only.
	placementLast *placement.Placement
	// instanceTypeRead and instanceTypeErr are the VM type the metadata
	// service gave and the last error reading it; round's goroutine only.
	instanceTypeRead, instanceTypeErr string
}

// New checks opts, prepares the state directory (stale temporary files
// of an interrupted write are removed) and binds the listeners. Run
// serves; Close releases what New took when Run is never called.
func New(opts Options) (*Agent, error) {
	opts.Root = rootfs.Clean(opts.Root)
	if opts.Profile == "" {
		opts.Profile = health.Pretrain
	}
	if _, err := health.ParseProfile(string(opts.Profile)); err != nil {
		return nil, err
	}
	if opts.Rescan < 0 {
		return nil, fmt.Errorf("rescan interval %s: want 0 or more", opts.Rescan)
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	if opts.DiscoveryTimeout <= 0 {
		opts.DiscoveryTimeout = 2 * time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.WebConfigFile != "" {
		if err := web.Validate(opts.WebConfigFile); err != nil {
			return nil, fmt.Errorf("web config %s: %w", opts.WebConfigFile, err)
		}
	}
	if opts.MaxRequests < 0 || opts.MaxConnections < 0 {
		return nil, fmt.Errorf("max requests %d, max connections %d: want 0 (no limit) or more", opts.MaxRequests, opts.MaxConnections)
	}
	if !opts.SystemdSocket && len(opts.ListenAddresses) == 0 {
		return nil, errors.New("no listen address")
	}
	if err := opts.Placement.validate(); err != nil {
		return nil, err
	}
	if err := cleanStateDir(opts.StateDir, opts.NFDFile); err != nil {
		return nil, err
	}
	a := &Agent{
		opts:   opts,
		log:    log,
		nv:     newNVMLHold(opts.Root, opts.NVML, log),
		rescan: make(chan struct{}, 1),
		ready:  make(chan struct{}),
		state:  exporter.State{StateWriteOK: true}, // nothing failed yet
	}
	addrs := append([]string(nil), opts.ListenAddresses...)
	a.flags = web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &opts.SystemdSocket, WebConfigFile: &opts.WebConfigFile}
	exp, err := exporter.New(exporter.Options{Root: opts.Root, State: a.State, NVML: a.nv.current, XID: &a.xids, Logger: log,
		Collectors: opts.Collectors, MaxRequestsInFlight: opts.MaxRequests, Jobs: opts.Jobs, JobsInfo: opts.JobsInfo})
	if err != nil {
		return nil, err
	}
	a.exp = exp
	if a.handler, err = a.routes(); err != nil {
		return nil, err
	}
	if opts.SystemdSocket {
		ls, err := activation.Listeners()
		if err != nil {
			return nil, fmt.Errorf("systemd socket activation: %w", err)
		}
		for _, l := range ls {
			if l != nil {
				a.listeners = append(a.listeners, l)
			}
		}
		if len(a.listeners) == 0 {
			return nil, errors.New("systemd socket activation: no sockets passed")
		}
	} else {
		for _, addr := range opts.ListenAddresses {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				a.Close()
				return nil, fmt.Errorf("listen %s: %w", addr, err)
			}
			a.listeners = append(a.listeners, l)
		}
	}
	if opts.MaxConnections > 0 {
		for i, l := range a.listeners {
			a.listeners[i] = netutil.LimitListener(l, opts.MaxConnections)
		}
	}
	return a, nil
}

// Addrs are the addresses the agent listens on (with the port the
// kernel picked for ":0").
func (a *Agent) Addrs() []net.Addr {
	out := make([]net.Addr, len(a.listeners))
	for i, l := range a.listeners {
		out[i] = l.Addr()
	}
	return out
}

// Handler serves the agent's endpoints (without the web configuration's
// TLS and authentication, which Run adds).
func (a *Agent) Handler() http.Handler { return a.handler }

// Ready is closed once the first discovery round (discovery, state
// files, health gate) has finished, successful or not.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Rescan asks for a discovery round now (SIGHUP). It does not wait; a
// request while one is pending is merged with it.
func (a *Agent) Rescan() {
	select {
	case a.rescan <- struct{}{}:
	default:
	}
}

// State is what the agent knows now; the exporter reads it per scrape.
// The Node and Report it points to are never changed afterwards.
func (a *Agent) State() exporter.State {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.state
}

// Close releases the listeners and NVML when Run was never called.
func (a *Agent) Close() {
	if a.ran.Load() {
		return
	}
	for _, l := range a.listeners {
		l.Close()
	}
	a.nv.close()
}

// Run serves HTTP, discovers the node and then rescans until ctx ends
// (SIGTERM): it tells systemd STOPPING=1, shuts the servers down within
// Options.ShutdownTimeout, waits for every goroutine it started and
// drops its NVML Init. A discovery round still running then (stuck in
// a blocking read) is not waited for: its goroutine ends when the read
// returns, and publishes and writes nothing. It returns nil after a
// clean stop, or the error that stopped a server. Run may be called
// once.
func (a *Agent) Run(ctx context.Context) (err error) {
	if !a.ran.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		a.nv.close()
	}()

	servers := make([]*http.Server, len(a.listeners))
	serveErr := make(chan error, len(a.listeners))
	for i, l := range a.listeners {
		srv := &http.Server{
			Handler:           a.handler,
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
		}
		servers[i] = srv
		wg.Go(func() {
			if err := web.Serve(l, srv, &a.flags, a.log); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("serve %s: %w", l.Addr(), err)
			}
		})
	}

	a.round(ctx, "start")
	close(a.ready)
	if err := systemd.Ready(a.status()); err != nil {
		a.log.Warn("systemd notify", "err", err)
	}
	a.startXIDWatch(ctx, &wg)

	if iv, werr := systemd.WatchdogInterval(); werr != nil {
		a.log.Warn("systemd watchdog", "err", werr)
	} else if iv > 0 {
		wg.Go(func() {
			systemd.Watchdog(ctx, iv, func() bool { return a.alive(2 * iv) },
				func(err error) { a.log.Warn("systemd watchdog", "err", err) })
		})
	}

	var nfdTick <-chan time.Time
	if a.opts.NFDFile != "" {
		t := time.NewTicker(nfdRefresh)
		defer t.Stop()
		nfdTick = t.C
	}
	var tick <-chan time.Time
	if a.opts.Rescan > 0 {
		t := time.NewTicker(a.opts.Rescan)
		defer t.Stop()
		tick = t.C
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-serveErr:
			break loop
		case <-nfdTick:
			a.refreshNFD()
		case <-tick:
			a.round(ctx, "interval")
			a.startXIDWatch(ctx, &wg)
		case <-a.rescan:
			if nerr := systemd.Reloading(); nerr != nil {
				a.log.Warn("systemd notify", "err", nerr)
			}
			a.round(ctx, "rescan request")
			a.startXIDWatch(ctx, &wg)
			if nerr := systemd.Ready(a.status()); nerr != nil {
				a.log.Warn("systemd notify", "err", nerr)
			}
		}
	}

	if nerr := systemd.Stopping(); nerr != nil {
		a.log.Warn("systemd notify", "err", nerr)
	}
	a.log.Info("stopping")
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.ShutdownTimeout)
	defer scancel()
	for _, srv := range servers {
		if serr := srv.Shutdown(sctx); serr != nil {
			a.log.Warn("HTTP shutdown", "err", serr)
			srv.Close()
		}
	}
	return err
}

// alive is the watchdog's test: no discovery round has been running for
// longer than limit.
func (a *Agent) alive(limit time.Duration) bool {
	start := a.roundStart.Load()
	return start == 0 || time.Since(time.Unix(0, start)) < limit
}

// round runs one discovery round (runRound) in its own goroutine and
// waits for it, for Options.DiscoveryTimeout at most, or until ctx ends.
// A round past its timeout is reported as a failed discovery and keeps
// running; while it does, round starts no other one and reports the
// discovery as still blocked.
func (a *Agent) round(ctx context.Context, why string) {
	if a.busy != nil {
		select {
		case <-a.busy:
		default:
			since := time.Unix(0, a.roundStart.Load())
			a.discoveryFailed(time.Now(), 0, why, fmt.Errorf("discovery blocked: the round started at %s has not returned",
				since.UTC().Format(time.RFC3339)))
			return
		}
	}
	start := time.Now()
	a.roundStart.Store(start.UnixNano())
	done := make(chan struct{})
	a.busy = done
	var late atomic.Bool // round stopped waiting for it
	go func() {
		defer close(done)
		defer a.roundStart.Store(0)
		defer func() {
			// A panic outside discovery and the gate (state files, rendering).
			if err := recoverErr(a.log, "discovery round", recover()); err != nil && ctx.Err() == nil {
				a.discoveryFailed(start, time.Since(start), why, err)
			}
		}()
		a.runRound(ctx, why, start)
		if late.Load() {
			a.log.Warn("a discovery round the agent stopped waiting for has returned", "why", why, "took", time.Since(start).Round(time.Millisecond))
		}
	}()
	timer := time.NewTimer(a.opts.DiscoveryTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		late.Store(true)
		a.log.Warn("stopping with a discovery round still running; not waiting for it", "why", why,
			"running_for", time.Since(start).Round(time.Millisecond))
	case <-timer.C:
		late.Store(true)
		a.discoveryFailed(start, a.opts.DiscoveryTimeout, why, fmt.Errorf("discovery timed out after %s", a.opts.DiscoveryTimeout))
	}
}

// recoverErr turns a recovered panic value into an error ("panic: ..."),
// logging the stack at debug level; nil for none.
func recoverErr(log *slog.Logger, what string, v any) error {
	if v == nil {
		return nil
	}
	log.Debug("panic in "+what, "panic", v, "stack", string(debug.Stack()))
	return fmt.Errorf("panic: %v", v)
}

// discoveryFailed publishes a failed discovery: the last good node (if
// any) stays.
func (a *Agent) discoveryFailed(start time.Time, dur time.Duration, why string, err error) {
	a.mu.Lock()
	a.state.Discovery = exporter.DiscoveryStatus{Last: start, LastSuccess: a.state.Discovery.LastSuccess,
		OK: false, Duration: dur, Err: err.Error()}
	kept := a.state.Node != nil
	a.mu.Unlock()
	a.log.Error("discovery failed", "why", why, "root", a.opts.Root, "err", err, "serving_last_good_node", kept)
}

// runRound discovers the node, writes the state files, runs the health gate
// and publishes the result. A failed discovery keeps the last good node.
// A panic in discovery or in the gate is their error. Once ctx has ended
// (the agent stops without waiting for this round) it writes and
// publishes nothing more.
func (a *Agent) runRound(ctx context.Context, why string, start time.Time) {
	var n topology.Node
	err := func() (err error) {
		defer func() {
			if perr := recoverErr(a.log, "discovery", recover()); perr != nil {
				err = perr
			}
		}()
		lib, source := a.nv.refresh()
		n, err = discover.Discover(discover.Options{Root: a.opts.Root, NVML: lib, NVMLSource: source,
			TopoFile: a.opts.TopoFile, Roles: a.opts.Roles})
		return err
	}()
	dur := time.Since(start)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		a.discoveryFailed(start, dur, why, err)
		return
	}
	for _, w := range n.Warnings {
		a.log.Debug("discovery", "warning", w)
	}
	if w := topology.UnsupportedWarning(n.Unsupported, len(n.GPUs)); w != "" {
		a.log.Warn(w)
	}

	writeOK := true
	js, warnings, werr := []byte(nil), []string(nil), error(nil)
	if a.opts.StateDir != "" {
		js, warnings, werr = writeState(a.opts.StateDir, n)
		for _, w := range warnings {
			a.log.Debug("env", "warning", w)
		}
	}
	if werr != nil {
		writeOK = false
		a.log.Error("writing state files", "dir", a.opts.StateDir, "err", werr)
	}
	if js == nil {
		var buf bytes.Buffer
		if err := render.JSON(&buf, n); err != nil {
			a.log.Error("render topology", "err", err)
		}
		js = buf.Bytes()
	}

	var rep health.Report
	gerr := func() (err error) {
		defer func() {
			if perr := recoverErr(a.log, "health gate", recover()); perr != nil {
				err = perr
			}
		}()
		rep, err = health.Run(ctx, n, health.Options{Root: a.opts.Root, Profile: a.opts.Profile,
			Expect: a.opts.Expect, Interval: 0,
			// Jobs stays off: the gate judges the node, not the jobs on it
			// (jobs.aligned skips; check --jobs runs it, docs/health.md).
			// Check-time counter reads share the scrape's reader (one EINVAL memory).
			Reader: health.NewReader(a.opts.Root, "", a.exp.CounterReader())})
		return err
	}()
	if ctx.Err() != nil {
		return
	}
	var repp *health.Report
	gateErr := ""
	if gerr != nil {
		gateErr = gerr.Error()
		a.log.Error("health gate could not run", "err", gerr)
	} else {
		repp = &rep
		if a.opts.NFDFile != "" {
			if err := a.writeNFD(rep, n); err != nil {
				writeOK = false
				a.log.Error("writing the NFD feature file", "err", err)
			}
		}
		if !rep.Healthy {
			a.log.Warn("health gate failed", "summary", rep.Summary())
		}
	}

	pl := a.readPlacement(ctx, n)
	if ctx.Err() != nil {
		return
	}

	a.mu.Lock()
	a.state = exporter.State{
		Placement:       pl,
		Node:            &n,
		Discovery:       exporter.DiscoveryStatus{Last: start, LastSuccess: start, OK: true, Duration: dur},
		Health:          repp,
		ExpectedNVLinks: expectedNVLinks(n, a.opts.Expect),
		StateWriteOK:    writeOK,
	}
	a.topology = js
	a.gateErr = gateErr
	a.mu.Unlock()
	a.log.Info("discovered", "why", why, "gpus", len(n.GPUs), "nics", len(n.NICs), "nvml", n.NVML.Source,
		"healthy", repp != nil && repp.Healthy, "took", dur.Round(time.Millisecond))
}

// expectedNVLinks is the exporter's per-GPU expectation from --expect.
func expectedNVLinks(n topology.Node, e *health.Expect) map[int]int {
	if e == nil || e.GPUs.NVLinksPerGPU == 0 {
		return nil
	}
	out := make(map[int]int, len(n.GPUs))
	for _, g := range n.GPUs {
		out[g.Index] = e.GPUs.NVLinksPerGPU
	}
	return out
}

// status is the one-line state systemd shows.
func (a *Agent) status() string {
	s := a.State()
	switch {
	case s.Node == nil:
		return "discovery failed: " + s.Discovery.Err
	case !s.Discovery.OK:
		return "rescan failed, serving the node discovered at " + s.Discovery.LastSuccess.UTC().Format(time.RFC3339) + ": " + s.Discovery.Err
	case s.Health == nil:
		return fmt.Sprintf("%d GPUs, %d NICs; health gate could not run", len(s.Node.GPUs), len(s.Node.NICs))
	case !s.Health.Healthy:
		return fmt.Sprintf("%d GPUs, %d NICs; unhealthy: %s", len(s.Node.GPUs), len(s.Node.NICs), s.Health.Summary())
	}
	return fmt.Sprintf("%d GPUs, %d NICs; healthy", len(s.Node.GPUs), len(s.Node.NICs))
}

// The NFD feature file expires nfdTTL after it is written, and the agent
// rewrites it every nfdRefresh (and after each health gate), whatever
// --rescan is: its labels outlive the agent by at most nfdTTL.
const (
	nfdRefresh = 10 * time.Minute
	nfdTTL     = 3 * nfdRefresh
)

// writeNFD writes the NFD feature file for the gate's report on n.
func (a *Agent) writeNFD(rep health.Report, n topology.Node) error {
	nfd := health.NFDOptions{GFDClique: a.opts.NFDGFDClique}
	return atomicfile.Write(a.opts.NFDFile, []byte(nfd.Features(rep, n, time.Now().Add(nfdTTL))), 0o644)
}

// refreshNFD rewrites the NFD feature file from the last gate, pushing its
// expiry on; with no gate yet there is nothing to say.
func (a *Agent) refreshNFD() {
	a.mu.RLock()
	s := a.state
	a.mu.RUnlock()
	if s.Health == nil || s.Node == nil {
		return
	}
	if err := a.writeNFD(*s.Health, *s.Node); err != nil {
		a.log.Error("refreshing the NFD feature file", "err", err)
	}
}
