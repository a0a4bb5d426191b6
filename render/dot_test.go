package render

import (
	"bytes"
	"context"
	"html"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// svgOf pipes DOT's output for the fixture through Graphviz's `dot -Tsvg`,
// which rejects any syntax error, and returns the SVG.
func svgOf(t *testing.T, dotText []byte) string {
	t.Helper()
	path, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz `dot` not installed (apt-get install graphviz): cannot check DOT syntax")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-Tsvg")
	cmd.Stdin = bytes.NewReader(dotText)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("dot -Tsvg: %v\n%s\ninput:\n%s", err, stderr.String(), dotText)
	}
	if stderr.Len() > 0 {
		t.Errorf("dot -Tsvg warned: %s", stderr.String())
	}
	return stdout.String()
}

var (
	svgText = regexp.MustCompile(`<text[^>]*>([^<]*)</text>`)
	svgNode = regexp.MustCompile(`<g id="node\d+" class="node">`)
)

// texts returns the label lines Graphviz drew, unescaped.
func texts(svg string) []string {
	var out []string
	for _, m := range svgText.FindAllStringSubmatch(svg, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

// TestDOTSyntax renders every fixture through Graphviz.
func TestDOTSyntax(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := DOT(&buf, fx.node()); err != nil {
				t.Fatal(err)
			}
			svgOf(t, buf.Bytes())
		})
	}
}

// TestDOTSwitchPicture checks what the switch machine's picture holds: the
// PCI path to each GPU, NIC and NVMe drive with each switch as one box,
// and nothing else of the PCI tree.
func TestDOTSwitchPicture(t *testing.T) {
	var buf bytes.Buffer
	if err := DOT(&buf, switchNode()); err != nil {
		t.Fatal(err)
	}
	svg := svgOf(t, buf.Bytes())
	// 2 host bridges, 3 root ports (one above the NVMe drive), 2 switches,
	// 2 GPUs, 2 NICs, 1 NVMe drive, 1 NVSwitch.
	if got := len(svgNode.FindAllString(svg, -1)); got != 13 {
		t.Errorf("drew %d nodes, want 13", got)
	}
	all := strings.Join(texts(svg), "\n")
	for _, absent := range []string{
		"0000:15:00.0", // the host bridge's own function
		"0000:17:00.0", // a downstream port, folded into its switch
	} {
		if strings.Contains(all, absent) {
			t.Errorf("picture shows %s, which is on no GPU, NIC or NVMe path (or is a switch port)", absent)
		}
	}
	for _, present := range []string{"PCIe switch", "0000:16:00.0", "0000:98:00.0", "NVSwitch fabric", "PIX",
		"0000:15:02.0", "nvme0", "0000:1a:00.0"} { // the NVMe drive below its root port
		if !strings.Contains(all, present) {
			t.Errorf("picture lacks %q", present)
		}
	}
}

// TestDOTHostileNames checks that hostile names reach the drawing
// unchanged: escaped for DOT, unescaped again by Graphviz.
func TestDOTHostileNames(t *testing.T) {
	var buf bytes.Buffer
	if err := DOT(&buf, hostileNode()); err != nil {
		t.Fatal(err)
	}
	drawn := map[string]bool{}
	for _, s := range texts(svgOf(t, buf.Bytes())) {
		drawn[s] = true
	}
	for _, want := range []string{
		`host"; rankdir=LR; x="\ box\n}`, // hostname, and a product name with a newline
		`NVIDIA "H100" {x} <b>&amp; \`,
		`NIC0 eth"0;} (a b<c>)`,
		`NIC1 a b<c> (x\, tab\there)`,
		"NIC2 end (#1|-->, `md`)",
		`host bridge`,
		`pci"0000:}`,
	} {
		if !drawn[want] {
			t.Errorf("no label line %q in the SVG; drawn: %q", want, keys(drawn))
		}
	}
}

func keys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
