//go:build !omit_agent && !agent_only

package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/fleet/kube"
	"github.com/gpuaffinity/gpuaffinity/fleet/prom"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
)

// report's exit statuses, as check's: 1 when a node drifts, a clique
// misses a member, a group has no majority or a target is refused; 2
// when the fleet could not be read (Prometheus unreachable, no agent
// series), so that a caller never takes "could not check" for
// "drifted", or for consistent.
const (
	fleetExitDrift      = 1
	fleetExitCannotRead = 2
)

// inCluster is the Kubernetes client `labels --apply` uses (a test
// points it at its own API server).
var inCluster = kube.InCluster

// fleetFlags are the flags every fleet subcommand shares: which
// Prometheus to ask, how to name the nodes, and how much to read.
type fleetFlags struct {
	url, selector, nodeLabel, at, maxResponse string
	timeout, lookback                         time.Duration
	maxSeries                                 int
	logQueries, skipRefused                   bool
}

func (f *fleetFlags) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&f.url, "prometheus", cmp.Or(os.Getenv("GPUAFFINITY_PROMETHEUS_URL"), prom.DefaultURL),
		"base URL of the Prometheus server that scrapes the agents (env GPUAFFINITY_PROMETHEUS_URL)")
	fs.StringVar(&f.selector, "selector", "", `label matchers every query of the agents' series adds, e.g. '{job="gpuaffinity",cluster="a"}'`)
	fs.StringVar(&f.nodeLabel, "node-label", prom.DefaultNodeLabel,
		"target label whose value is the node's name: auto (node where the target has it, else instance), node, instance (its port dropped) or another label Prometheus attaches to the target")
	fs.DurationVar(&f.timeout, "timeout", prom.DefaultTimeout, "time all the queries may take together")
	fs.DurationVar(&f.lookback, "lookback", prom.DefaultLookback, "a node not scraped now keeps the placement its series last had within this window")
	fs.StringVar(&f.at, "time", "", "evaluate at this time (RFC 3339, or Unix seconds) instead of now")
	fs.StringVar(&f.maxResponse, "max-response", byteFlag(prom.DefaultMaxResponseBytes), "the most one answer of Prometheus may hold, decompressed (KiB, MiB, GiB)")
	fs.IntVar(&f.maxSeries, "max-series-per-node", prom.DefaultMaxSeriesPerNode, "the most series of one family one node may hold")
	fs.BoolVar(&f.logQueries, "log-queries", false, "print each query, its time and size on stderr")
	fs.BoolVar(&f.skipRefused, "skip-refused", false,
		"go on without the targets refused for their identity (two targets naming one node, an agent naming another host); by default nothing is written or patched while any is")
}

// read asks Prometheus for the fleet; its warnings and refusals go to
// stderr. Refused targets are an error unless --skip-refused (or
// report, which lists them).
func (f *fleetFlags) read(cmd *cobra.Command, report bool) (prom.Fleet, error) {
	fleetGC()
	o := prom.Options{URL: f.url, Selector: f.selector, NodeLabel: f.nodeLabel, Timeout: f.timeout, Lookback: f.lookback,
		MaxSeriesPerNode: f.maxSeries, Report: report}
	var err error
	if o.Time, err = parseTime(f.at); err != nil {
		return prom.Fleet{}, fmt.Errorf("--time: %w", err)
	}
	if o.MaxResponseBytes, err = parseBytes(f.maxResponse); err != nil {
		return prom.Fleet{}, fmt.Errorf("--max-response: %w", err)
	}
	if f.logQueries {
		stderr := cmd.ErrOrStderr()
		o.QueryLog = func(q prom.QueryStat) {
			b, _ := json.Marshal(q)
			fmt.Fprintf(stderr, "gpuaffinity fleet: query %s\n", b)
		}
	}
	fl, err := prom.Read(cmd.Context(), o)
	warn(cmd, fl.Warnings)
	if err != nil {
		return fl, err
	}
	for _, r := range fl.Refused {
		fmt.Fprintln(cmd.ErrOrStderr(), "gpuaffinity fleet: refused:", r)
	}
	if len(fl.Refused) > 0 && !f.skipRefused && !report {
		return fl, fmt.Errorf("%d targets refused (named above): nothing written; fix them, or run with --skip-refused to go on without them (docs/fleet.md, \"Node identity\")", len(fl.Refused))
	}
	return fl, nil
}

// fleetGC gives the fleet commands the collector's defaults (unless
// GOGC or GOMEMLIMIT say otherwise): commandGC's limit suits a command
// that allocates a few megabytes, not one that reads a fleet of 50,000
// nodes, which past it would collect back to back.
func fleetGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(100)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(math.MaxInt64)
	}
}

// parseTime reads RFC 3339 or Unix seconds; "" is the zero time (now).
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-12-05T10:00:00Z) or Unix seconds", s)
	}
	return time.UnixMilli(int64(v * 1000)), nil
}

// parseBytes reads a size: a number of bytes, or of KiB, MiB or GiB.
func parseBytes(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(num, suffix); ok {
			num, mult = strings.TrimSpace(n), m
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v <= 0 || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q: want a positive size (bytes, or KiB, MiB, GiB)", s)
	}
	return v * mult, nil
}

// byteFlag is n as parseBytes reads it.
func byteFlag(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + "MiB"
	}
	return strconv.FormatInt(n, 10)
}

func warn(cmd *cobra.Command, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "gpuaffinity fleet: warning:", w)
	}
}

// writeOut writes data to file (atomically) or, for "", to stdout.
func writeOut(cmd *cobra.Command, file string, data []byte) error {
	if file == "" {
		_, err := cmd.OutOrStdout().Write(data)
		return err
	}
	return atomicfile.Write(file, data, 0o644)
}

// writerFlags are the flags of the subcommands that write a Slurm file:
// where, the previous file to compare with, and the guard.
type writerFlags struct {
	out, previous, maxDrop string
	force                  bool
}

func (w *writerFlags) register(cmd *cobra.Command) {
	outputFileFlag(cmd, &w.out, "write to FILE (atomically) instead of stdout; the file there is the previous one unless --previous names another")
	cmd.Flags().StringVar(&w.previous, "previous", "", "the file an earlier run wrote, to compare with (default: the -f file where it exists)")
	cmd.Flags().StringVar(&w.maxDrop, "max-drop", fleet.DefaultMaxDrop.String(), "the most nodes of the previous file a run may drop without --force: a count, or a percentage")
	cmd.Flags().BoolVar(&w.force, "force", false, "write even where the change is larger than --max-drop, BlockSizes change, or the previous file does not parse")
}

// guard is the flags' fleet.Guard.
func (w *writerFlags) guard() (fleet.Guard, error) {
	t, err := fleet.ParseThreshold(w.maxDrop)
	if err != nil {
		return fleet.Guard{}, fmt.Errorf("--max-drop: %w", err)
	}
	return fleet.Guard{MaxDrop: t, Force: w.force}, nil
}

// maxPreviousFile bounds the previous file read (a 50,000-node
// topology.conf is about 2 MB).
const maxPreviousFile = 64 << 20

// readPrevious returns the previous file's content: --previous, else the
// -f file; nil where there is none yet.
func (w *writerFlags) readPrevious() ([]byte, error) {
	path, explicit := w.previous, w.previous != ""
	if !explicit {
		path = w.out
	}
	if path == "" {
		return nil, nil
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && !explicit:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("previous file: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("previous file %s: not a regular file", path)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("previous file: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxPreviousFile+1))
	if err != nil {
		return nil, fmt.Errorf("previous file %s: %w", path, err)
	}
	if len(data) > maxPreviousFile {
		return nil, fmt.Errorf("previous file %s: over %d MiB", path, maxPreviousFile>>20)
	}
	return data, nil
}

// writeFile runs plan, a writer's planning with the previous file, and
// writes what it returns.
func (w *writerFlags) writeFile(cmd *cobra.Command, name string, plan func(previous []byte, g fleet.Guard) ([]byte, []string, error)) error {
	g, err := w.guard()
	if err != nil {
		return err
	}
	prev, err := w.readPrevious()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	data, warnings, err := plan(prev, g)
	warn(cmd, warnings)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return writeOut(cmd, w.out, data)
}

func newFleetCmd(*globals) *cobra.Command {
	var f fleetFlags
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "The cluster's topology from every node's agent, through Prometheus: Slurm topology, node labels, consistency report",
		Long: `fleet reads what every gpuaffinity agent exports about its node
(gpuaffinity_node_placement_info, gpuaffinity_node_layout_info and the pairing
and RDMA series) from a Prometheus server's HTTP API and writes what the
schedulers read: Slurm's topology.conf (topology/tree from the network tiers,
topology/block from the NVLink cliques) and topology.yaml, Kubernetes node
labels, and a report of the nodes that differ from the other nodes of their
model. A node's name is the one Prometheus gives its scrape target, never one
its agent claims; a node not scraped now keeps its place for --lookback; a
file replaces the previous one only within --max-drop. It runs anywhere that
reaches Prometheus: a login node, a CronJob (docs/fleet.md).`,
		Example: `  gpuaffinity fleet report --prometheus http://prometheus:9090
  gpuaffinity fleet slurm-tree -f /etc/slurm/topology.conf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	f.register(cmd)
	cmd.AddCommand(newFleetTreeCmd(&f), newFleetBlockCmd(&f), newFleetYAMLCmd(&f), newFleetLabelsCmd(&f), newFleetReportCmd(&f))
	return cmd
}

func newFleetTreeCmd(f *fleetFlags) *cobra.Command {
	var w writerFlags
	var root string
	cmd := &cobra.Command{
		Use:   "slurm-tree",
		Short: "Write Slurm's topology.conf for topology/tree from the nodes' network tiers",
		Long: `slurm-tree writes topology.conf for Slurm's topology/tree plugin: a SwitchName
line per switch (or cloud group of switches) the nodes' tiers name, leaves with
their Nodes=, upper switches with their Switches=. Nodes without tiers are left
out, with a warning. With --root, one switch over the top-level ones joins them
(a job may then span them). The file is checked with Slurm's rules before it is
written, and compared with the previous one: a node whose tiers are empty now
keeps its switch, and more dropped nodes than --max-drop need --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fl, err := f.read(cmd, false)
			if err != nil {
				return err
			}
			return w.writeFile(cmd, "slurm-tree", func(prev []byte, g fleet.Guard) ([]byte, []string, error) {
				data, plan, err := fleet.TreeFile(fl.Nodes, prev, fleet.TreeOptions{Root: root, Keep: fl.Unresolved}, g)
				return data, plan.Warnings, err
			})
		},
	}
	w.register(cmd)
	cmd.Flags().StringVar(&root, "root", "", "name of a switch over every top-level switch (\"\": none)")
	return cmd
}

func newFleetBlockCmd(f *fleetFlags) *cobra.Command {
	var w writerFlags
	var sizes []int
	cmd := &cobra.Command{
		Use:   "slurm-block",
		Short: "Write Slurm's topology.conf for topology/block: one block per NVLink domain",
		Long: `slurm-block writes topology.conf for Slurm's topology/block plugin (Slurm
23.11 and newer): a BlockName line per NVLink clique (GB200/GB300 NVL72 and the
like; OCI's GPU memory fabric where NVML names none) and BlockSizes. Block names
and BlockSizes are kept from the previous file; a block under the base size is
left out alone, with a warning.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fl, err := f.read(cmd, false)
			if err != nil {
				return err
			}
			return w.writeFile(cmd, "slurm-block", func(prev []byte, g fleet.Guard) ([]byte, []string, error) {
				data, plan, err := fleet.BlockFile(fl.Nodes, prev, fleet.BlockOptions{Sizes: sizes, Keep: fl.Unresolved}, g)
				return data, plan.Warnings, err
			})
		},
	}
	w.register(cmd)
	cmd.Flags().IntSliceVar(&sizes, "block-sizes", nil, "BlockSizes= (default: the previous file's, else inferred from the blocks, docs/fleet.md)")
	return cmd
}

func newFleetYAMLCmd(f *fleetFlags) *cobra.Command {
	var w writerFlags
	var root string
	var sizes []int
	cmd := &cobra.Command{
		Use:   "slurm-yaml",
		Short: "Write Slurm's topology.yaml: the tree and the NVLink block topology",
		Long: `slurm-yaml writes topology.yaml (Slurm 25.05 and newer), which names several
topologies: the tree of slurm-tree and the blocks of slurm-block, whichever the
fleet has; the block topology is the cluster default where there is one. Each
is planned and guarded against its topology in the previous file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fl, err := f.read(cmd, false)
			if err != nil {
				return err
			}
			return w.writeFile(cmd, "slurm-yaml", func(prev []byte, g fleet.Guard) ([]byte, []string, error) {
				data, tp, bp, err := fleet.YAMLFile(fl.Nodes, prev, fleet.TreeOptions{Root: root, Keep: fl.Unresolved},
					fleet.BlockOptions{Sizes: sizes, Keep: fl.Unresolved}, g)
				return data, append(tp.Warnings, bp.Warnings...), err
			})
		},
	}
	w.register(cmd)
	cmd.Flags().StringVar(&root, "root", "", "name of a switch over every top-level switch of the tree (\"\": none)")
	cmd.Flags().IntSliceVar(&sizes, "block-sizes", nil, "block_sizes (default: the previous file's, else inferred from the blocks, docs/fleet.md)")
	return cmd
}

func newFleetLabelsCmd(f *fleetFlags) *cobra.Command {
	var out, format, scheme string
	var apply bool
	cmd := &cobra.Command{
		Use:   "labels",
		Short: "Kubernetes node labels for the nodes' placement: a patch list, or applied",
		Long: `labels gives every node the labels of its placement: with --scheme cloud the
cloud's own keys where it has them (cloud.google.com/gce-topology-*,
oci.oraclecloud.com/rdma.*), nvidia.com/gpu.clique, gpuaffinity.io/network.tier-N
elsewhere; with --scheme topograph NVIDIA topograph's keys. It prints kubectl
commands (-o kubectl) or a JSON patch list (-o json); --apply patches the nodes
through the Kubernetes API instead (in a pod: its service account, which needs
get, list and patch on nodes; docs/fleet.md). --apply records the keys it sets
in the node's gpuaffinity.io/fleet-labels annotation and deletes only those,
never a key another component owns (GKE's, OKE's, GPU Feature Discovery's) and
never because a node's series are missing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := fleet.ParseScheme(scheme)
			if err != nil {
				return fmt.Errorf("--scheme: %w", err)
			}
			if err := fleet.CheckLabelFormat(format); err != nil {
				return fmt.Errorf("-o %w", err)
			}
			fl, err := f.read(cmd, false)
			if err != nil {
				return err
			}
			if apply {
				return applyLabels(cmd, fl.Nodes, s)
			}
			// To stdout the list streams (a fleet's list is never held);
			// to a file it is written whole, atomically.
			var buf bytes.Buffer
			var w io.Writer = &buf
			if out == "" {
				w = cmd.OutOrStdout()
			}
			warnings, err := fleet.WriteLabels(w, fl.Nodes, s, format)
			warn(cmd, warnings)
			if err != nil || out == "" {
				return err
			}
			return writeOut(cmd, out, buf.Bytes())
		},
	}
	cmd.Flags().StringVarP(&out, "output-file", "f", "", "write to FILE (atomically) instead of stdout")
	cmd.Flags().StringVarP(&format, "output", "o", "kubectl", "kubectl (a kubectl label command per node) or json (a patch list)")
	cmd.Flags().StringVar(&scheme, "scheme", string(fleet.SchemeCloud), "label keys: cloud or topograph")
	cmd.Flags().BoolVar(&apply, "apply", false, "patch the nodes through the in-cluster Kubernetes API instead of printing")
	return cmd
}

// applyLabels patches the nodes' labels through the in-cluster API
// (kube.Apply); a node it cannot patch is a warning, and the command
// fails when any was.
func applyLabels(cmd *cobra.Command, nodes []fleet.Node, s fleet.Scheme) error {
	c, err := inCluster()
	if err != nil {
		return fmt.Errorf("labels --apply: %w", err)
	}
	r, err := kube.Apply(cmd.Context(), c, nodes, s, kube.ApplyOptions{})
	warn(cmd, r.Warnings)
	if err != nil {
		return fmt.Errorf("labels --apply: %w", err)
	}
	warn(cmd, r.Problems())
	for _, n := range r.Patched {
		fmt.Fprintf(cmd.OutOrStdout(), "labelled node %s\n", n)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "labels --apply: %s\n", r.Summary())
	if err := r.Err(); err != nil {
		return fmt.Errorf("labels --apply: %w", err)
	}
	return nil
}

func newFleetReportCmd(f *fleetFlags) *cobra.Command {
	var out, format string
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Report the nodes that differ from the other nodes of their model, and NVLink cliques missing members",
		Long: `report groups the nodes by system and GPU model and names every node whose
layout (GPUs, GPU↔NIC pairs, NIC roles and fabrics) or NIC firmware differs
from what a strict majority of its group has, with each fact that differs; and
every NVLink clique with fewer nodes reporting than its IMEX node list holds.
Nodes not scraped now but within --lookback are listed as stale, not compared,
and still count as their clique's members. Exit status 1 when it finds any
drift, missing member, group without a majority or refused target; 2 when the
fleet could not be read (Prometheus unreachable, no agent series).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := fleet.CheckReportFormat(format); err != nil {
				return fmt.Errorf("-o %w", err)
			}
			fl, err := f.read(cmd, true)
			if err != nil {
				return exitError{code: fleetExitCannotRead, err: err}
			}
			rep := fl.Consistency()
			var buf bytes.Buffer
			if err := rep.Write(&buf, format); err != nil {
				return err
			}
			if err := writeOut(cmd, out, buf.Bytes()); err != nil {
				return err
			}
			if !rep.OK() {
				return exitError{code: fleetExitDrift, err: errors.New("report: " + rep.Summary())}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output-file", "f", "", "write to FILE (atomically) instead of stdout")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "text or json")
	return cmd
}
