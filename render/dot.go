package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// DOT writes n as a Graphviz digraph: one cluster per NUMA node (labelled
// with its CPUs and memory), the host bridges in it, the root ports and
// PCIe switches on the way to each GPU, NIC and PCIe NVMe controller,
// the GPUs, NICs (storage NICs in their own colour) and NVMe drives
// (cylinders) as leaves, each GPU→NIC pair as a bold coloured edge labelled with its
// class (dashed where the pair is undecided), and NVLinks (the NVSwitch
// fabric as one node). Only PCI functions on a path from a host bridge to
// a GPU, NIC or NVMe controller appear. Every ID and label is a quoted, escaped DOT string.
// The output is deterministic; DOT does no I/O but writing to w.
func DOT(w io.Writer, n topology.Node) error {
	g := buildGraph(n)
	ew := &errWriter{w: w}
	ew.line("digraph gpuaffinity {")
	ew.printf("  graph [label=%s, labelloc=t, fontname=\"Helvetica\", rankdir=TB, newrank=true];\n", dotLabel([]string{g.title}))
	ew.line(`  node [fontname="Helvetica", fontsize=10, shape=box, style="rounded,filled", fillcolor="#ffffff"];`)
	ew.line(`  edge [fontname="Helvetica", fontsize=9, arrowhead=none];`)
	for _, c := range g.clusters {
		ew.line("")
		ew.printf("  subgraph %s {\n", dotID("cluster_"+c.key))
		ew.printf("    label=%s;\n", dotLabel(c.lines))
		ew.line(`    style="rounded,dashed"; color="#888888";`)
		for _, node := range c.nodes {
			ew.printf("    %s [label=%s%s];\n", dotID(node.key), dotLabel(node.lines), dotNodeStyle(node))
		}
		ew.line("  }")
	}
	if len(g.loose) > 0 {
		ew.line("")
	}
	for _, node := range g.loose {
		ew.printf("  %s [label=%s%s];\n", dotID(node.key), dotLabel(node.lines), dotNodeStyle(node))
	}
	if len(g.edges) > 0 {
		ew.line("")
	}
	for _, e := range g.edges {
		ew.printf("  %s -> %s%s;\n", dotID(e.from), dotID(e.to), dotEdgeStyle(e))
	}
	ew.line("}")
	if ew.err != nil {
		return fmt.Errorf("render dot: %w", ew.err)
	}
	return nil
}

func dotNodeStyle(n gnode) string {
	switch n.kind {
	case kindHostBridge:
		return `, shape=box, style="filled", fillcolor="#e8e8e8"`
	case kindSwitch:
		return `, fillcolor="#dbe9f6"`
	case kindGPU:
		return `, fillcolor="#c9e6a6", penwidth=1.5`
	case kindNIC:
		if n.storage {
			return `, fillcolor="#d9c7ee", penwidth=1.5`
		}
		return `, fillcolor="#fde2b8", penwidth=1.5`
	case kindNVMe:
		return `, shape=cylinder, style="filled", fillcolor="#e6dcf3"`
	case kindNVSwitch:
		return `, shape=hexagon, style="filled", fillcolor="#c9e6a6"`
	case kindEmpty:
		return `, shape=plaintext, style="", fontcolor="#888888"`
	}
	return ""
}

func dotEdgeStyle(e gedge) string {
	switch e.kind {
	case edgePair:
		return fmt.Sprintf(` [xlabel=%s, color="#d62728", fontcolor="#d62728", penwidth=3, style=bold, arrowhead=normal, constraint=false]`, dotLabel([]string{e.label}))
	case edgeUndecided:
		return fmt.Sprintf(` [xlabel=%s, color="#ff7f0e", fontcolor="#ff7f0e", penwidth=3, style="bold,dashed", arrowhead=normal, constraint=false]`, dotLabel([]string{e.label}))
	case edgeNVLink:
		return fmt.Sprintf(` [xlabel=%s, color="#76b900", fontcolor="#4a7300", penwidth=2, constraint=false]`, dotLabel([]string{e.label}))
	}
	return ""
}

// dotID quotes s as a DOT ID.
func dotID(s string) string { return `"` + dotEscape(s) + `"` }

// dotLabel quotes lines as one DOT label, one line each. Backslashes in
// the text are doubled so that Graphviz's label escapes (\n, \l, \N, \G)
// cannot be smuggled in by a name.
func dotLabel(lines []string) string {
	esc := make([]string, len(lines))
	for i, l := range lines {
		esc[i] = dotEscape(l)
	}
	return `"` + strings.Join(esc, `\n`) + `"`
}

// dotEscape makes s safe inside a DOT quoted string: `\` and `"` are
// escaped, `&` is written as an entity (Graphviz decodes entities in every
// label), and control characters and invalid UTF-8 are written out as
// visible escapes, so no name can end the string, continue a line or
// confuse Graphviz's UTF-8 reader.
func dotEscape(s string) string {
	return dotReplacer.Replace(printable(s))
}

var dotReplacer = strings.NewReplacer(`\`, `\\`, `"`, `\"`, `&`, `&amp;`)
