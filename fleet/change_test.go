package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
)

func TestParseThreshold(t *testing.T) {
	for _, tt := range []struct {
		in       string
		previous int
		allowed  int
		bad      bool
	}{
		{"1%", 50000, 500, false},
		{"1%", 99, 0, false}, // under 100 nodes, any drop needs --force
		{"5%", 11, 0, false},
		{"10%", 11, 1, false},
		{"12", 5, 12, false},
		{"0", 100, 0, false},
		{"100%", 7, 7, false},
		{"-1", 0, 0, true},
		{"101%", 0, 0, true},
		{"x%", 0, 0, true},
		{"", 0, 0, true},
	} {
		th, err := ParseThreshold(tt.in)
		if (err != nil) != tt.bad {
			t.Errorf("ParseThreshold(%q) error %v, want bad=%v", tt.in, err, tt.bad)
			continue
		}
		if !tt.bad && th.Allowed(tt.previous) != tt.allowed {
			t.Errorf("ParseThreshold(%q).Allowed(%d) = %d, want %d", tt.in, tt.previous, th.Allowed(tt.previous), tt.allowed)
		}
		if !tt.bad && th.String() != tt.in {
			t.Errorf("ParseThreshold(%q).String() = %q", tt.in, th.String())
		}
	}
}

func TestGuard(t *testing.T) {
	many := make([]string, 30)
	for i := range many {
		many[i] = fmt.Sprintf("n%02d", i)
	}
	g := Guard{MaxDrop: Threshold{Percent: 1}}
	if err := g.Check(Change{Previous: 0, Dropped: many}); err != nil {
		t.Errorf("no previous file: %v", err)
	}
	if err := g.Check(Change{Previous: 1000, Dropped: many[:10]}); err != nil {
		t.Errorf("10 of 1000 at 1%%: %v", err)
	}
	err := g.Check(Change{Previous: 1000, Dropped: many[:11]})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "it drops 11 of the previous file's 1000 nodes, more than --max-drop 1% allows (10): n00, n01") {
		t.Errorf("11 of 1000: %v", err)
	}
	err = g.Check(Change{Previous: 100000, Dropped: many})
	if err != nil {
		t.Errorf("30 of 100000: %v", err)
	}
	err = g.Check(Change{Previous: 10, Dropped: many})
	if err == nil || !strings.Contains(err.Error(), "n19 and 10 more") {
		t.Errorf("the list is clipped: %v", err)
	}
	err = g.Check(Change{Previous: 10, SizesBefore: []int{18, 36}, SizesAfter: []int{16, 32}})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "changes BlockSizes from 18,36 to 16,32") {
		t.Errorf("sizes: %v", err)
	}
	g.Force = true
	if err := g.Check(Change{Previous: 10, Dropped: many, SizesBefore: []int{1}, SizesAfter: []int{2}}); err != nil {
		t.Errorf("forced: %v", err)
	}
}

// A previous tree keeps its nodes' places: a node with no tiers now (its
// agent restarted before its metadata answered), or fewer, keeps the
// switches the file gave it, hashed IDs read back from the comments; a
// node the fleet no longer has is dropped; a node with other tiers
// moves; a refused name (Keep) keeps its switches.
func TestTreePrevious(t *testing.T) {
	nodes := []Node{
		{Name: "oci-1", Tiers: []string{ociLocalBlock, ociNetworkBlock, ociHPCIsland}},
		{Name: "oci-2"}, // empty now
		{Name: "r1-n1", Tiers: []string{"leaf-r1"}}, // partial: its first tier only
		{Name: "r1-n2", Tiers: []string{"leaf-r2", "spine"}},
		{Name: "r2-n1", Tiers: []string{"leaf-r2", "spine"}},
	}
	prevPlan, err := Tree([]Node{
		{Name: "oci-1", Tiers: []string{ociLocalBlock, ociNetworkBlock, ociHPCIsland}},
		{Name: "oci-2", Tiers: []string{ociLocalBlock, ociNetworkBlock, ociHPCIsland}},
		{Name: "r1-n1", Tiers: []string{"leaf-r1", "spine"}},
		{Name: "r1-n2", Tiers: []string{"leaf-r1", "spine"}},
		{Name: "r2-n1", Tiers: []string{"leaf-r2", "spine"}},
		{Name: "r2-n2", Tiers: []string{"leaf-r2", "spine"}},
		{Name: "r3-n1", Tiers: []string{"leaf-r3", "spine"}},
	}, TreeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTree(&b, prevPlan.Switches); err != nil {
		t.Fatal(err)
	}
	prev, err := slurmconf.ParseTree([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Tree(nodes, TreeOptions{Previous: &prev, Keep: []string{"r3-n1", "nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Switch{
		{Name: "leaf-r1", ID: "leaf-r1", Nodes: []string{"r1-n1"}},
		{Name: "leaf-r2", ID: "leaf-r2", Nodes: []string{"r1-n2", "r2-n1"}},
		{Name: "leaf-r3", ID: "leaf-r3", Nodes: []string{"r3-n1"}},
		{Name: ociLocalBlockName, ID: ociLocalBlock, Nodes: []string{"oci-1", "oci-2"}},
		{Name: "spine", ID: "spine", Tier: 1, Switches: []string{"leaf-r1", "leaf-r2", "leaf-r3"}},
		{Name: ociNetworkBlockName, ID: ociNetworkBlock, Tier: 1, Switches: []string{ociLocalBlockName}},
		{Name: ociHPCIslandName, ID: ociHPCIsland, Tier: 2, Switches: []string{ociNetworkBlockName}},
	}
	if d := cmp.Diff(want, plan.Switches); d != "" {
		t.Errorf("switches (-want +got):\n%s", d)
	}
	wantChange := Change{Previous: 7, Dropped: []string{"r2-n2"}, Kept: []string{"oci-2", "r1-n1", "r3-n1"}, Moved: []string{"r1-n2"}}
	if d := cmp.Diff(wantChange, plan.Change); d != "" {
		t.Errorf("change (-want +got):\n%s", d)
	}
	if !slices.ContainsFunc(plan.Warnings, func(w string) bool {
		return strings.Contains(w, "3 nodes report no network tiers now (or fewer than before) and keep the switches of the previous file: oci-2, r1-n1, r3-n1")
	}) {
		t.Errorf("warnings %q lack the kept nodes", plan.Warnings)
	}
	for _, want := range []string{
		"1 nodes of the previous file are not in the tree now (gone longer than the lookback, refused or left out): r2-n2",
		"1 nodes are in another leaf than in the previous file: r1-n2",
	} {
		if !slices.Contains(plan.Warnings, want) {
			t.Errorf("warnings %q lack %q", plan.Warnings, want)
		}
	}
}

// TreeFile against a previous file: within the guard it writes; past it
// (a Prometheus that lost half the fleet) it refuses and writes nothing,
// naming the nodes; --force writes; a previous file that does not parse
// is an error unless forced.
func TestTreeFileGuard(t *testing.T) {
	var all []Node
	for i := range 200 {
		all = append(all, Node{Name: fmt.Sprintf("n%03d", i), Tiers: []string{fmt.Sprintf("leaf%d", i/32), "spine"}})
	}
	g := Guard{MaxDrop: DefaultMaxDrop}
	first, _, err := TreeFile(all, nil, TreeOptions{}, g)
	if err != nil {
		t.Fatal(err)
	}
	same, plan, err := TreeFile(all, first, TreeOptions{}, g)
	if err != nil || string(same) != string(first) || plan.Change.Previous != 200 || len(plan.Change.Dropped) != 0 {
		t.Fatalf("the same fleet again: %v, change %+v; want the same file", err, plan.Change)
	}
	if _, _, err := TreeFile(all[2:], first, TreeOptions{}, g); err != nil {
		t.Errorf("2 of 200 dropped at 1%%: %v", err)
	}
	out, _, err := TreeFile(all[100:], first, TreeOptions{}, g)
	if !errors.Is(err, ErrRefused) || out != nil || !strings.Contains(err.Error(), "drops 100 of the previous file's 200 nodes") || !strings.Contains(err.Error(), "n000, n001") {
		t.Errorf("half the fleet gone: %v, wrote %d bytes", err, len(out))
	}
	if out, _, err := TreeFile(all[100:], first, TreeOptions{}, Guard{Force: true}); err != nil || len(out) == 0 {
		t.Errorf("forced: %v", err)
	}
	if _, _, err := TreeFile(all, []byte("SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n"), TreeOptions{}, g); err == nil || !strings.Contains(err.Error(), "the previous file") {
		t.Errorf("a broken previous file: %v", err)
	}
	if _, _, err := TreeFile(all, []byte("garbage"), TreeOptions{}, Guard{Force: true}); err != nil {
		t.Errorf("a broken previous file, forced: %v", err)
	}
}

// Block names are stable against the previous file: a domain keeps its
// name (its comment names it), a domain whose clique ID changed keeps
// the name of the block holding most of its nodes, a new domain takes
// the next number after every one taken, a node in no domain now keeps
// its block, the previous BlockSizes are kept, and a short block is left
// out alone.
func TestBlocksPrevious(t *testing.T) {
	prevText := "# Slurm topology.conf for TopologyPlugin=topology/block, written by gpuaffinity fleet slurm-block\n" +
		"# block1: NVLink domain, clique u.1\n" +
		"BlockName=block1 Nodes=a[1-4]\n" +
		"# block2: NVLink domain, clique u.2\n" +
		"BlockName=block2 Nodes=b[1-4]\n" +
		"# block7: NVLink domain, clique u.7\n" +
		"BlockName=block7 Nodes=c[1-4]\n" +
		"BlockSizes=4,8\n"
	prev, err := slurmconf.ParseBlocks([]byte(prevText))
	if err != nil {
		t.Fatal(err)
	}
	var nodes []Node
	for i := 1; i <= 4; i++ {
		nodes = append(nodes,
			Node{Name: fmt.Sprintf("a%d", i), Clique: "u.1"},
			Node{Name: fmt.Sprintf("b%d", i), Clique: "u.9"}, // rack b's clique re-formed
			Node{Name: fmt.Sprintf("d%d", i), Clique: "u.4"}, // a new rack
		)
	}
	nodes = append(nodes, Node{Name: "c1", Clique: "u.7"}, Node{Name: "c2", Clique: "u.7"}, Node{Name: "c3"})
	plan, err := Blocks(nodes, BlockOptions{Previous: &prev})
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Name: "block1", Domain: "clique u.1", Nodes: []string{"a1", "a2", "a3", "a4"}},
		{Name: "block2", Domain: "clique u.9", Nodes: []string{"b1", "b2", "b3", "b4"}},
		{Name: "block8", Domain: "clique u.4", Nodes: []string{"d1", "d2", "d3", "d4"}},
	}
	if d := cmp.Diff(want, plan.Blocks); d != "" {
		t.Errorf("blocks (-want +got):\n%s", d)
	}
	if !slices.Equal(plan.Sizes, []int{4, 8}) || plan.Change.SizesAfter != nil {
		t.Errorf("sizes %v (change %v %v), want the previous 4,8 unchanged", plan.Sizes, plan.Change.SizesBefore, plan.Change.SizesAfter)
	}
	// block7 keeps c1, c2 and c3 (in no domain now: kept), three nodes:
	// under 4, left out; c4 is gone.
	wantChange := Change{Previous: 12, Dropped: []string{"c1", "c2", "c3", "c4"}, Kept: []string{"c3"}}
	if d := cmp.Diff(wantChange, plan.Change); d != "" {
		t.Errorf("change (-want +got):\n%s", d)
	}
	if !slices.ContainsFunc(plan.Warnings, func(w string) bool {
		return strings.Contains(w, "block7 (clique u.7) has 3 nodes, fewer than the base block size 4: left out") && strings.Contains(w, "c1, c2, c3")
	}) {
		t.Errorf("warnings %q lack the short block", plan.Warnings)
	}
	// Other sizes than the file's are a change the guard refuses.
	plan, err = Blocks(nodes, BlockOptions{Previous: &prev, Sizes: []int{2, 4}})
	if err != nil || !slices.Equal(plan.Change.SizesBefore, []int{4, 8}) || !slices.Equal(plan.Change.SizesAfter, []int{2, 4}) {
		t.Errorf("given sizes: %v, change %v → %v", err, plan.Change.SizesBefore, plan.Change.SizesAfter)
	}
	if err := (Guard{MaxDrop: Threshold{Count: 100}}).Check(plan.Change); !errors.Is(err, ErrRefused) {
		t.Errorf("the guard takes new BlockSizes: %v", err)
	}
}

// topology.yaml carries the IDs and domains in comments, so a run reads
// back the previous file's names: the same fleet gives the same file,
// and a node with an empty placement now keeps both its switch and its
// block.
func TestYAMLFilePrevious(t *testing.T) {
	nodes := []Node{
		{Name: "a1", Clique: "u.1", Tiers: []string{ociLocalBlock, "spine"}},
		{Name: "a2", Clique: "u.1", Tiers: []string{ociLocalBlock, "spine"}},
		{Name: "b1", Clique: "u.2", Tiers: []string{"leaf2", "spine"}},
		{Name: "b2", Clique: "u.2", Tiers: []string{"leaf2", "spine"}},
	}
	g := Guard{MaxDrop: Threshold{Count: 0}}
	first, _, _, err := YAMLFile(nodes, nil, TreeOptions{}, BlockOptions{}, g)
	if err != nil {
		t.Fatal(err)
	}
	restarted := slices.Clone(nodes)
	restarted[1] = Node{Name: "a2"}
	again, tp, bp, err := YAMLFile(restarted, first, TreeOptions{}, BlockOptions{}, g)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(first) {
		t.Errorf("a2 restarted: the file changed:\n%s\nwas\n%s", again, first)
	}
	if !slices.Equal(tp.Change.Kept, []string{"a2"}) || !slices.Equal(bp.Change.Kept, []string{"a2"}) {
		t.Errorf("kept %v and %v, want a2 in both", tp.Change.Kept, bp.Change.Kept)
	}
	if _, _, _, err := YAMLFile(nodes[:3], first, TreeOptions{}, BlockOptions{}, g); !errors.Is(err, ErrRefused) {
		t.Errorf("a node gone at --max-drop 0: %v", err)
	}
}
