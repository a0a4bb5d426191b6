// Command fleetbench measures how `gpuaffinity fleet` scales: it builds
// a synthetic fleet of N nodes (series as the agent exports them,
// backfilled into a TSDB with promtool), serves it from a real
// Prometheus, runs each fleet subcommand against it as the fleet
// CronJob would (GOMEMLIMIT, no GOGC) and replays the queries the
// subcommand logged straight to Prometheus, to set the subcommand's wall
// time against Prometheus's own. `make bench` runs it.
//
//	go run ./internal/tools/fleetbench [-n 1000,5000,20000,50000] [-seed 1] [-interval 60s] [-window 1h]
//	    [-cache DIR] [-gomemlimit 150MiB] [-bin PATH]
//
// Each N's TSDB is cached under -cache (default
// ${XDG_CACHE_HOME:-$HOME/.cache}/gpuaffinity/fleetbench), so a second
// run starts at Prometheus. Building one costs, at 50,000 nodes on 2
// cores: 2 minutes, 2.8 GB of OpenMetrics text on disk while promtool
// reads it, promtool's 8 GB of RSS; the TSDB kept is 341 MB. The table
// goes to stdout, progress to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Defaults; a dataset made with others is cached under its own key.
const defaultSeed = 1

var defaultSampling = sampling{interval: 60 * time.Second, window: time.Hour}

// replays is how often each query is sent straight to Prometheus: the
// median counts.
const replays = 3

// The goals the numbers are judged against (at 50,000 nodes).
const (
	goalWall  = 60 * time.Second
	goalRSSKB = 192 << 10 // the fleet CronJob's memory limit
	goalRatio = 2.0
)

// cronJobGOMEMLIMIT is deploy/kubernetes/fleet/cronjob.yaml's GOMEMLIMIT.
const cronJobGOMEMLIMIT = "150MiB"

type options struct {
	ns                   []int
	seed                 uint64
	sampling             sampling
	cache                string
	gomemlimit           string
	bin                  string
	prometheus, promtool string
}

func main() {
	if out := os.Getenv(measureEnv); out != "" {
		os.Exit(shim(out))
	}
	var o options
	var ns string
	flag.StringVar(&ns, "n", "1000,5000,20000,50000", "fleet sizes, comma-separated")
	flag.Uint64Var(&o.seed, "seed", defaultSeed, "seed of the generator")
	flag.DurationVar(&o.sampling.interval, "interval", defaultSampling.interval, "sample interval of up and the node_* families")
	flag.DurationVar(&o.sampling.window, "window", defaultSampling.window, "how long before T those families have samples")
	flag.StringVar(&o.cache, "cache", defaultCache(), "directory of the cached TSDBs, one per N")
	flag.StringVar(&o.gomemlimit, "gomemlimit", cronJobGOMEMLIMIT, "GOMEMLIMIT of the measured commands (the fleet CronJob's); \"\" none")
	flag.StringVar(&o.bin, "bin", "", "gpuaffinity binary with the fleet command (default: go build ./cmd/gpuaffinity)")
	flag.StringVar(&o.prometheus, "prometheus", "prometheus", "prometheus binary")
	flag.StringVar(&o.promtool, "promtool", "promtool", "promtool binary")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./internal/tools/fleetbench [flags]\n\n"+
			"Times gpuaffinity fleet's subcommands against a real Prometheus serving a synthetic fleet.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	for _, f := range strings.Split(ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 100 {
			fmt.Fprintf(os.Stderr, "fleetbench: -n %q: want sizes of at least 100, comma-separated\n", ns)
			os.Exit(2)
		}
		o.ns = append(o.ns, n)
	}
	if flag.NArg() != 0 || o.sampling.interval <= 0 || o.sampling.window < o.sampling.interval || o.sampling.window > time.Hour {
		flag.Usage()
		os.Exit(2)
	}
	// Interrupted, the run still stops Prometheus and removes its
	// temporary directories (several GB at 50,000 nodes).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}

func defaultCache() string {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache")
	}
	return filepath.Join(dir, "gpuaffinity", "fleetbench")
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fleetbench: "+format+"\n", args...)
}

func run(ctx context.Context, o options) error {
	tmp, err := os.MkdirTemp("", "fleetbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := o.bin
	if bin == "" {
		progress("building ./cmd/gpuaffinity")
		if bin, err = buildBinary(tmp); err != nil {
			return err
		}
	}
	missing, err := missingFlags(bin)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		fmt.Printf("NOTE: %s fleet has no %s: the subcommands are not run; the rows give Prometheus's time for the fleet reader's queries, one per family, written by hand\n\n",
			bin, strings.Join(missing, ", "))
	}
	env := childEnv(o.gomemlimit)

	var results []result
	var sets []*dataset
	version := "unknown"
	failed := false
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tsubcommand\twall s\tpeak RSS MiB\tqueries\tresponse MB\tPrometheus s\twall/Prometheus\tgoals\t")
	tw.Flush()
	for _, n := range o.ns {
		progress("N=%d: TSDB", n)
		d, err := loadOrBuild(ctx, o.cache, o.promtool, n, o.seed, o.sampling)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		sets = append(sets, d)
		if !d.Cached {
			progress("N=%d: built %s in %.1f s (text %.0f MB in %.1f s, promtool %.1f s, TSDB %.0f MB)", n, d.Dir,
				(d.Generate + d.Promtool).Seconds(), mb(d.TextBytes), d.Generate.Seconds(), d.Promtool.Seconds(), mb(d.TSDBBytes))
		}
		d.load = loadAverage()
		rs, v, err := measure(ctx, o, d, bin, env, tmp, len(missing) > 0)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		version = v
		for _, r := range rs {
			r.n = n
			printRow(tw, r)
			if r.err != nil {
				failed = true
				fmt.Fprintf(os.Stderr, "fleetbench: N=%d %s: %v\n", n, r.sub, r.err)
			}
			results = append(results, r)
		}
	}
	fmt.Println()
	printGrowth(results)
	fmt.Println()
	printSetup(o, sets, version)
	if failed {
		return fmt.Errorf("some subcommands failed (above)")
	}
	return nil
}

// measure serves d and runs every subcommand against it (or, handOnly,
// replays the hand-written queries).
func measure(ctx context.Context, o options, d *dataset, bin string, env []string, tmp string, handOnly bool) ([]result, string, error) {
	s, err := startPrometheus(ctx, o.prometheus, d)
	if err != nil {
		return nil, "", err
	}
	defer s.stop()
	// The fleet at T: every node but the gapped ones, whose up is 0.
	for _, c := range []struct {
		q    string
		want int
	}{{"count(gpuaffinity_node_placement_info)", d.N - d.Gapped}, {"count(up == 0)", d.Gapped}} {
		got, err := s.scalar(ctx, c.q, evalTime)
		if err != nil {
			return nil, "", err
		}
		if int(got) != c.want {
			return nil, "", fmt.Errorf("%s at %s is %v, want %d (%d nodes, %d gapped)", c.q, evalTime.Format(time.RFC3339), got, c.want, d.N, d.Gapped)
		}
	}
	hand := make([]queryLog, 0, len(families))
	for _, q := range handQueries() {
		hand = append(hand, queryLog{Query: q, Time: evalTime.Format(time.RFC3339)})
	}
	// One pass to warm Prometheus's caches before anything is timed.
	if _, _, err := replay(ctx, s, hand, 1); err != nil {
		return nil, "", err
	}
	if handOnly {
		r := result{sub: "(family queries)", queries: len(hand)}
		r.prom, r.bytes, r.err = replay(ctx, s, hand, replays)
		return []result{r}, s.version(), nil
	}
	var rs []result
	for _, sc := range subcommands {
		progress("N=%d: %s", d.N, sc.name)
		r, logs, err := runSub(ctx, bin, tmp, env, s, sc.name, sc.args, sc.ok)
		if err == nil {
			r.queries = len(logs)
			r.prom, r.bytes, err = replay(ctx, s, logs, replays)
		}
		r.err = err
		rs = append(rs, r)
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
	}
	return rs, s.version(), nil
}

// loadAverage is the 1-minute load average: other work on the machine
// skews every time measured.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}

func mb(b int64) float64 { return float64(b) / 1e6 }

func printRow(tw *tabwriter.Writer, r result) {
	defer tw.Flush()
	if r.err != nil {
		fmt.Fprintf(tw, "%d\t%s\tFAILED\t\t\t\t\t\t\t\n", r.n, r.sub)
		return
	}
	wall, rss, ratio, goals := "-", "-", "-", "-"
	if r.run {
		x := r.wall.Seconds() / r.prom.Seconds()
		var miss []string
		if r.wall > goalWall {
			miss = append(miss, "wall>60s")
		}
		if r.rssKB > goalRSSKB {
			miss = append(miss, "RSS>192MiB")
		}
		if x > goalRatio {
			miss = append(miss, "ratio>2")
		}
		wall, rss, ratio, goals = fmt.Sprintf("%.2f", r.wall.Seconds()), fmt.Sprintf("%.1f", float64(r.rssKB)/1024), fmt.Sprintf("%.2f", x), "ok"
		if len(miss) > 0 {
			goals = strings.Join(miss, ",")
		}
	}
	fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%.1f\t%.2f\t%s\t%s\t\n", r.n, r.sub, wall, rss, r.queries, mb(r.bytes), r.prom.Seconds(), ratio, goals)
}

// printGrowth prints, per subcommand and consecutive pair of N, the
// exponent k of t ∝ N^k for wall time, peak RSS and Prometheus's time,
// and the cost per node.
func printGrowth(results []result) {
	fmt.Println("growth law: exponent k in cost ∝ N^k between consecutive N; per node at the larger N (marginal: the difference over the difference in N)")
	exp := func(a, b, n1, n2 float64) string {
		if a <= 0 || b <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", math.Log(b/a)/math.Log(n2/n1))
	}
	printed := false
	for i, r2 := range results {
		var r1 *result
		for j := i - 1; j >= 0; j-- {
			if results[j].sub == r2.sub {
				r1 = &results[j]
				break
			}
		}
		if r1 == nil || r1.err != nil || r2.err != nil {
			continue
		}
		n1, n2 := float64(r1.n), float64(r2.n)
		line := fmt.Sprintf("  %-16s %6d→%-6d Prometheus k=%s", r2.sub, r1.n, r2.n, exp(r1.prom.Seconds(), r2.prom.Seconds(), n1, n2))
		if r2.run {
			line += fmt.Sprintf("  wall k=%s  RSS k=%s  |  %.0f µs/node (marginal %.0f), %.2f KB/node (marginal %.2f)",
				exp(r1.wall.Seconds(), r2.wall.Seconds(), n1, n2), exp(float64(r1.rssKB), float64(r2.rssKB), n1, n2),
				float64(r2.wall.Microseconds())/n2, float64((r2.wall-r1.wall).Microseconds())/(n2-n1),
				float64(r2.rssKB)*1.024/n2, float64(r2.rssKB-r1.rssKB)*1.024/(n2-n1))
		}
		fmt.Println(line)
		printed = true
	}
	if !printed {
		fmt.Println("  (needs two sizes)")
	}
}

func printSetup(o options, sets []*dataset, version string) {
	fmt.Println("setup:")
	for _, d := range sets {
		how := fmt.Sprintf("built in %.1f s: text %.0f MB written in %.1f s, promtool %.1f s and %.0f MiB peak RSS", (d.Generate + d.Promtool).Seconds(),
			mb(d.TextBytes), d.Generate.Seconds(), d.Promtool.Seconds(), float64(d.PromtoolRSSKB)/1024)
		if d.Cached {
			how = "cached; it was " + how
		}
		fmt.Printf("  N=%d: %s; %d series, %d samples; TSDB %.0f MB (%s); load average when measured %s\n",
			d.N, d.Composition, d.Series, d.Samples, mb(d.TSDBBytes), how, d.load)
	}
	win := int(o.sampling.window / o.sampling.interval)
	fmt.Printf("  samples per series: %d (up, gpuaffinity_node_placement_info, gpuaffinity_node_layout_info: every %s over the %s before T), 2 (the other families: in the 2 minutes before T); gapped nodes: none in the %s before T but up, 0\n",
		win, o.sampling.interval, o.sampling.window, gapBefore)
	fmt.Printf("  T %s, seed %d, cache %s; Prometheus %s; %d cores; children GOMEMLIMIT=%s, GOGC unset\n",
		evalTime.Format(time.RFC3339), o.seed, o.cache, version, runtime.NumCPU(), o.gomemlimit)
}
