package slurmconf_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
)

// long is a 65-character name, one over topology.conf(5)'s 64.
var long = strings.Repeat("s", 65)

// TestParseTreeRejects: hand-written topology.conf files for
// topology/tree, good ones accepted, broken ones refused; want, where
// set, is a part of the error.
func TestParseTreeRejects(t *testing.T) {
	tests := []struct {
		name, text string
		ok         bool
		want       string
	}{
		{"good, keys any case, comments", "# a comment\nswitchname=leaf1 nodes=n[1-2] LinkSpeed=100 # trailing\n\nSWITCHNAME=leaf2 NODES=n3\nSwitchName=top Switches=leaf[1-2]\n", true, ""},
		{"64-character switch", "SwitchName=" + strings.Repeat("s", 64) + " Nodes=n1\n", true, ""},
		{"parent before child", "SwitchName=top Switches=l\nSwitchName=l Nodes=n1\n", true, ""},
		{"two roots", "SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2\n", true, ""},
		{"CRLF lines", "SwitchName=a Nodes=n1\r\nSwitchName=top Switches=a\r\n", true, ""},
		{"65-character switch", "SwitchName=" + long + " Nodes=n1\n", false, "65 characters, over 64"},
		{"65-character child", "SwitchName=top Switches=" + long + "\nSwitchName=" + long + " Nodes=n1\n", false, "over 64"},
		{"switch twice", "SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", false, `line 2: switch "a" defined twice (first on line 1)`},
		{"missing child", "SwitchName=a Nodes=n1\nSwitchName=top Switches=a,b\n", false, `child "b" is not defined`},
		{"cycle", "SwitchName=l Nodes=n1\nSwitchName=a Switches=b,l\nSwitchName=b Switches=a\n", false, "cycle"},
		{"own child", "SwitchName=l Nodes=n1\nSwitchName=a Switches=a,l\n", false, "cycle"},
		{"node under two leaves", "SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n2\n", false, `line 2: switch "b": node "n2" is also under switch "a" (line 1)`},
		{"node twice in a leaf", "SwitchName=a Nodes=n[1-2],n2\n", false, `node "n2" listed twice`},
		{"switch under two parents", "SwitchName=l Nodes=n1\nSwitchName=a Switches=l\nSwitchName=b Switches=l\n", false, `child "l" is also under switch "a" (line 2)`},
		{"child twice", "SwitchName=l Nodes=n1\nSwitchName=a Switches=l,l\n", false, `child "l" listed twice`},
		{"unknown key", "SwitchName=a Nodes=n1 Foo=bar\n", false, `unknown parameter "Foo"`},
		{"block key in a tree", "SwitchName=a Nodes=n1\nBlockSizes=1\n", false, "line 2"},
		{"no SwitchName", "Nodes=n1\n", false, "not SwitchName"},
		{"SwitchName not first", "Nodes=n1 SwitchName=a\n", false, "line 1: the line starts with Nodes, not SwitchName"},
		{"key twice", "SwitchName=a Nodes=n1 nodes=n2\n", false, "Nodes twice"},
		{"neither nodes nor switches", "SwitchName=a\n", false, "exactly one of Nodes and Switches"},
		{"both nodes and switches", "SwitchName=l Nodes=n1\nSwitchName=a Nodes=n2 Switches=l\n", false, "exactly one of Nodes and Switches"},
		{"not key=value", "SwitchName=a Nodes=n1 extra\n", false, `"extra" is not key=value`},
		{"empty value", "SwitchName=a Nodes=\n", false, "not key=value"},
		{"bad hostlist", "SwitchName=a Nodes=n[1-\n", false, "unclosed"},
		{"node name with '='", "SwitchName=a Nodes=n=1\n", false, "not allowed"},
		{"LinkSpeed not a number", "SwitchName=a Nodes=n1 LinkSpeed=fast\n", false, "LinkSpeed"},
		{"empty", "# nothing\n", false, "no SwitchName lines"},
		{"nothing at all", "", false, "no SwitchName lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := slurmconf.ParseTree([]byte(tt.text))
			checkErr(t, "ParseTree", err, tt.ok, tt.want)
		})
	}
}

// TestParseBlocksRejects: hand-written topology.conf files for
// topology/block.
func TestParseBlocksRejects(t *testing.T) {
	tests := []struct {
		name, text string
		ok         bool
		want       string
	}{
		{"good", "# c\nBlockName=b1 Nodes=n[01-04]\nblockname=b2 nodes=n[05-08]\nBlockSizes=4,8\n", true, ""},
		{"good, no BlockSizes", "BlockName=b1 Nodes=n[1-3]\n", true, ""},
		{"sizes 3,12", "BlockName=b1 Nodes=n[1-3]\nBlockSizes=3,12\n", true, ""},
		{"comment after BlockSizes", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4\n# end\n", true, ""},
		{"node in two blocks", "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[4-7]\nBlockSizes=4\n", false, `line 2: block "b2": node "n4" is also in block "b1" (line 1)`},
		{"node twice in a block", "BlockName=b1 Nodes=n[1-4],n1\n", false, `node "n1" listed twice`},
		{"BlockSizes 4,12", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,12\n", false, "line 2: BlockSizes [4 12]: 12 is not a power of two times 4"},
		{"BlockSizes 4,4", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,4\n", false, "power of two"},
		{"BlockSizes 8,4", "BlockName=b1 Nodes=n[1-8]\nBlockSizes=8,4\n", false, "power of two"},
		{"BlockSizes 0", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=0\n", false, "under 1"},
		{"BlockSizes not a number", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,x\n", false, `"x" is not a number`},
		{"BlockSizes signed", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=+4\n", false, "not a number"},
		{"block under base size", "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-7]\nBlockSizes=4\n", false, `line 2: block "b2": 3 nodes, under the base block size 4`},
		{"BlockSizes not last", "BlockSizes=4\nBlockName=b1 Nodes=n[1-4]\n", false, "line 1: BlockSizes is not the last setting (line 2 follows)"},
		{"BlockSizes twice", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4\nBlockSizes=4\n", false, "not the last"},
		{"BlockSizes with a block", "BlockName=b1 Nodes=n[1-4] BlockSizes=4\n", false, "shares its line"},
		{"block twice", "BlockName=b1 Nodes=n[1-4]\nBlockName=b1 Nodes=n[5-8]\n", false, `line 2: block "b1" defined twice (first on line 1)`},
		{"65-character block", "BlockName=" + strings.Repeat("b", 65) + " Nodes=n1\n", false, "over 64"},
		{"block without nodes", "BlockName=b1\n", false, "no Nodes"},
		{"switch key in blocks", "SwitchName=a Nodes=n1\n", false, "unknown parameter"},
		{"Nodes first", "Nodes=n1 BlockName=b1\n", false, "not BlockName"},
		{"only BlockSizes", "BlockSizes=4\n", false, "no BlockName lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := slurmconf.ParseBlocks([]byte(tt.text))
			checkErr(t, "ParseBlocks", err, tt.ok, tt.want)
		})
	}
}

// checkErr fails t unless err is nil where ok, or an error holding want.
func checkErr(t *testing.T, fn string, err error, ok bool, want string) {
	t.Helper()
	switch {
	case ok && err != nil:
		t.Errorf("%s: %v, want no error", fn, err)
	case !ok && err == nil:
		t.Errorf("%s: no error, want one", fn)
	case !ok && !strings.Contains(err.Error(), want):
		t.Errorf("%s: %v, want an error with %q", fn, err, want)
	}
}

// TestParseTree: the whole value, comments and lines included. Only the
// comment line directly above a switch is its Comment: a blank line in
// between, or a setting line, breaks it.
func TestParseTree(t *testing.T) {
	text := `# Slurm topology.conf for TopologyPlugin=topology/tree, written by gpuaffinity fleet slurm-tree

# xa1b2c3d4: ocid1.localblock.oc1..aaaa
SwitchName=xa1b2c3d4 Nodes=bm[1-2]
#   leaf-2: second leaf   
# leaf-2: the nearer line wins
switchname=leaf-2 nodes=gb-t[08-10],solo
# stranded comment

SwitchName=top Switches=xa1b2c3d4,leaf-2 LinkSpeed=400 # trailing, no comment
SwitchName=root Switches=top
`
	got, err := slurmconf.ParseTree([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := slurmconf.Tree{Switches: []slurmconf.Switch{
		{Name: "xa1b2c3d4", Comment: "xa1b2c3d4: ocid1.localblock.oc1..aaaa", Nodes: []string{"bm1", "bm2"}, Line: 4},
		{Name: "leaf-2", Comment: "leaf-2: the nearer line wins", Nodes: []string{"gb-t08", "gb-t09", "gb-t10", "solo"}, Line: 7},
		{Name: "top", Switches: []string{"xa1b2c3d4", "leaf-2"}, Line: 10},
		{Name: "root", Switches: []string{"top"}, Line: 11},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseTree (-want +got):\n%s", d)
	}

	// The file's first comment is the first switch's where nothing
	// comes between.
	got, err = slurmconf.ParseTree([]byte("# header\nSwitchName=a Nodes=n1\n"))
	if err != nil || got.Switches[0].Comment != "header" {
		t.Errorf("ParseTree = %+v, %v; want Comment \"header\"", got, err)
	}
}

// TestParseBlocks: the whole value, comments and lines included.
func TestParseBlocks(t *testing.T) {
	text := `# Slurm topology.conf for TopologyPlugin=topology/block, written by gpuaffinity fleet slurm-block
# b1: NVLink domain, 9f1e4a2c-0000-4000-8000-000000000001.1
BlockName=b1 Nodes=gb200-r1-t[01-04]

# b2: NVLink domain, "caf\u00e9"
BlockName=b2 Nodes=gb200-r2-t[01-04],gb200-r2-t[05-08]
BlockSizes=4,8
`
	got, err := slurmconf.ParseBlocks([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := slurmconf.Blocks{
		Blocks: []slurmconf.Block{
			{Name: "b1", Comment: "b1: NVLink domain, 9f1e4a2c-0000-4000-8000-000000000001.1", Nodes: []string{"gb200-r1-t01", "gb200-r1-t02", "gb200-r1-t03", "gb200-r1-t04"}, Line: 3},
			{Name: "b2", Comment: `b2: NVLink domain, "caf\u00e9"`, Nodes: []string{"gb200-r2-t01", "gb200-r2-t02", "gb200-r2-t03", "gb200-r2-t04", "gb200-r2-t05", "gb200-r2-t06", "gb200-r2-t07", "gb200-r2-t08"}, Line: 6},
		},
		Sizes: []int{4, 8},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseBlocks (-want +got):\n%s", d)
	}
	got, err = slurmconf.ParseBlocks([]byte("BlockName=b1 Nodes=n1\n"))
	if err != nil || got.Sizes != nil {
		t.Errorf("ParseBlocks without BlockSizes = %+v, %v; want nil Sizes", got, err)
	}
}

// TestErrorLines: errors name the file's line, counting blank and
// comment lines.
func TestErrorLines(t *testing.T) {
	tree := "# header\n\nSwitchName=L Nodes=n1\n# x\n\n# y\nSwitchName=L Nodes=n2\n"
	_, err := slurmconf.ParseTree([]byte(tree))
	if want := `topology.conf line 7: switch "L" defined twice (first on line 3)`; err == nil || err.Error() != want {
		t.Errorf("ParseTree = %v, want %q", err, want)
	}
	_, err = slurmconf.ParseTree([]byte("SwitchName=a Nodes=n1\n\n\nSwitchName=b Nodes=m[2-1]\n"))
	if err == nil || !strings.HasPrefix(err.Error(), `topology.conf line 4: switch "b": Nodes: hostlist "m[2-1]": range "2-1" runs backwards`) {
		t.Errorf("ParseTree = %v, want line 4's hostlist error", err)
	}
	_, err = slurmconf.ParseBlocks([]byte("# c\nBlockName=b1 Nodes=n[1-4]\n\nBlockName=b2 Nodes=n[5-6]\n\nBlockSizes=4\n"))
	if err == nil || !strings.HasPrefix(err.Error(), `topology.conf line 4: block "b2": 2 nodes`) {
		t.Errorf("ParseBlocks = %v, want line 4's block", err)
	}
}

// TestParseMaxNames: MaxNames bounds the names of a whole file, not one
// hostlist, and an expression past it fails before its names are made.
func TestParseMaxNames(t *testing.T) {
	for _, tt := range []struct{ name, text string }{
		{"one hostlist", "SwitchName=a Nodes=n[0-999999999]\n"},
		{"the file", "SwitchName=a Nodes=a[1-1000]\nSwitchName=b Nodes=b[1-3999001]\n"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := slurmconf.ParseTree([]byte(tt.text))
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "MaxNames (4000000)") {
			t.Errorf("%s: ParseTree = %v, want an error naming MaxNames", tt.name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: ParseTree allocated %d bytes before failing", tt.name, n)
		}
	}
	if _, err := slurmconf.ParseBlocks([]byte("BlockName=b Nodes=a[1-1000],b[1-3999001]\n")); err == nil || !strings.Contains(err.Error(), "MaxNames") {
		t.Errorf("ParseBlocks = %v, want an error naming MaxNames", err)
	}
}

// chain returns a topology.conf of n switches, each over the one before
// it, the leaf first (bottomUp) or last.
func chain(n int, bottomUp bool) []byte {
	lines := make([]string, n)
	lines[0] = "SwitchName=s0 Nodes=n[1-4]"
	for i := 1; i < n; i++ {
		lines[i] = fmt.Sprintf("SwitchName=s%d Switches=s%d", i, i-1)
	}
	if !bottomUp {
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			lines[i], lines[j] = lines[j], lines[i]
		}
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// TestDeepChain: a chain 5,000 switches deep, written leaves first, is a
// tree slurmctld resolves in one pass; written top down it needs a pass
// per level, and slurmctld stops after 21.
func TestDeepChain(t *testing.T) {
	got, err := slurmconf.ParseTree(chain(5000, true))
	if err != nil || len(got.Switches) != 5000 {
		t.Fatalf("ParseTree(5000 deep, leaf first) = %d switches, %v", len(got.Switches), err)
	}
	// 21 upper switches above the leaf, root first: 21 passes.
	if _, err := slurmconf.ParseTree(chain(22, false)); err != nil {
		t.Errorf("ParseTree(22 deep, root first) = %v, want 21 passes accepted", err)
	}
	_, err = slurmconf.ParseTree(chain(23, false))
	if want := `topology.conf line 1: switch "s22": slurmctld would need 22 passes`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("ParseTree(23 deep, root first) = %v, want %q", err, want)
	}
	// A cycle through 5,000 switches under a leaf's parent.
	var text strings.Builder
	text.Write(chain(5000, true))
	text.WriteString("SwitchName=c0 Switches=c4999\n")
	for i := 1; i < 5000; i++ {
		fmt.Fprintf(&text, "SwitchName=c%d Switches=c%d\n", i, i-1)
	}
	if _, err := slurmconf.ParseTree([]byte(text.String())); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("ParseTree(5000-switch cycle) = %v, want a cycle", err)
	}
}

// BenchmarkParseTreeChain shows ParseTree linear in a chain's depth: the
// time per switch stays flat from 5,000 to 50,000 switches.
func BenchmarkParseTreeChain(b *testing.B) {
	for _, n := range []int{5000, 50000} {
		data := chain(n, true)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := slurmconf.ParseTree(data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/switch")
		})
	}
}
