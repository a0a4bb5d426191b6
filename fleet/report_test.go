package fleet

import (
	"bytes"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/fleet/nodeview"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// reportNode is a node of group "SYS-821GE / NVIDIA H100" with the usual
// facts, edits applied (a "" value drops the fact), and digests made of
// its facts as the agent makes them: the firmware digest of the
// nic.*.firmware facts, the layout digest of the rest.
func reportNode(name string, edits ...Fact) Node {
	facts := map[string]string{
		"gpus":                "8",
		"gpu3.model":          "NVIDIA H100 80GB HBM3",
		"gpu3.nics":           "mlx5_3 PIX",
		"nic.mlx5_3.role":     "compute",
		"nic.mlx5_0.firmware": "28.39.1002",
		"nic.mlx5_3.firmware": "28.39.1002",
	}
	for _, e := range edits {
		if e.Value == "" {
			delete(facts, e.Key)
		} else {
			facts[e.Key] = e.Value
		}
	}
	n := Node{Name: name, Target: "gpu/" + name + ":9400", Model: "SYS-821GE", GPUModel: "NVIDIA H100"}
	var layout, firmware []Fact
	for k, v := range facts {
		f := Fact{Key: k, Value: v}
		if strings.HasPrefix(k, "nic.") && strings.HasSuffix(k, ".firmware") {
			firmware = append(firmware, f)
		} else {
			layout = append(layout, f)
		}
		n.Facts = append(n.Facts, f)
	}
	slices.SortFunc(n.Facts, func(a, b Fact) int { return strings.Compare(a.Key, b.Key) })
	n.Layout, n.Firmware = nodeview.Digest(layout), nodeview.Digest(firmware)
	return n
}

const h100 = "SYS-821GE / NVIDIA H100"

func TestConsistencyDrift(t *testing.T) {
	good := reportNode("n1")
	tests := []struct {
		name  string
		nodes []Node
		want  []Drift
	}{
		{
			name:  "all alike",
			nodes: []Node{reportNode("n1"), reportNode("n2"), reportNode("n3")},
			want:  []Drift{},
		},
		{
			name: "layout fact",
			nodes: []Node{reportNode("n4"), reportNode("n1"), reportNode("odd", Fact{Key: "gpu3.nics", Value: "mlx5_4 PIX"}),
				reportNode("n3"), reportNode("n2")},
			want: []Drift{{Node: "odd", Differences: []Difference{
				{Key: "gpu3.nics", Value: "mlx5_4 PIX", Majority: "mlx5_3 PIX", Count: 4, Of: 5},
			}}},
		},
		{
			name: "firmware only",
			nodes: []Node{reportNode("n1"), reportNode("n2"), reportNode("n3"), reportNode("n4"),
				reportNode("old-fw", Fact{Key: "nic.mlx5_0.firmware", Value: "28.37.1014"})},
			want: []Drift{{Node: "old-fw", Differences: []Difference{
				{Key: "nic.mlx5_0.firmware", Value: "28.37.1014", Majority: "28.39.1002", Count: 4, Of: 5},
			}}},
		},
		{
			name: "layout and firmware facts, a missing fact and an extra one, keys sorted",
			nodes: []Node{reportNode("n1"), reportNode("n2"), reportNode("n3"),
				reportNode("odd", Fact{Key: "nic.mlx5_3.firmware", Value: "28.40.1000"}, Fact{Key: "nic.mlx5_3.role", Value: ""}, Fact{Key: "gpu9.model", Value: "X"})},
			want: []Drift{{Node: "odd", Differences: []Difference{
				{Key: "gpu9.model", Value: "X", Majority: "", Count: 3, Of: 4},
				{Key: "nic.mlx5_3.firmware", Value: "28.40.1000", Majority: "28.39.1002", Count: 3, Of: 4},
				{Key: "nic.mlx5_3.role", Value: "", Majority: "compute", Count: 3, Of: 4},
			}}},
		},
		{
			name: "two drifted, sorted",
			nodes: []Node{reportNode("z-odd", Fact{Key: "gpus", Value: "7"}), reportNode("n1"), reportNode("n2"), reportNode("n3"),
				reportNode("a-odd", Fact{Key: "gpu3.model", Value: "NVIDIA H100 NVL"})},
			want: []Drift{
				{Node: "a-odd", Differences: []Difference{{Key: "gpu3.model", Value: "NVIDIA H100 NVL", Majority: "NVIDIA H100 80GB HBM3", Count: 4, Of: 5}}},
				{Node: "z-odd", Differences: []Difference{{Key: "gpus", Value: "7", Majority: "8", Count: 4, Of: 5}}},
			},
		},
		{
			// The digests differ but no itemized fact does: the digest is
			// the difference.
			name:  "digest without facts",
			nodes: []Node{good, good2(good, "n2"), good2(good, "n3"), func() Node { n := good2(good, "odd"); n.Layout = "feedface"; return n }()},
			want: []Drift{{Node: "odd", Differences: []Difference{
				{Key: KeyLayoutDigest, Value: "feedface", Majority: good.Layout, Count: 3, Of: 4},
			}}},
		},
		{
			name: "both digests without facts",
			nodes: []Node{good, good2(good, "n2"), good2(good, "n3"),
				func() Node { n := good2(good, "odd"); n.Layout, n.Firmware = "L", "F"; return n }()},
			want: []Drift{{Node: "odd", Differences: []Difference{
				{Key: KeyLayoutDigest, Value: "L", Majority: good.Layout, Count: 3, Of: 4},
				{Key: KeyFirmwareDigest, Value: "F", Majority: good.Firmware, Count: 3, Of: 4},
			}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Consistency(tt.nodes)
			if len(r.Groups) != 1 {
				t.Fatalf("Groups = %+v, want one", r.Groups)
			}
			g := r.Groups[0]
			if g.Group != h100 || g.NoMajority || g.Layout != good.Layout || g.Firmware != good.Firmware || g.Variants != nil {
				t.Errorf("group = %q, NoMajority %v, layout %q, firmware %q, variants %v; want %q, false, %q, %q, none",
					g.Group, g.NoMajority, g.Layout, g.Firmware, g.Variants, h100, good.Layout, good.Firmware)
			}
			var names []string
			for _, n := range tt.nodes {
				names = append(names, n.Name)
			}
			slices.Sort(names)
			if !slices.Equal(g.Nodes, names) {
				t.Errorf("group nodes = %q, want %q", g.Nodes, names)
			}
			if !reflect.DeepEqual(g.Drifted, tt.want) {
				t.Errorf("Drifted = %+v, want %+v", g.Drifted, tt.want)
			}
			if r.Nodes != len(tt.nodes) || len(r.Warnings) != 0 {
				t.Errorf("Nodes %d, warnings %q; want %d, none", r.Nodes, r.Warnings, len(tt.nodes))
			}
			if ok := r.OK(); ok != (len(tt.want) == 0) {
				t.Errorf("OK() = %v, want %v", ok, len(tt.want) == 0)
			}
		})
	}
}

// good2 is n renamed.
func good2(n Node, name string) Node {
	n.Name, n.Target = name, "gpu/"+name+":9400"
	return n
}

func TestConsistencyNoMajority(t *testing.T) {
	a := []Node{reportNode("d"), reportNode("a")}
	b := []Node{reportNode("c", Fact{Key: "gpus", Value: "4"}), reportNode("b", Fact{Key: "gpus", Value: "4"})}
	r := Consistency(append(a, b...))
	if len(r.Groups) != 1 {
		t.Fatalf("Groups = %+v, want one", r.Groups)
	}
	g := r.Groups[0]
	// Layout splits 2 against 2; every node's firmware is alike, so the
	// firmware has a majority.
	if !g.NoMajority || g.Layout != "" || g.Firmware != a[0].Firmware {
		t.Errorf("NoMajority %v, layout %q, firmware %q; want true, \"\", %q", g.NoMajority, g.Layout, g.Firmware, a[0].Firmware)
	}
	if len(g.Drifted) != 0 {
		t.Errorf("Drifted = %+v, want none", g.Drifted)
	}
	// Equal sizes: ordered by layout digest, then firmware.
	va := Variant{Layout: a[0].Layout, Firmware: a[0].Firmware, Nodes: []string{"a", "d"}}
	vb := Variant{Layout: b[0].Layout, Firmware: b[0].Firmware, Nodes: []string{"b", "c"}}
	want := []Variant{va, vb}
	if vb.Layout < va.Layout {
		want = []Variant{vb, va}
	}
	if !reflect.DeepEqual(g.Variants, want) {
		t.Errorf("Variants = %+v, want %+v", g.Variants, want)
	}
	if r.OK() {
		t.Error("OK() = true for a group without a majority")
	}

	// Three variants, most nodes first: 2, then 1 and 1 by digest.
	nodes := []Node{
		{Name: "s1", Model: "M", GPUModel: "G", Layout: "L2", Firmware: "F"},
		{Name: "s2", Model: "M", GPUModel: "G", Layout: "L1", Firmware: "F"},
		{Name: "s3", Model: "M", GPUModel: "G", Layout: "L3", Firmware: "F"},
		{Name: "s4", Model: "M", GPUModel: "G", Layout: "L3", Firmware: "F"},
	}
	g = Consistency(nodes).Groups[0]
	wantV := []Variant{
		{Layout: "L3", Firmware: "F", Nodes: []string{"s3", "s4"}},
		{Layout: "L1", Firmware: "F", Nodes: []string{"s2"}},
		{Layout: "L2", Firmware: "F", Nodes: []string{"s1"}},
	}
	if !g.NoMajority || !reflect.DeepEqual(g.Variants, wantV) || len(g.Drifted) != 0 {
		t.Errorf("NoMajority %v, Variants %+v, Drifted %+v; want true, %+v, none", g.NoMajority, g.Variants, g.Drifted, wantV)
	}
	// 3 of 5 is a majority: the two others drift.
	nodes = append(nodes, Node{Name: "s5", Model: "M", GPUModel: "G", Layout: "L3", Firmware: "F"})
	g = Consistency(nodes).Groups[0]
	if g.NoMajority || g.Layout != "L3" || len(g.Drifted) != 2 || g.Drifted[0].Node != "s1" || g.Drifted[1].Node != "s2" {
		t.Errorf("3 of 5: NoMajority %v, layout %q, Drifted %+v; want false, L3, s1 and s2", g.NoMajority, g.Layout, g.Drifted)
	}
}

func TestConsistencyGroups(t *testing.T) {
	b200 := func(name string) Node {
		n := reportNode(name, Fact{Key: "gpu3.model", Value: "NVIDIA B200"})
		n.Model, n.GPUModel = "SYS-A21GE", "NVIDIA B200"
		return n
	}
	// Two B200 nodes and three H100s: the B200s are the minority of the
	// fleet but a group of their own, so nothing drifts.
	r := Consistency([]Node{reportNode("h1"), b200("b1"), reportNode("h2"), b200("b2"), reportNode("h3")})
	if len(r.Groups) != 2 {
		t.Fatalf("Groups = %+v, want two", r.Groups)
	}
	want := []struct {
		group string
		nodes []string
	}{
		{"SYS-821GE / NVIDIA H100", []string{"h1", "h2", "h3"}},
		{"SYS-A21GE / NVIDIA B200", []string{"b1", "b2"}},
	}
	for i, w := range want {
		g := r.Groups[i]
		if g.Group != w.group || !slices.Equal(g.Nodes, w.nodes) || g.NoMajority || len(g.Drifted) != 0 {
			t.Errorf("group %d = %q %q, NoMajority %v, Drifted %+v; want %q %q, false, none", i, g.Group, g.Nodes, g.NoMajority, g.Drifted, w.group, w.nodes)
		}
	}
	if !r.OK() || len(r.Warnings) != 0 || r.Nodes != 5 {
		t.Errorf("OK %v, warnings %q, nodes %d; want true, none, 5", r.OK(), r.Warnings, r.Nodes)
	}

	// Same model, different GPU model: separate groups.
	other := reportNode("x1")
	other.GPUModel = "NVIDIA H200"
	r = Consistency([]Node{reportNode("h1"), reportNode("h2"), other})
	if len(r.Groups) != 2 || r.Groups[0].Group != h100 || r.Groups[1].Group != "SYS-821GE / NVIDIA H200" {
		t.Errorf("Groups = %+v, want %q and the H200 group", r.Groups, h100)
	}
}

func TestConsistencyWarnings(t *testing.T) {
	bare := Node{Name: "no-agent", Target: "gpu/no-agent:9400", Model: "SYS-821GE", GPUModel: "NVIDIA H100"}
	dup := good2(reportNode("n1", Fact{Key: "gpus", Value: "4"}), "n1")
	dup.Target = "gpu/n1-b:9400"
	r := Consistency([]Node{reportNode("n1"), reportNode("n2"), bare, reportNode("n3"), dup})
	if len(r.Warnings) != 2 {
		t.Fatalf("Warnings = %q, want two", r.Warnings)
	}
	for i, subs := range [][]string{
		{`node "no-agent"`, h100, "no layout or firmware digest", "not compared"},
		{`node "n1"`, `"gpu/n1:9400"`, `"gpu/n1-b:9400"`},
	} {
		for _, sub := range subs {
			if !strings.Contains(r.Warnings[i], sub) {
				t.Errorf("warning %d %q does not contain %q", i, r.Warnings[i], sub)
			}
		}
	}
	if len(r.Groups) != 1 || slices.Contains(r.Groups[0].Nodes, "no-agent") {
		t.Errorf("Groups = %+v, want one without no-agent", r.Groups)
	}

	// Only the node without digests: no group, a warning, OK.
	r = Consistency([]Node{bare})
	if len(r.Groups) != 0 || len(r.Warnings) != 1 || !r.OK() {
		t.Errorf("Consistency(bare node) = %+v, want no group, one warning, OK", r)
	}
	// Nothing at all: empty, non-nil lists (they encode as [], not null).
	r = Consistency(nil)
	if r.Nodes != 0 || r.Groups == nil || r.Cliques == nil || r.Warnings == nil || len(r.Groups)+len(r.Cliques)+len(r.Warnings) != 0 || !r.OK() {
		t.Errorf("Consistency(nil) = %#v, want empty non-nil lists, OK", r)
	}
}

func TestConsistencyCliques(t *testing.T) {
	member := func(name, clique string, imex int) Node {
		n := reportNode(name)
		n.Clique, n.IMEXNodes = clique, imex
		return n
	}
	tests := []struct {
		name      string
		nodes     []Node
		want      []CliqueReport
		wantOK    bool
		wantWarns [][]string
	}{
		{
			name:   "complete",
			nodes:  []Node{member("b", "uuid.1", 2), member("a", "uuid.1", 2)},
			want:   []CliqueReport{{Clique: "uuid.1", Nodes: []string{"a", "b"}, IMEXNodes: 2, Missing: 0}},
			wantOK: true,
		},
		{
			name:   "one missing",
			nodes:  []Node{member("c", "uuid.1", 4), member("a", "uuid.1", 4), member("b", "uuid.1", 4)},
			want:   []CliqueReport{{Clique: "uuid.1", Nodes: []string{"a", "b", "c"}, IMEXNodes: 4, Missing: 1}},
			wantOK: false,
		},
		{
			name:   "no IMEX configuration",
			nodes:  []Node{member("a", "uuid.1", 0), member("b", "uuid.1", 0)},
			want:   []CliqueReport{{Clique: "uuid.1", Nodes: []string{"a", "b"}}},
			wantOK: true,
		},
		{
			name:      "members disagree: the most is taken",
			nodes:     []Node{member("a", "uuid.1", 4), member("b", "uuid.1", 2), member("c", "uuid.1", 0)},
			want:      []CliqueReport{{Clique: "uuid.1", Nodes: []string{"a", "b", "c"}, IMEXNodes: 4, Missing: 1}},
			wantOK:    false,
			wantWarns: [][]string{{`clique "uuid.1"`, "different node counts", `"a" 4`, `"b" 2`}},
		},
		{
			name:      "more members than IMEX lists",
			nodes:     []Node{member("a", "uuid.1", 2), member("b", "uuid.1", 2), member("c", "uuid.1", 2)},
			want:      []CliqueReport{{Clique: "uuid.1", Nodes: []string{"a", "b", "c"}, IMEXNodes: 2, Missing: 0}},
			wantOK:    true,
			wantWarns: [][]string{{`clique "uuid.1"`, "3 nodes", "2"}},
		},
		{
			name: "two cliques sorted, nodes without one left out",
			nodes: []Node{member("c", "uuid.9", 1), member("a", "uuid.1", 1), member("z", "", 0),
				func() Node { n := member("nd", "uuid.1", 2); n.Layout, n.Firmware = "", ""; return n }()},
			want: []CliqueReport{
				{Clique: "uuid.1", Nodes: []string{"a", "nd"}, IMEXNodes: 2},
				{Clique: "uuid.9", Nodes: []string{"c"}, IMEXNodes: 1},
			},
			wantOK: true,
			wantWarns: [][]string{
				{`node "nd"`, "not compared"},
				{`clique "uuid.1"`, "different node counts", `"a" 1`, `"nd" 2`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Consistency(tt.nodes)
			if !reflect.DeepEqual(r.Cliques, tt.want) {
				t.Errorf("Cliques = %+v, want %+v", r.Cliques, tt.want)
			}
			if r.OK() != tt.wantOK {
				t.Errorf("OK() = %v, want %v", r.OK(), tt.wantOK)
			}
			if len(r.Warnings) != len(tt.wantWarns) {
				t.Fatalf("Warnings = %q, want %d", r.Warnings, len(tt.wantWarns))
			}
			for i, subs := range tt.wantWarns {
				for _, sub := range subs {
					if !strings.Contains(r.Warnings[i], sub) {
						t.Errorf("warning %d %q does not contain %q", i, r.Warnings[i], sub)
					}
				}
			}
		})
	}
}

func TestReportWriteText(t *testing.T) {
	hostile := "evil\nOK: 0 drifted"
	r := Report{
		Nodes: 6,
		Groups: []GroupReport{
			{
				Group: "SYS-821GE / NVIDIA H100", Nodes: []string{"a", "b", hostile}, Layout: "1a2b", Firmware: "3c4d",
				Drifted: []Drift{{Node: hostile, Differences: []Difference{
					{Key: "gpu3.nics", Value: "mlx5_4 PIX", Majority: "mlx5_3 PIX", Count: 2, Of: 3},
					{Key: "nic.mlx5_0.firmware", Value: "", Majority: "28.39.1002", Count: 2, Of: 3},
				}}},
			},
			{
				Group: "SYS-A21GE / NVIDIA B200", Nodes: []string{"c", "d"}, NoMajority: true, Firmware: "3c4d",
				Variants: []Variant{
					{Layout: "5e6f", Firmware: "3c4d", Nodes: []string{"c"}},
					{Layout: "7a8b", Firmware: "3c4d", Nodes: []string{"d"}},
				},
				Drifted: []Drift{},
			},
		},
		Cliques: []CliqueReport{
			{Clique: "uuid.32766", Nodes: []string{"a", "b"}, IMEXNodes: 4, Missing: 2},
			{Clique: "uuid.1", Nodes: []string{"c", "x y"}},
		},
		Warnings: []string{`node "e": no digest`},
	}
	// Hand-derived from WriteText's doc comment: names and digests bare
	// where plain words ("x y" is not one: no spaces outside groups),
	// values always %q, the hostile name %q so "\n" stays two characters.
	want := `GROUP SYS-821GE / NVIDIA H100: 3 nodes, layout 1a2b, firmware 3c4d, 1 drifted
DRIFT "evil\nOK: 0 drifted" (SYS-821GE / NVIDIA H100, 1 of 3 nodes differ): gpu3.nics = "mlx5_4 PIX", majority "mlx5_3 PIX" (2 of 3)
DRIFT "evil\nOK: 0 drifted" (SYS-821GE / NVIDIA H100, 1 of 3 nodes differ): nic.mlx5_0.firmware = "", majority "28.39.1002" (2 of 3)
GROUP SYS-A21GE / NVIDIA B200: 2 nodes, no majority
NOMAJORITY SYS-A21GE / NVIDIA B200 (2 nodes): layout 5e6f, firmware 3c4d: c
NOMAJORITY SYS-A21GE / NVIDIA B200 (2 nodes): layout 7a8b, firmware 3c4d: d
CLIQUE uuid.32766: 2 nodes, IMEX lists 4, 2 missing: a b
CLIQUE uuid.1: 2 nodes, no IMEX configuration, 0 missing: c "x y"
WARNING node "e": no digest
FAIL: 6 nodes, 2 groups, 2 cliques; 1 drifted, 1 groups without a majority, 1 cliques missing nodes, 0 stale, 0 refused
`
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != want {
		t.Errorf("WriteText wrote\n%s\nwant\n%s", got, want)
	}

	// A consistent fleet.
	b.Reset()
	ok := Report{Nodes: 2, Groups: []GroupReport{{Group: "M / G", Nodes: []string{"a", "b"}, Layout: "L", Firmware: "F", Drifted: []Drift{}}}}
	if err := ok.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want = "GROUP M / G: 2 nodes, layout L, firmware F, 0 drifted\n" +
		"OK: 2 nodes, 1 groups, 0 cliques; 0 drifted, 0 groups without a majority, 0 cliques missing nodes, 0 stale, 0 refused\n"
	if got := b.String(); got != want {
		t.Errorf("WriteText(consistent) wrote\n%s\nwant\n%s", got, want)
	}

	if err := r.WriteText(failWriter{}); err == nil {
		t.Error("WriteText to a failing writer: no error")
	}
}

// TestReportWriteTextHostile puts hostile strings everywhere a node's agent or
// its scheduler can: every line must still start with its kind.
func TestReportWriteTextHostile(t *testing.T) {
	evil := []string{"a\nOK: fine", "b\rGROUP x", " lead", "trail ", "", "c\u2028d", "e\x00f", `"q"`}
	var nodes []Node
	for i, s := range evil {
		n := reportNode("n" + string(rune('a'+i)))
		nodes = append(nodes, n, good2(n, s))
		bad := good2(n, s+"-odd")
		bad.Model = s
		bad.Clique = s
		bad.IMEXNodes = 3
		bad.Facts = append(slices.Clone(bad.Facts), Fact{Key: s, Value: s})
		bad.Layout = s
		nodes = append(nodes, bad)
	}
	r := Consistency(nodes)
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("WriteText output does not end in a newline: %q", out)
	}
	kinds := []string{"GROUP ", "DRIFT ", "NOMAJORITY ", "CLIQUE ", "WARNING ", "OK: ", "FAIL: "}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, line := range lines {
		if !slices.ContainsFunc(kinds, func(k string) bool { return strings.HasPrefix(line, k) }) {
			t.Errorf("line %q starts with no kind", line)
		}
		if strings.ContainsAny(line, "\r\x00\u2028") {
			t.Errorf("line %q holds a raw control or line separator", line)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "FAIL: ") {
		t.Errorf("last line %q, want the FAIL verdict", last)
	}
	if got := strings.Count(out, "\nOK: ") + strings.Count(out, "\nFAIL: "); got != 1 {
		t.Errorf("%d verdict lines, want 1:\n%s", got, out)
	}
}

func TestReportWord(t *testing.T) {
	tests := []struct {
		in     string
		spaces bool
		want   string
	}{
		{"gpu-node-1.example", false, "gpu-node-1.example"},
		{"a/b+c@d_e", false, "a/b+c@d_e"},
		{"M / G", true, "M / G"},
		{"M / G", false, `"M / G"`},
		{" / ", true, `" / "`},
		{"", false, `""`},
		{"a\nb", false, `"a\nb"`},
		{"a:b", false, `"a:b"`},
		{"é", false, `"é"`},
	}
	for _, tt := range tests {
		if got := reportWord(tt.in, tt.spaces); got != tt.want {
			t.Errorf("reportWord(%q, %v) = %s, want %s", tt.in, tt.spaces, got, tt.want)
		}
	}
}

// onlyOnePerVariant strips the facts of every node but the first (by
// name) of each (layout, firmware) pair, as the fleet reader gives them.
func onlyOnePerVariant(nodes []Node) []Node {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	seen := map[[2]string]bool{}
	for i := range out {
		k := [2]string{out[i].Layout, out[i].Firmware}
		if seen[k] {
			out[i].Facts = nil
		}
		seen[k] = true
	}
	return out
}

// The report from one node's facts per variant is the report from every
// node's: nodes with the same digests have the same facts.
func TestConsistencyOneNodePerVariant(t *testing.T) {
	for _, nodes := range [][]Node{
		{reportNode("n4"), reportNode("n1"), reportNode("odd", Fact{Key: "gpu3.nics", Value: "mlx5_4 PIX"}), reportNode("odd2", Fact{Key: "gpu3.nics", Value: "mlx5_4 PIX"}),
			reportNode("n3"), reportNode("n2")},
		{reportNode("n1"), reportNode("n2"), reportNode("n3"),
			reportNode("odd", Fact{Key: "nic.mlx5_3.firmware", Value: "28.40.1000"}, Fact{Key: "nic.mlx5_3.role", Value: ""}, Fact{Key: "gpu9.model", Value: "X"})},
		{reportNode("a"), reportNode("b", Fact{Key: "gpus", Value: "7"}), reportNode("c", Fact{Key: "gpus", Value: "6"})},
	} {
		all, one := Consistency(nodes), Consistency(onlyOnePerVariant(nodes))
		if !reflect.DeepEqual(all, one) {
			t.Errorf("from one node per variant:\n%+v\nfrom all:\n%+v", one, all)
		}
	}
	// A variant none of whose nodes has facts differs by digest only.
	nodes := []Node{reportNode("n1"), reportNode("n2"), reportNode("n3"), reportNode("odd", Fact{Key: "gpus", Value: "7"})}
	nodes[3].Facts = nil
	g := Consistency(nodes).Groups[0]
	if len(g.Drifted) != 1 || g.Drifted[0].Differences[0].Key != KeyLayoutDigest {
		t.Errorf("drifted %+v, want odd by its layout digest", g.Drifted)
	}
}

// A stale node (not scraped now) is listed, not compared, and is still
// its clique's member; refused targets fail the report.
func TestConsistencyStaleAndRefused(t *testing.T) {
	a, b := reportNode("a"), reportNode("b", Fact{Key: "gpus", Value: "7"})
	b.Stale = true
	a.Clique, b.Clique = "u.1", "u.1"
	a.IMEXNodes, b.IMEXNodes = 2, 2
	r := Consistency([]Node{a, b})
	if !slices.Equal(r.Stale, []string{"b"}) || len(r.Groups) != 1 || !slices.Equal(r.Groups[0].Nodes, []string{"a"}) ||
		len(r.Cliques) != 1 || r.Cliques[0].Missing != 0 || !r.OK() {
		t.Errorf("report %+v: want b stale, a alone compared, the clique whole, OK", r)
	}
	r.Refused = []string{`target "a/x:1" (node "b"): its agent reports host name "c": refused`}
	if r.OK() || !strings.Contains(r.Summary(), "1 targets refused") {
		t.Errorf("a refused target: OK %v, summary %q", r.OK(), r.Summary())
	}
	var buf bytes.Buffer
	r.WriteText(&buf)
	for _, want := range []string{"STALE b: not scraped now", `REFUSED target "a/x:1" (node "b")`, "FAIL: 2 nodes", "1 stale, 1 refused"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report text lacks %q:\n%s", want, buf.String())
		}
	}
}

// benchFleet is n nodes of one group with 30 facts each, one per variant
// carrying facts as the fleet reader gives them, 2 % drifted (each its
// own variant) and, where extra > 0, one drifted node with extra more
// facts (a node that exports a flood of NICs).
func benchFleet(n, extra int) []Node {
	base := map[string]string{"gpus": "8"}
	for g := range 8 {
		base[nodeview.GPUKey(strconv.Itoa(g), "model")] = "NVIDIA H100 80GB HBM3"
		base[nodeview.GPUKey(strconv.Itoa(g), "nics")] = "mlx5_" + strconv.Itoa(g) + " PIX"
		base[nodeview.NICKey("mlx5_"+strconv.Itoa(g), "role")] = "compute"
		base[nodeview.NICKey("mlx5_"+strconv.Itoa(g), "firmware")] = "28.39.1002"
	}
	mk := func(name string, edit func(map[string]string), facts bool) Node {
		m := maps.Clone(base)
		edit(m)
		var fs []Fact
		for k, v := range m {
			fs = append(fs, Fact{Key: k, Value: v})
		}
		nd := Node{Name: name, Model: "M", GPUModel: "G", Layout: nodeview.Digest(fs), Firmware: "F"}
		if facts {
			nd.Facts = nodeview.SortFacts(fs)
		}
		return nd
	}
	nodes := make([]Node, 0, n)
	for i := range n {
		name := fmt.Sprintf("n%06d", i)
		switch {
		case i == 1 && extra > 0:
			nodes = append(nodes, mk(name, func(m map[string]string) {
				for j := range extra {
					m[nodeview.NICKey("flood"+strconv.Itoa(j), "role")] = "other"
				}
			}, true))
		case i%50 == 1:
			nodes = append(nodes, mk(name, func(m map[string]string) { m["gpu3.nics"] = "mlx5_" + strconv.Itoa(i) + " PIX" }, true))
		default:
			nodes = append(nodes, mk(name, func(map[string]string) {}, i == 0))
		}
	}
	return nodes
}

// Consistency is linear in the nodes and in a node's facts: ns/op over
// nodes is flat from 1,000 to 50,000 nodes, and 50,000 facts on one node
// cost no more than 50,000 facts anywhere.
func BenchmarkConsistency(b *testing.B) {
	for _, c := range []struct{ nodes, extra int }{{1000, 0}, {10000, 0}, {50000, 0}, {1000, 50000}} {
		nodes := benchFleet(c.nodes, c.extra)
		b.Run(fmt.Sprintf("nodes=%d/flood=%d", c.nodes, c.extra), func(b *testing.B) {
			for b.Loop() {
				Consistency(nodes)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.nodes+c.extra), "ns/node+fact")
		})
	}
}
