package render

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// mermaidLine is the grammar of every line Mermaid writes. Q is a quoted
// label; ids are [A-Za-z0-9_] only.
var mermaidLine = func() *regexp.Regexp {
	const (
		id = `[A-Za-z0-9_]+`
		q  = `"[^"]*"`
	)
	return regexp.MustCompile(`^(?:` + strings.Join([]string{
		`---`,
		`title: .*`, // checked with strconv.Unquote below
		`flowchart TB`,
		`  subgraph ` + id + `\[` + q + `\]`,
		`  end`,
		` +` + id + `(?:\[` + q + `\]|\[\[` + q + `\]\]|\{\{` + q + `\}\}|\[\(` + q + `\)\])`, // box, subroutine, hexagon, cylinder
		`  ` + id + ` --> ` + id,
		`  ` + id + ` (?:==>|-\.->|---)\|` + q + `\| ` + id,
		`  linkStyle [0-9]+(?:,[0-9]+)* [a-z:#0-9,-]+`,
		`  classDef [a-z]+ [a-z:#0-9,-]+`,
		`  class ` + id + `(?:,` + id + `)* [a-z]+`,
	}, "|") + `)$`)
}()

var (
	mermaidQuoted = regexp.MustCompile(`"([^"]*)"`)
	mermaidEntity = regexp.MustCompile(`#(?:[a-z]+|[0-9]+);`)
)

// TestMermaidSyntax checks every fixture's flowchart line by line against
// the grammar above, and every label for characters that would end it or
// be read as markup. (No Mermaid parser runs here: mermaid-cli needs a
// browser.)
func TestMermaidSyntax(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Mermaid(&buf, fx.node()); err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
				if !mermaidLine.MatchString(line) {
					t.Errorf("line %d does not parse: %q", i+1, line)
					continue
				}
				if title, ok := strings.CutPrefix(line, "title: "); ok {
					if _, err := strconv.Unquote(title); err != nil {
						t.Errorf("title %s is not a quoted string: %v", title, err)
					}
					continue
				}
				for _, m := range mermaidQuoted.FindAllStringSubmatch(line, -1) {
					label := strings.ReplaceAll(m[1], "<br>", "")
					if strings.ContainsAny(label, "<>`|&\t\n") {
						t.Errorf("line %d: label %q holds a raw markup character", i+1, m[1])
					}
					if rest := mermaidEntity.ReplaceAllString(label, ""); strings.Contains(rest, "#") {
						t.Errorf("line %d: label %q holds a # outside an entity", i+1, m[1])
					}
				}
			}
		})
	}
}

// TestMermaidIDs checks that ids that collide once sanitized stay apart.
func TestMermaidIDs(t *testing.T) {
	ids := newMermaidIDs()
	a, b, c := ids.of("nic:a b"), ids.of("nic:a_b"), ids.of("nic:a b")
	if a == b || a != c {
		t.Errorf("ids: %q %q %q; want the first two different, the first and last equal", a, b, c)
	}
	if got := ids.of(`hb:pci"0000:}`); got != "hb_pci_0000__" {
		t.Errorf("sanitized id = %q", got)
	}
}
