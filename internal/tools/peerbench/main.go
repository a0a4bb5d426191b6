// Command peerbench runs gpuaffinity's commands and their peers
// (hwloc's lstopo, a minimal Go program, node_exporter) interleaved on
// the same example machines and prints the medians and the median of
// the per-pair ratios as a markdown table. `make bench` runs it; see
// docs/bench.md.
//
//	go run ./internal/tools/peerbench [-n 15] [-warmup 2] [-bin PATH] [-long] [-only 1,2,3,4,5]
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Scrape counts of figure 5.
const (
	rssScrapes     = 1000
	rssLongScrapes = 10000
)

type options struct {
	n, warm         int
	bin             string
	lstopo, nodeExp string // "" searches PATH, /usr/sbin, /usr/bin; "none" skips the peer; nodeExp "build" builds nodeExporterModule
	long            bool
	only            map[int]bool // the figures to run; nil runs all
	timeout         time.Duration
}

// want reports whether figure fig runs.
func (o options) want(fig int) bool { return o.only == nil || o.only[fig] }

// parseOnly reads -only's list of figure numbers (1 to 5); "" is all.
func parseOnly(s string) (map[int]bool, error) {
	if s == "" {
		return nil, nil
	}
	m := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 5 {
			return nil, fmt.Errorf("-only %q: want figure numbers 1 to 5, comma-separated", s)
		}
		m[n] = true
	}
	return m, nil
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 15, "measured pairs (A B) per figure")
	flag.IntVar(&o.warm, "warmup", 2, "unmeasured warm-up pairs per figure")
	flag.StringVar(&o.bin, "bin", "", "gpuaffinity binary to measure (default: go build -trimpath ./cmd/gpuaffinity into a temporary directory)")
	flag.StringVar(&o.lstopo, "lstopo", "", `lstopo-no-graphics binary (default: search PATH, /usr/sbin, /usr/bin; "none": as if not installed)`)
	flag.StringVar(&o.nodeExp, "node-exporter", "build", `node_exporter binary; "build": go install `+nodeExporterModule+` (the release whose InfiniBand counters the agent mirrors), else search as ""; "": search node_exporter, then prometheus-node-exporter; "none": as if not installed`)
	flag.BoolVar(&o.long, "long", false, fmt.Sprintf("also scrape the agent %d times and report its RSS growth", rssLongScrapes))
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "limit for the whole run")
	only := flag.String("only", "", "run only these figures (comma-separated numbers, 1 to 5; 4 and 5 share their agent and node_exporter, so either runs figure 4 on the DGX root); default all")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./internal/tools/peerbench [flags]\n\n"+
			"Runs gpuaffinity and its peers interleaved and prints a markdown table (docs/bench.md).\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	var err error
	if o.only, err = parseOnly(*only); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if o.n < 1 || o.warm < 0 || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(o))
}

// bench is one run's state.
type bench struct {
	opt     options
	tmp     string
	bin     string
	lstopo  string // "" when not installed
	nodeExp string // "" when not installed
	neBuilt bool   // nodeExp is nodeExporterModule, built in this run
	devNull *os.File
	env     []string // the children's base environment
	rows    []row
	cpuRows []row
	failed  bool
	servers []*server
}

// row is one table row; key orders rows by figure.
type row struct {
	key                             float64
	figure, ours, peer, ratio, goal string
}

var started = time.Now()

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peerbench: %5.1fs "+format+"\n", append([]any{time.Since(started).Seconds()}, args...)...)
}

func run(o options) (code int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	b := &bench{opt: o}
	tmp, err := os.MkdirTemp(tempBase(), "peerbench-")
	if err != nil {
		progress("%v", err)
		return 1
	}
	if b.tmp, err = filepath.Abs(tmp); err != nil {
		progress("%v", err)
		return 1
	}
	defer os.RemoveAll(b.tmp)
	defer b.stopServers()
	if b.devNull, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
		progress("%v", err)
		return 1
	}
	defer b.devNull.Close()

	if err := b.setup(ctx); err != nil {
		progress("setup: %v", err)
		return 1
	}
	b.figures(ctx)
	if err := ctx.Err(); err != nil {
		progress("stopped: %v", context.Cause(ctx))
		return 1
	}
	b.print(ctx, os.Stdout)
	if b.failed {
		return 1
	}
	return 0
}

// tempBase is where the example roots (thousands of small files) go:
// $TMPDIR when set, else /dev/shm when it is writable with 1 GiB free
// (writing them to a disk under load takes seconds), else the default.
func tempBase() string {
	if os.Getenv("TMPDIR") != "" {
		return ""
	}
	var st syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &st) == nil && uint64(st.Bavail)*uint64(st.Bsize) >= 1<<30 &&
		syscall.Access("/dev/shm", 0o2 /* W_OK */) == nil {
		return "/dev/shm"
	}
	return ""
}

// setup builds (or takes) the binaries and writes the example roots.
func (b *bench) setup(ctx context.Context) error {
	b.env = baseEnv()
	if b.opt.bin != "" {
		p, err := filepath.Abs(b.opt.bin)
		if err != nil {
			return err
		}
		if _, err := os.Stat(p); err != nil {
			return err
		}
		b.bin = p
	} else {
		mod, err := moduleRoot(ctx)
		if err != nil {
			return err
		}
		// As make build: the launch-path gpuaffinity (-tags
		// omit_agent) and beside it gpuaffinity-agent (-tags
		// agent_only), which its agent command runs. (gpuaffinity-fleet
		// is not measured.)
		b.bin = filepath.Join(b.tmp, "gpuaffinity")
		progress("building ./cmd/gpuaffinity (and gpuaffinity-agent)")
		if err := goBuild(ctx, mod, b.bin, "./cmd/gpuaffinity", "omit_agent"); err != nil {
			return err
		}
		if err := goBuild(ctx, mod, filepath.Join(b.tmp, "gpuaffinity-agent"), "./cmd/gpuaffinity", "agent_only"); err != nil {
			return err
		}
	}
	var err error
	if b.lstopo, err = peerPath(b.opt.lstopo, "lstopo-no-graphics"); err != nil {
		return err
	}
	neFlag := b.opt.nodeExp
	if neFlag == "build" {
		neFlag = ""
		out := filepath.Join(b.tmp, "node_exporter-build")
		progress("building %s", nodeExporterModule)
		if err := goInstall(ctx, b.tmp, out, nodeExporterModule); err != nil {
			progress("%v; measuring the installed node_exporter instead", err)
		} else {
			neFlag, b.neBuilt = filepath.Join(out, "node_exporter"), true
		}
	}
	if b.nodeExp, err = peerPath(neFlag, "node_exporter", "prometheus-node-exporter"); err != nil {
		return err
	}
	for _, m := range []struct{ demo, dir string }{
		{"dgx-h100", "dgx-h100"}, {"aws-p5", "aws-p5"}, {"dgx-h100", "dgx-h100-no-nvml"},
	} {
		j := job{Argv: []string{b.bin, "snapshot", "--demo", m.demo, "-f", b.root(m.dir)}, Env: b.env}
		ctx, cancel := context.WithTimeout(ctx, runTimeout)
		out, err := j.command(ctx).CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", j, err, out)
		}
	}
	if err := os.Remove(filepath.Join(b.root("dgx-h100-no-nvml"), "nvml.json")); err != nil {
		return err
	}
	return nil
}

// peerPath resolves a peer flag: "" searches for names, "none" is no
// peer, anything else must exist.
func peerPath(flagValue string, names ...string) (string, error) {
	switch flagValue {
	case "":
		return findPeer(names...), nil
	case "none":
		return "", nil
	}
	p, err := exec.LookPath(flagValue)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

func (b *bench) root(name string) string { return filepath.Join(b.tmp, "root-"+name) }

// baseEnv is the environment every child gets: enough to run, nothing
// that steers gpuaffinity (GPUAFFINITY_*, ranks, CUDA_VISIBLE_DEVICES).
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "XDG_RUNTIME_DIR", "LANG", "LC_ALL"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "GPUAFFINITY_STATE_DIR=")
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not in a Go module: run from the repository or give -bin")
	}
	return filepath.Dir(mod), nil
}

// goBuild runs go build -trimpath [-tags tags] -o out pkg in dir, with
// cgo on.
func goBuild(ctx context.Context, dir, out, pkg, tags string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", tags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if _, ok := os.LookupEnv("CGO_CFLAGS"); !ok {
		// The Makefile's: go-nvml's header marks calls deprecated, and
		// the same flags share the build cache with make build.
		cmd.Env = append(cmd.Env, "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	}
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, o)
	}
	return nil
}

// nodeExporterModule is the node_exporter release figures 4 and 5 build
// and measure: the one whose infiniband collector the agent's RDMA
// metrics mirror (exporter/rdma.go), reading the same counters/ and
// hw_counters/ files. Older releases (Debian's 1.5.0) read counters/
// only, half the files: -node-exporter PATH measures one of those.
const nodeExporterModule = "github.com/prometheus/node_exporter@v1.12.1"

// goInstall builds the main package at module@version into the directory
// gobin, outside this module (its own go.mod and go.sum decide).
func goInstall(ctx context.Context, dir, gobin, modVersion string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", modVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=", "GOWORK=off")
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go install %s: %w\n%s", modVersion, err, o)
	}
	return nil
}

// floorSource is figure 2's peer: the least a cgo-linked Go program
// costs to start, print one line and exit.
const floorSource = `package main

import "C"

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stdout, "export GPUAFFINITY_GPU='3'")
}
`

func (b *bench) buildFloor(ctx context.Context) (string, error) {
	dir := filepath.Join(b.tmp, "floor")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module peerbench/floor\n\ngo 1.21\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(floorSource), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "floor")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOWORK=off", "GOFLAGS=")
	if o, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build (minimal program): %w\n%s", err, o)
	}
	return bin, nil
}

// figures runs every figure; a failure becomes its row and the run's
// exit status, and the others still run.
func (b *bench) figures(ctx context.Context) {
	for _, m := range []struct {
		key  float64
		name string
	}{{1.1, "dgx-h100"}, {1.2, "aws-p5"}} {
		if !b.opt.want(1) || ctx.Err() != nil {
			break
		}
		progress("figure 1: topo -o json vs lstopo --of xml, %s", m.name)
		b.figTopo(ctx, m.key, m.name)
	}
	if b.opt.want(2) && ctx.Err() == nil {
		progress("figure 2: env from the agent's cache vs a minimal Go program")
		b.figEnv(ctx)
	}
	if b.opt.want(3) && ctx.Err() == nil {
		progress("figure 3: topo --demo dgx-h100")
		b.figDemo(ctx)
	}
	if (b.opt.want(4) || b.opt.want(5)) && ctx.Err() == nil {
		progress("figures 4 and 5: /metrics and RSS vs node_exporter, dgx-h100")
		b.figMetrics(ctx, 4.1, "dgx-h100", "dgx-h100, NVML replay", b.opt.want(5))
	}
	if b.opt.want(4) && ctx.Err() == nil {
		progress("figure 4: /metrics vs node_exporter, dgx-h100 without nvml.json")
		b.figMetrics(ctx, 4.2, "dgx-h100-no-nvml", "dgx-h100 without nvml.json", false)
	}
}

// fail records a figure that could not be measured: ours (peer false)
// fails the run, the peer's only marks its cell.
func (b *bench) fail(key float64, figure, goal string, err error) {
	var pe errPeer
	if errors.As(err, &pe) {
		progress("%s: %v", figure, err)
		b.rows = append(b.rows, row{key, figure, "—", "peer failed", "—", goal})
		return
	}
	progress("%s: FAILED: %v", figure, err)
	b.failed = true
	b.rows = append(b.rows, row{key, figure, "failed", "—", "—", goal})
}

// addPaired adds the row (and the CPU row) of a paired process figure.
func (b *bench) addPaired(key float64, figure, goal string, limit float64, as, bs []sample) {
	if bs == nil {
		b.rows = append(b.rows, row{key, figure, fmtMS(median(walls(as))), errNoPeer.Error(), "—", goal})
		b.cpuRows = append(b.cpuRows, row{key, figure, fmtMS(median(cpus(as))), errNoPeer.Error(), "—", ""})
		return
	}
	w, err := summarize(walls(as), walls(bs))
	if err != nil {
		b.fail(key, figure, goal, err)
		return
	}
	b.rows = append(b.rows, row{key, figure, fmtMS(w.Ours), fmtMS(w.Peer), fmtRatio(w.Ratio), goalCell(goal, w.Ratio, limit)})
	if c, err := summarize(cpus(as), cpus(bs)); err == nil {
		b.cpuRows = append(b.cpuRows, row{key, figure, fmtMS(c.Ours), fmtMS(c.Peer), fmtRatio(c.Ratio), ""})
	}
}

// runner turns a job into interleave's function.
func (b *bench) runner(ctx context.Context, j job) func() (sample, error) {
	return func() (sample, error) { return j.run(ctx, b.devNull) }
}

// Figure 1: a cold topology (fresh process, no cache) against hwloc's.
func (b *bench) figTopo(ctx context.Context, key float64, name string) {
	figure := fmt.Sprintf("topo -o json vs lstopo --of xml, %s", name)
	const goal, limit = "≤ 0.5", 0.5
	root := b.root(name)
	ours := job{Argv: []string{b.bin, "topo", "-o", "json", "--root", root}, Env: b.env}
	if err := ours.check(ctx, func(out, _ []byte) error {
		if !json.Valid(out) {
			return errors.New("output is not JSON")
		}
		return nil
	}); err != nil {
		b.fail(key, figure, goal, err)
		return
	}
	var peer func() (sample, error)
	if b.lstopo != "" {
		pj := job{Argv: []string{b.lstopo, "--of", "xml"}, Env: append(slices.Clone(b.env), "HWLOC_FSROOT="+root, "HWLOC_COMPONENTS=-x86")}
		if err := pj.check(ctx, func(out, _ []byte) error {
			if !bytes.Contains(out, []byte("<topology")) {
				return errors.New("output is not hwloc XML")
			}
			return nil
		}); err != nil {
			b.fail(key, figure, goal, errPeer{err})
			return
		}
		peer = b.runner(ctx, pj)
	}
	as, bs, err := interleave(ctx, b.opt.warm, b.opt.n, b.runner(ctx, ours), peer)
	if err != nil {
		b.fail(key, figure, goal, err)
		return
	}
	b.addPaired(key, figure, goal, limit, as, bs)
}

// stateDir makes a directory the agent accepts: 0755, ours.
func (b *bench) stateDir(name string) (string, error) {
	dir := filepath.Join(b.tmp, "state-"+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755) // whatever the umask
}

// startAgent starts `gpuaffinity agent` on root with a new state
// directory and waits until it has written topology.json and env and
// answers /metrics.
func (b *bench) startAgent(ctx context.Context, name, root string) (*server, string, error) {
	dir, err := b.stateDir(name)
	if err != nil {
		return nil, "", err
	}
	s, err := b.startHTTP(ctx, "gpuaffinity agent ("+name+")", func(addr string) job {
		return job{Argv: []string{b.bin, "agent", "--root", root, "--state-dir", dir, "--rescan", "0",
			"--web.listen-address", addr}, Env: b.env}
	}, filepath.Join(dir, "topology.json"), filepath.Join(dir, "env"))
	return s, dir, err
}

// startNodeExporter starts node_exporter with only its infiniband
// collector on root's sys/.
func (b *bench) startNodeExporter(ctx context.Context, name, root string) (*server, error) {
	return b.startHTTP(ctx, "node_exporter ("+name+")", func(addr string) job {
		return job{Argv: []string{b.nodeExp, "--collector.disable-defaults", "--collector.infiniband",
			"--path.sysfs=" + filepath.Join(root, "sys"), "--web.listen-address=" + addr}, Env: b.env}
	})
}

// startHTTP starts a server on a free port (trying another port up to
// twice if the one picked was taken in the meantime)
// and waits for /metrics and files.
func (b *bench) startHTTP(ctx context.Context, name string, mk func(addr string) job, files ...string) (*server, error) {
	var last error
	for try := 0; try < 3; try++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		s, err := startServer(ctx, name, mk(addr), addr)
		if err != nil {
			return nil, err
		}
		b.servers = append(b.servers, s)
		client := newClient()
		err = s.waitReady(ctx, client, "http://"+addr+"/metrics", files...)
		client.CloseIdleConnections()
		if err == nil {
			return s, nil
		}
		_ = s.stop()
		last = err
		if ctx.Err() != nil || !strings.Contains(s.log.String(), "address already in use") {
			break
		}
	}
	return nil, last
}

func (b *bench) stopServers() {
	for _, s := range slices.Backward(b.servers) {
		_ = s.stop()
	}
	b.servers = nil
}

// Figure 2: env from the agent's state files against the floor of any
// Go program.
func (b *bench) figEnv(ctx context.Context) {
	const key, figure, goal, limit = 2, "env --local-rank 3 from the agent's cache vs minimal Go program, dgx-h100", "≤ 2", 2.0
	root := b.root("dgx-h100")
	agent, dir, err := b.startAgent(ctx, "env", root)
	if err != nil {
		b.fail(key, figure, goal, err)
		return
	}
	if err := agent.stop(); err != nil {
		progress("warning: %v", err)
	}
	ours := job{Argv: []string{b.bin, "env", "--root", root, "--state-dir", dir, "--local-rank", "3"}, Env: b.env}
	if err := ours.check(ctx, nil); err != nil {
		b.fail(key, figure, goal, err)
		return
	}
	// The same with the debug log, to see that the node came from the
	// state files and not from a discovery.
	dbg := job{Argv: append(slices.Clone(ours.Argv), "--log-level", "debug"), Env: b.env}
	if err := dbg.check(ctx, func(_, stderr []byte) error {
		if !bytes.Contains(stderr, []byte("state directory")) {
			progress("warning: env's debug log does not say it read the state directory; it may have discovered the node:\n%s", tail(stderr, 1000))
		}
		return nil
	}); err != nil {
		b.fail(key, figure, goal, err)
		return
	}
	floor, err := b.buildFloor(ctx)
	if err != nil {
		b.fail(key, figure, goal, errPeer{err})
		return
	}
	peer := job{Argv: []string{floor}, Env: b.env}
	if err := peer.check(ctx, nil); err != nil {
		b.fail(key, figure, goal, errPeer{err})
		return
	}
	as, bs, err := interleave(ctx, b.opt.warm, b.opt.n, b.runner(ctx, ours), b.runner(ctx, peer))
	if err != nil {
		b.fail(key, figure, goal, err)
		return
	}
	b.addPaired(key, figure, goal, limit, as, bs)
}

// Figure 3: --demo builds the example machine's root and discovers it.
func (b *bench) figDemo(ctx context.Context) {
	const key, figure, goal, limitMS = 3, "topo --demo dgx-h100", "≤ 15 ms", 15.0
	ours := job{Argv: []string{b.bin, "topo", "--demo", "dgx-h100"}, Env: b.env}
	if err := ours.check(ctx, nil); err != nil {
		b.fail(key, figure, goal, err)
		return
	}
	as, _, err := interleave(ctx, b.opt.warm, b.opt.n, b.runner(ctx, ours), nil)
	if err != nil {
		b.fail(key, figure, goal, err)
		return
	}
	m := median(walls(as))
	b.rows = append(b.rows, row{key, figure, fmtMS(m), "—", "—", goalCell(goal, m, limitMS)})
	b.cpuRows = append(b.cpuRows, row{key, figure, fmtMS(median(cpus(as))), "—", "—", ""})
}

// Figures 4 and 5: one agent and one node_exporter on root, scraped
// interleaved; with rss, then on to 1,000 scrapes each (and 10,000 of
// the agent with -long) for their resident memory.
func (b *bench) figMetrics(ctx context.Context, key float64, rootName, label string, rss bool) {
	figure := "/metrics GET vs node_exporter infiniband, " + label
	const goal, limit = "≤ 1.0", 1.0
	rssFigure := fmt.Sprintf("agent RSS after %s scrapes vs node_exporter's, %s", thousands(rssScrapes), label)
	longFigure := fmt.Sprintf("agent RSS after %s scrapes (growth from %s)", thousands(rssLongScrapes), thousands(rssScrapes))
	failAll := func(err error) {
		b.fail(key, figure, goal, err)
		if rss {
			b.fail(5.1, rssFigure, goal, err)
			b.fail(5.2, longFigure, "—", err)
		}
	}
	defer b.stopServers()
	root := b.root(rootName)
	agent, _, err := b.startAgent(ctx, rootName, root)
	if err != nil {
		failAll(err)
		return
	}
	var ne *server
	if b.nodeExp != "" {
		if ne, err = b.startNodeExporter(ctx, rootName, root); err != nil {
			progress("%s: %v", figure, err)
			ne = nil
		}
	}
	client := newClient()
	defer client.CloseIdleConnections()
	ourURL := "http://" + agent.addr + "/metrics"
	scrapeOurs := func() (sample, error) { return timedGet(ctx, client, ourURL) }
	var scrapePeer func() (sample, error)
	var peerURL string
	if ne != nil {
		peerURL = "http://" + ne.addr + "/metrics"
		scrapePeer = func() (sample, error) { return timedGet(ctx, client, peerURL) }
	}
	peerCell := errNoPeer.Error()
	if b.nodeExp != "" && ne == nil {
		peerCell = "peer failed"
	}

	as, bs, err := interleave(ctx, b.opt.warm, b.opt.n, scrapeOurs, scrapePeer)
	if err != nil {
		failAll(err)
		return
	}
	if bs == nil {
		b.rows = append(b.rows, row{key, figure, fmtMS(median(walls(as))), peerCell, "—", goal})
	} else if w, err := summarize(walls(as), walls(bs)); err != nil {
		b.fail(key, figure, goal, err)
	} else {
		b.rows = append(b.rows, row{key, figure, fmtMS(w.Ours), fmtMS(w.Peer), fmtRatio(w.Ratio), goalCell(goal, w.Ratio, limit)})
	}
	if !rss {
		return
	}

	// Figure 5: on to rssScrapes scrapes of each, still interleaved.
	for i := b.opt.warm + b.opt.n; i < rssScrapes; i++ {
		if err := get(ctx, client, ourURL); err != nil {
			b.fail(5.1, rssFigure, goal, err)
			b.fail(5.2, longFigure, "—", err)
			return
		}
		if ne != nil {
			if err := get(ctx, client, peerURL); err != nil {
				progress("%s: node_exporter: %v", rssFigure, err)
				ne, peerCell = nil, "peer failed"
			}
		}
	}
	ours, err := agent.rssMiB()
	if err != nil {
		b.fail(5.1, rssFigure, goal, err)
		return
	}
	if ne == nil {
		b.rows = append(b.rows, row{5.1, rssFigure, fmtMiB(ours), peerCell, "—", goal})
	} else if theirs, err := ne.rssMiB(); err != nil {
		b.fail(5.1, rssFigure, goal, errPeer{err})
	} else {
		r := ours / theirs
		b.rows = append(b.rows, row{5.1, rssFigure, fmtMiB(ours), fmtMiB(theirs), fmtRatio(r), goalCell(goal, r, limit)})
	}
	b.anonRow(agent, ne, peerCell, label)

	if !b.opt.long {
		b.rows = append(b.rows, row{5.2, longFigure, "not run (-long)", "—", "—", "—"})
		return
	}
	progress("figure 5: scraping the agent on to %s", thousands(rssLongScrapes))
	for i := rssScrapes; i < rssLongScrapes; i++ {
		if err := get(ctx, client, ourURL); err != nil {
			b.fail(5.2, longFigure, "—", err)
			return
		}
	}
	long, err := agent.rssMiB()
	if err != nil {
		b.fail(5.2, longFigure, "—", err)
		return
	}
	b.rows = append(b.rows, row{5.2, longFigure, fmt.Sprintf("%s (%+.1f MiB)", fmtMiB(long), long-ours), "—", "—", "—"})
}

// anonRow is figure 5's second row, read at the same moment: the two
// servers' anonymous memory (RssAnon), what each allocated itself, apart
// from the file pages of its binary that VmRSS also counts (the kernel
// maps those 64 KiB at a time, so a larger binary shows more of them
// whatever its code does; docs/bench.md, "Agent memory"). It informs
// figure 5.1 and has no goal of its own.
func (b *bench) anonRow(agent, ne *server, peerCell, label string) {
	figure := fmt.Sprintf("agent anonymous memory (RssAnon) after %s scrapes vs node_exporter's, %s", thousands(rssScrapes), label)
	ours, err := agent.anonMiB()
	if err != nil {
		b.fail(5.15, figure, "—", err)
		return
	}
	if ne == nil {
		b.rows = append(b.rows, row{5.15, figure, fmtMiB(ours), peerCell, "—", "—"})
		return
	}
	theirs, err := ne.anonMiB()
	if err != nil {
		b.fail(5.15, figure, "—", errPeer{err})
		return
	}
	b.rows = append(b.rows, row{5.15, figure, fmtMiB(ours), fmtMiB(theirs), fmtRatio(ours / theirs), "—"})
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// print writes the header, the table and the CPU-time table.
func (b *bench) print(ctx context.Context, w io.Writer) {
	version := func(bin string) string {
		if bin == "" {
			return errNoPeer.Error()
		}
		if v := peerVersion(ctx, bin); v != "" {
			return bin + " (" + v + ")"
		}
		return bin
	}
	oursVersion := b.bin
	{
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if out, err := exec.CommandContext(ctx, b.bin, "version").Output(); err == nil {
			oursVersion += " (" + strings.TrimSpace(string(out)) + ")"
		}
		cancel()
	}
	fmt.Fprintf(w, "## gpuaffinity vs peers\n\n")
	fmt.Fprintf(w, "Each figure: %d warm-up pairs, then %d measured pairs, gpuaffinity and peer interleaved (A B A B …) on the same input; "+
		"medians of the wall times, and the median of the per-pair ratios gpuaffinity/peer (below 1: gpuaffinity is faster or smaller).\n\n",
		b.opt.warm, b.opt.n)
	fmt.Fprintf(w, "- gpuaffinity: %s\n", oursVersion)
	fmt.Fprintf(w, "- lstopo-no-graphics: %s\n", version(b.lstopo))
	if b.neBuilt {
		fmt.Fprintf(w, "- node_exporter: %s (%s, built here)\n", b.nodeExp, nodeExporterModule)
	} else {
		fmt.Fprintf(w, "- node_exporter: %s\n", version(b.nodeExp))
	}
	fmt.Fprintf(w, "- minimal program: Go, cgo-linked, built here with %s\n", runtime.Version())
	fmt.Fprintf(w, "- host: %d CPUs, %s/%s\n\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)

	toCells := func(rows []row, withGoal bool) [][]string {
		rows = slices.Clone(rows)
		slices.SortStableFunc(rows, func(x, y row) int { return cmp.Compare(x.key, y.key) })
		var out [][]string
		for _, r := range rows {
			c := []string{r.figure, r.ours, r.peer, r.ratio}
			if withGoal {
				c = append(c, r.goal)
			}
			out = append(out, c)
		}
		return out
	}
	fmt.Fprint(w, markdownTable([]string{"figure", "gpuaffinity", "peer", "ratio", "goal"}, toCells(b.rows, true)))
	if len(b.cpuRows) > 0 {
		fmt.Fprintf(w, "\nCPU time (user+system, from the child's rusage) of the same process runs, medians:\n\n")
		fmt.Fprint(w, markdownTable([]string{"figure", "gpuaffinity", "peer", "ratio"}, toCells(b.cpuRows, false)))
	}
}
