//go:build !omit_agent

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/fleet/kube"
	"github.com/gpuaffinity/gpuaffinity/fleet/prom"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
)

// report's exit statuses, as check's: 1 when a node drifts, a clique
// misses a member or a group has no majority; 2 when the fleet could not
// be read (Prometheus unreachable, no agent series), so that a caller
// never takes "could not check" for "drifted", or for consistent.
const (
	fleetExitDrift      = 1
	fleetExitCannotRead = 2
)

// fleetFlags are the flags every fleet subcommand shares: which
// Prometheus to ask and how to name the nodes.
type fleetFlags struct {
	url, selector, nodeLabel string
	timeout                  time.Duration
}

func (f *fleetFlags) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&f.url, "prometheus", cmp.Or(os.Getenv("GPUAFFINITY_PROMETHEUS_URL"), prom.DefaultURL),
		"base URL of the Prometheus server that scrapes the agents (env GPUAFFINITY_PROMETHEUS_URL)")
	fs.StringVar(&f.selector, "selector", "", `label matchers every query adds, e.g. '{job="gpuaffinity",cluster="a"}'`)
	fs.StringVar(&f.nodeLabel, "node-label", prom.DefaultNodeLabel,
		"label whose value is the node's name: hostname (the agent's), node, instance (its port dropped) or any other")
	fs.DurationVar(&f.timeout, "timeout", prom.DefaultTimeout, "time all the queries may take together")
}

// read asks Prometheus for the fleet; its warnings go to stderr.
func (f *fleetFlags) read(cmd *cobra.Command) ([]fleet.Node, error) {
	nodes, warnings, err := prom.Read(cmd.Context(), prom.Options{URL: f.url, Selector: f.selector, NodeLabel: f.nodeLabel, Timeout: f.timeout})
	warn(cmd, warnings)
	return nodes, err
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
model. It runs anywhere that reaches Prometheus: a login node, a CronJob
(docs/fleet.md).`,
		Example: `  gpuaffinity fleet report --prometheus http://prometheus:9090
  gpuaffinity fleet slurm-tree --node-label node -f /etc/slurm/topology.conf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	f.register(cmd)
	cmd.AddCommand(newFleetTreeCmd(&f), newFleetBlockCmd(&f), newFleetYAMLCmd(&f), newFleetLabelsCmd(&f), newFleetReportCmd(&f))
	return cmd
}

func newFleetTreeCmd(f *fleetFlags) *cobra.Command {
	var out, root string
	cmd := &cobra.Command{
		Use:   "slurm-tree",
		Short: "Write Slurm's topology.conf for topology/tree from the nodes' network tiers",
		Long: `slurm-tree writes topology.conf for Slurm's topology/tree plugin: a SwitchName
line per switch (or cloud group of switches) the nodes' tiers name, leaves with
their Nodes=, upper switches with their Switches=. Nodes without tiers are left
out, with a warning. With --root, one switch over the top-level ones joins them
(a job may then span them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nodes, err := f.read(cmd)
			if err != nil {
				return err
			}
			sw, warnings, err := fleet.Tree(nodes, fleet.TreeOptions{Root: root})
			warn(cmd, warnings)
			if err != nil {
				return fmt.Errorf("slurm-tree: %w", err)
			}
			if len(sw) == 0 {
				return errors.New("slurm-tree: no node has network tiers: nothing to write (see the agent's --placement flags)")
			}
			var buf bytes.Buffer
			if err := fleet.WriteTree(&buf, sw); err != nil {
				return err
			}
			return writeOut(cmd, out, buf.Bytes())
		},
	}
	outputFileFlag(cmd, &out, "write to FILE (atomically) instead of stdout")
	cmd.Flags().StringVar(&root, "root", "", "name of a switch over every top-level switch (\"\": none)")
	return cmd
}

func newFleetBlockCmd(f *fleetFlags) *cobra.Command {
	var out string
	var sizes []int
	cmd := &cobra.Command{
		Use:   "slurm-block",
		Short: "Write Slurm's topology.conf for topology/block: one block per NVLink domain",
		Long: `slurm-block writes topology.conf for Slurm's topology/block plugin (Slurm
23.11 and newer): a BlockName line per NVLink clique (GB200/GB300 NVL72 and the
like; OCI's GPU memory fabric where NVML names none) and BlockSizes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nodes, err := f.read(cmd)
			if err != nil {
				return err
			}
			blocks, bs, warnings, err := fleet.Blocks(nodes, fleet.BlockOptions{Sizes: sizes})
			warn(cmd, warnings)
			if err != nil {
				return fmt.Errorf("slurm-block: %w", err)
			}
			if len(blocks) == 0 {
				return errors.New("slurm-block: no node is in an NVLink clique: nothing to write")
			}
			var buf bytes.Buffer
			if err := fleet.WriteBlocks(&buf, blocks, bs); err != nil {
				return err
			}
			return writeOut(cmd, out, buf.Bytes())
		},
	}
	outputFileFlag(cmd, &out, "write to FILE (atomically) instead of stdout")
	cmd.Flags().IntSliceVar(&sizes, "block-sizes", nil, "BlockSizes= (default: inferred from the blocks, docs/fleet.md)")
	return cmd
}

func newFleetYAMLCmd(f *fleetFlags) *cobra.Command {
	var out, root string
	var sizes []int
	cmd := &cobra.Command{
		Use:   "slurm-yaml",
		Short: "Write Slurm's topology.yaml: the tree and the NVLink block topology",
		Long: `slurm-yaml writes topology.yaml (Slurm 25.05 and newer), which names several
topologies: the tree of slurm-tree and the blocks of slurm-block, whichever the
fleet has; the block topology is the cluster default where there is one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nodes, err := f.read(cmd)
			if err != nil {
				return err
			}
			sw, w1, err := fleet.Tree(nodes, fleet.TreeOptions{Root: root})
			warn(cmd, w1)
			if err != nil {
				return fmt.Errorf("slurm-yaml: %w", err)
			}
			blocks, bs, w2, err := fleet.Blocks(nodes, fleet.BlockOptions{Sizes: sizes})
			warn(cmd, w2)
			if err != nil {
				return fmt.Errorf("slurm-yaml: %w", err)
			}
			if len(sw) == 0 && len(blocks) == 0 {
				return errors.New("slurm-yaml: no node has network tiers or an NVLink clique: nothing to write")
			}
			var buf bytes.Buffer
			if err := fleet.WriteTopologyYAML(&buf, sw, blocks, bs); err != nil {
				return err
			}
			return writeOut(cmd, out, buf.Bytes())
		},
	}
	outputFileFlag(cmd, &out, "write to FILE (atomically) instead of stdout")
	cmd.Flags().StringVar(&root, "root", "", "name of a switch over every top-level switch of the tree (\"\": none)")
	cmd.Flags().IntSliceVar(&sizes, "block-sizes", nil, "block_sizes (default: inferred from the blocks, docs/fleet.md)")
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
patch on nodes; docs/fleet.md). The scheme owns its keys: --apply also deletes
those a node no longer has (-o json lists them as "remove"); the kubectl
commands only set labels.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := fleet.ParseScheme(scheme)
			if err != nil {
				return fmt.Errorf("--scheme: %w", err)
			}
			if format != "kubectl" && format != "json" {
				return fmt.Errorf("-o %q: want kubectl or json", format)
			}
			nodes, err := f.read(cmd)
			if err != nil {
				return err
			}
			if apply {
				return applyLabels(cmd, nodes, s)
			}
			var buf bytes.Buffer
			var warnings []string
			if format == "json" {
				warnings, err = fleet.WriteJSON(&buf, nodes, s)
			} else {
				warnings, err = fleet.WriteKubectl(&buf, nodes, s)
			}
			warn(cmd, warnings)
			if err != nil {
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

// applyLabels patches every node's labels through the in-cluster API; a
// node it cannot patch is a warning, and the command fails when any was.
func applyLabels(cmd *cobra.Command, nodes []fleet.Node, s fleet.Scheme) error {
	c, err := kube.InCluster()
	if err != nil {
		return fmt.Errorf("labels --apply: %w", err)
	}
	patches, warnings, err := fleet.Patches(nodes, s)
	warn(cmd, warnings)
	if err != nil {
		return fmt.Errorf("labels --apply: %w", err)
	}
	failed := 0
	for _, p := range patches {
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		err := c.PatchNode(ctx, p.Node, p.Body())
		cancel()
		if err != nil {
			failed++
			warn(cmd, []string{err.Error()})
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "labelled node %s: %d labels set, %d cleared\n", p.Node, len(p.Labels), len(p.Remove))
	}
	if failed > 0 {
		return fmt.Errorf("labels --apply: %d of %d nodes not labelled", failed, len(patches))
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
Exit status 1 when it finds any, or a group has no majority; 2 when the fleet
could not be read (Prometheus unreachable, no agent series).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("-o %q: want text or json", format)
			}
			nodes, err := f.read(cmd)
			if err != nil {
				return exitError{code: fleetExitCannotRead, err: err}
			}
			rep := fleet.Consistency(nodes)
			var buf bytes.Buffer
			if format == "json" {
				enc := json.NewEncoder(&buf)
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = rep.WriteText(&buf)
			}
			if err != nil {
				return err
			}
			if err := writeOut(cmd, out, buf.Bytes()); err != nil {
				return err
			}
			if !rep.OK() {
				return exitError{code: fleetExitDrift, err: errors.New("report: " + reportSummary(rep))}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output-file", "f", "", "write to FILE (atomically) instead of stdout")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "text or json")
	return cmd
}

// reportSummary is the one line report's failure says.
func reportSummary(r fleet.Report) string {
	var drifted, missing, nomaj []string
	for _, g := range r.Groups {
		for _, d := range g.Drifted {
			drifted = append(drifted, d.Node)
		}
		if g.NoMajority {
			nomaj = append(nomaj, g.Group)
		}
	}
	for _, c := range r.Cliques {
		if c.Missing > 0 {
			missing = append(missing, c.Clique)
		}
	}
	var parts []string
	if len(drifted) > 0 {
		parts = append(parts, "drifted: "+strings.Join(drifted, ", "))
	}
	if len(missing) > 0 {
		parts = append(parts, "cliques missing members: "+strings.Join(missing, ", "))
	}
	if len(nomaj) > 0 {
		parts = append(parts, "no majority in: "+strings.Join(nomaj, ", "))
	}
	return strings.Join(parts, "; ")
}
