package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Mermaid writes the picture DOT draws as a Mermaid `flowchart TB`: one
// subgraph per NUMA node, the PCI path to each GPU, NIC and NVMe
// controller (a cylinder; storage NICs in their own class), pairs as thick
// links (`==>`, dotted `-.->` where undecided) coloured with linkStyle,
// and NVLinks. Node ids are sanitized to [A-Za-z0-9_] and made unique;
// labels are quoted with Mermaid's entity codes (#quot; and friends), so a
// name cannot break the syntax. Mermaid does no I/O but writing to w.
func Mermaid(w io.Writer, n topology.Node) error {
	g := buildGraph(n)
	ids := newMermaidIDs()
	ew := &errWriter{w: w}
	ew.line("---")
	// YAML front matter: a double-quoted scalar, which Go's quoting fits.
	ew.line("title: " + strconv.Quote(printable(g.title)))
	ew.line("---")
	ew.line("flowchart TB")
	classes := map[string][]string{}
	node := func(indent string, gn gnode) {
		id := ids.of(gn.key)
		ew.printf("%s%s%s\n", indent, id, mermaidShape(gn.kind, mermaidLabel(gn.lines)))
		if c := mermaidClass(gn); c != "" {
			classes[c] = append(classes[c], id)
		}
	}
	for _, c := range g.clusters {
		ew.printf("  subgraph %s[%s]\n", ids.of("cluster:"+c.key), mermaidLabel(c.lines))
		for _, gn := range c.nodes {
			node("    ", gn)
		}
		ew.line("  end")
	}
	for _, gn := range g.loose {
		node("  ", gn)
	}
	styles := map[edgeKind][]string{}
	for i, e := range g.edges {
		from, to := ids.of(e.from), ids.of(e.to)
		switch e.kind {
		case edgePair:
			ew.printf("  %s ==>|%s| %s\n", from, mermaidLabel([]string{e.label}), to)
		case edgeUndecided:
			ew.printf("  %s -.->|%s| %s\n", from, mermaidLabel([]string{e.label}), to)
		case edgeNVLink:
			ew.printf("  %s ---|%s| %s\n", from, mermaidLabel([]string{e.label}), to)
		default:
			ew.printf("  %s --> %s\n", from, to)
		}
		styles[e.kind] = append(styles[e.kind], strconv.Itoa(i))
	}
	for _, s := range []struct {
		kind  edgeKind
		style string
	}{
		{edgePair, "stroke:#d62728,stroke-width:3px,color:#d62728"},
		{edgeUndecided, "stroke:#ff7f0e,stroke-width:3px,color:#ff7f0e"},
		{edgeNVLink, "stroke:#76b900,stroke-width:2px"},
	} {
		if idx := styles[s.kind]; len(idx) > 0 {
			ew.printf("  linkStyle %s %s\n", strings.Join(idx, ","), s.style)
		}
	}
	for _, c := range []struct{ name, def string }{
		{"hostbridge", "fill:#e8e8e8,stroke:#555555"},
		{"pcieswitch", "fill:#dbe9f6,stroke:#555555"},
		{"gpu", "fill:#c9e6a6,stroke:#333333,stroke-width:2px"},
		{"nic", "fill:#fde2b8,stroke:#333333,stroke-width:2px"},
		{"storagenic", "fill:#d9c7ee,stroke:#333333,stroke-width:2px"},
		{"nvme", "fill:#e6dcf3,stroke:#555555"},
		{"empty", "fill:none,stroke:none,color:#888888"},
	} {
		if members := classes[c.name]; len(members) > 0 {
			ew.printf("  classDef %s %s\n", c.name, c.def)
			ew.printf("  class %s %s\n", strings.Join(members, ","), c.name)
		}
	}
	if ew.err != nil {
		return fmt.Errorf("render mermaid: %w", ew.err)
	}
	return nil
}

func mermaidShape(k nodeKind, label string) string {
	switch k {
	case kindNVSwitch:
		return "{{" + label + "}}"
	case kindHostBridge:
		return "[[" + label + "]]"
	case kindNVMe:
		return "[(" + label + ")]"
	}
	return "[" + label + "]"
}

func mermaidClass(n gnode) string {
	switch n.kind {
	case kindHostBridge:
		return "hostbridge"
	case kindSwitch:
		return "pcieswitch"
	case kindGPU, kindNVSwitch:
		return "gpu"
	case kindNIC:
		if n.storage {
			return "storagenic"
		}
		return "nic"
	case kindNVMe:
		return "nvme"
	case kindEmpty:
		return "empty"
	}
	return ""
}

// mermaidLabel quotes lines as one label, joined by <br>.
func mermaidLabel(lines []string) string {
	esc := make([]string, len(lines))
	for i, l := range lines {
		esc[i] = mermaidText(l)
	}
	return `"` + strings.Join(esc, "<br>") + `"`
}

// mermaidText writes s with Mermaid's entity codes for every character
// that could end a quoted label, open an HTML tag or an entity, or start a
// Markdown string, and with control characters as visible escapes.
func mermaidText(s string) string { return mermaidReplacer.Replace(printable(s)) }

var mermaidReplacer = strings.NewReplacer(
	`#`, `#35;`,
	`"`, `#quot;`,
	`&`, `#amp;`,
	`<`, `#lt;`,
	`>`, `#gt;`,
	"`", `#96;`,
	`|`, `#124;`,
)

// mermaidIDs maps graph keys to Mermaid node ids: [A-Za-z0-9_] only,
// unique, and stable for a given Node because keys are asked for in the
// graph's deterministic order.
type mermaidIDs struct {
	byKey map[string]string
	used  map[string]bool
}

func newMermaidIDs() *mermaidIDs {
	return &mermaidIDs{byKey: map[string]string{}, used: map[string]bool{}}
}

func (m *mermaidIDs) of(key string) string {
	if id, ok := m.byKey[key]; ok {
		return id
	}
	var b strings.Builder
	for _, r := range key {
		if r < 0x80 && (r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	base := b.String()
	id := base
	for i := 2; m.used[id]; i++ {
		id = base + "_" + strconv.Itoa(i)
	}
	m.used[id] = true
	m.byKey[key] = id
	return id
}
