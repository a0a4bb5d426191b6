package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The FNV-64a values below were computed by hand with a separate
// implementation in Python (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3, h ^= b; h *= prime per byte, printed "%016x"), not with
// hash/fnv or fleet's code.
const (
	// 101, 102 and 100 characters: over Slurm's 64.
	ociLocalBlock   = "ocid1.computelocalblock.oc1.iad.anuwcljrp7h4xoycaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1"
	ociNetworkBlock = "ocid1.computenetworkblock.oc1.iad.anuwcljrp7h4xoycbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2"
	ociHPCIsland    = "ocid1.computehpcisland.oc1.iad.anuwcljrp7h4xoyccccccccccccccccccccccccccccccccccccccccccccccccccccc3"

	ociLocalBlockName   = "xad80844ddba5399c"
	ociNetworkBlockName = "x6b92cd0ac61cec30"
	// Its hash starts with two zero digits: SwitchName must pad.
	ociHPCIslandName = "x00ffaf7e5e21c786"

	// The 8-hex suffixes Tree appends to a switch named twice: FNV-64a of
	// its key (its ID and the IDs above it, NUL-separated).
	hashSb1BlkA = "30ac13c5" // "sb-1\x00blk-a"
	hashSb1BlkB = "30ac14c5" // "sb-1\x00blk-b"
	hashSpine   = "8b20668a" // "spine"
)

type slurmFailWriter struct{}

func (slurmFailWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestHostlist(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{"nil", nil, ""},
		{"one", []string{"a7"}, "a7"},
		{"fold with gap", []string{"a1", "a2", "a4"}, "a[1-2,4]"},
		{"fold with dash in prefix", []string{"gb200-a1", "gb200-a2", "gb200-a4"}, "gb200-a[1-2,4]"},
		{"padding kept", []string{"n01", "n02"}, "n[01-02]"},
		{"padding across a decade", []string{"n010", "n008", "n009"}, "n[008-010]"},
		{"two widths stay apart", []string{"n9", "n10"}, "n10,n9"},
		{"two widths, each folds", []string{"n9", "n10", "n8", "n11"}, "n[10-11],n[8-9]"},
		{"no digits", []string{"beta", "alpha"}, "alpha,beta"},
		{"duplicates", []string{"a1", "a2", "a1", "a2", "x", "x"}, "a[1-2],x"},
		{"order", []string{"a3", "a1", "a2"}, "a[1-3]"},
		{"mixed", []string{"b2", "c01", "a", "b1"}, "a,b[1-2],c01"},
		{"prefix with digits", []string{"r2-t01", "r1-t02", "r1-t01"}, "r1-t[01-02],r2-t01"},
		// Widths 1 and 2: two groups, not man page's tux[0-3,12,18-20].
		{"several runs", []string{"tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20"}, "tux[0-3],tux[12,18-20]"},
		{"several runs of one width", []string{"tux00", "tux01", "tux02", "tux03", "tux12", "tux18", "tux19", "tux20"}, "tux[00-03,12,18-20]"},
		{"over 9 digits not folded", []string{"n1234567891", "n1234567890"}, "n1234567890,n1234567891"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Hostlist(tt.names); got != tt.want {
				t.Errorf("Hostlist(%q) = %q, want %q", tt.names, got, tt.want)
			}
		})
	}
}

func TestSlurmName(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"gb200-r1-t01", true},
		{"a", true},
		{"A_b.c-9", true},
		{"0node", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"n[1-2]", false},
		{"a,b", false},
		{"a=b", false},
		{"a b", false},
		{"a#b", false},
		{"-a", false},
		{".a", false},
		{"a\nSwitchName=evil", false},
		{"a\tb", false},
		{"a/b", false},
		{"a:b", false},
		{"ä", false},
	}
	for _, tt := range tests {
		if got := SlurmName(tt.s); got != tt.want {
			t.Errorf("SlurmName(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestSwitchName(t *testing.T) {
	// Independent of fleet's fnvHex: hash/fnv, padded to 16 digits.
	stdlib := func(s string) string {
		h := fnv.New64a()
		h.Write([]byte(s))
		return fmt.Sprintf("x%016x", h.Sum64())
	}
	tests := []struct {
		id, want string
	}{
		{"leaf-r1", "leaf-r1"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{ociLocalBlock, ociLocalBlockName},
		{ociNetworkBlock, ociNetworkBlockName},
		{ociHPCIsland, ociHPCIslandName},
		{strings.Repeat("a", 65), "x8087e9a889f8a14c"},
		{"-x", "x07d04207b4982ea0"},
	}
	for _, tt := range tests {
		got := SwitchName(tt.id)
		if got != tt.want {
			t.Errorf("SwitchName(%q) = %q, want %q", tt.id, got, tt.want)
		}
		if !SlurmName(tt.id) {
			if got != stdlib(tt.id) {
				t.Errorf("SwitchName(%q) = %q, hash/fnv gives %q", tt.id, got, stdlib(tt.id))
			}
			if len(got) != 17 {
				t.Errorf("SwitchName(%q) = %q: %d characters, want 17", tt.id, got, len(got))
			}
		}
		if !SlurmName(got) {
			t.Errorf("SwitchName(%q) = %q: not a valid Slurm name", tt.id, got)
		}
	}
}

// siteNodes is two racks of two nodes under one spine, out of order.
func siteNodes() []Node {
	return []Node{
		{Name: "r2-n2", Target: "j/r2-n2", Tiers: []string{"leaf-r2", "spine"}},
		{Name: "r1-n1", Target: "j/r1-n1", Tiers: []string{"leaf-r1", "spine"}},
		{Name: "r2-n1", Target: "j/r2-n1", Tiers: []string{"leaf-r2", "spine"}},
		{Name: "r1-n2", Target: "j/r1-n2", Tiers: []string{"leaf-r1", "spine"}},
	}
}

func siteSwitches() []Switch {
	return []Switch{
		{Name: "leaf-r1", ID: "leaf-r1", Tier: 0, Nodes: []string{"r1-n1", "r1-n2"}},
		{Name: "leaf-r2", ID: "leaf-r2", Tier: 0, Nodes: []string{"r2-n1", "r2-n2"}},
		{Name: "spine", ID: "spine", Tier: 1, Switches: []string{"leaf-r1", "leaf-r2"}},
	}
}

// gcpNodes: sub-block sb-1 is used under both blk-a and blk-b.
func gcpNodes() []Node {
	return []Node{
		{Name: "a3-1", Cloud: "gcp", Tiers: []string{"sb-1", "blk-a"}},
		{Name: "a3-2", Cloud: "gcp", Tiers: []string{"sb-1", "blk-a"}},
		{Name: "a3-3", Cloud: "gcp", Tiers: []string{"sb-2", "blk-a"}},
		{Name: "a3-4", Cloud: "gcp", Tiers: []string{"sb-1", "blk-b"}},
	}
}

func gcpSwitches() []Switch {
	return []Switch{
		{Name: "sb-1-" + hashSb1BlkA, ID: "sb-1", Tier: 0, Nodes: []string{"a3-1", "a3-2"}},
		{Name: "sb-1-" + hashSb1BlkB, ID: "sb-1", Tier: 0, Nodes: []string{"a3-4"}},
		{Name: "sb-2", ID: "sb-2", Tier: 0, Nodes: []string{"a3-3"}},
		{Name: "blk-a", ID: "blk-a", Tier: 1, Switches: []string{"sb-1-" + hashSb1BlkA, "sb-2"}},
		{Name: "blk-b", ID: "blk-b", Tier: 1, Switches: []string{"sb-1-" + hashSb1BlkB}},
	}
}

func TestTree(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		opts  TreeOptions
		want  []Switch
		// warns are substrings, one per warning, in order.
		warns []string
	}{
		{
			name:  "two-rack site",
			nodes: siteNodes(),
			want:  siteSwitches(),
		},
		{
			name:  "gcp sub-block under two blocks",
			nodes: gcpNodes(),
			want:  gcpSwitches(),
			warns: []string{
				`switch "sb-1" is named twice`,
				`switch "sb-1" is named twice`,
			},
		},
		{
			name: "oci long OCIDs hashed",
			nodes: []Node{
				{Name: "oci-2", Cloud: "oci", Tiers: []string{ociLocalBlock, ociNetworkBlock, ociHPCIsland}},
				{Name: "oci-1", Cloud: "oci", Tiers: []string{ociLocalBlock, ociNetworkBlock, ociHPCIsland}},
			},
			want: []Switch{
				{Name: ociLocalBlockName, ID: ociLocalBlock, Tier: 0, Nodes: []string{"oci-1", "oci-2"}},
				{Name: ociNetworkBlockName, ID: ociNetworkBlock, Tier: 1, Switches: []string{ociLocalBlockName}},
				{Name: ociHPCIslandName, ID: ociHPCIsland, Tier: 2, Switches: []string{ociNetworkBlockName}},
			},
		},
		{
			name: "nodes without tiers",
			nodes: append(siteNodes(),
				Node{Name: "u2", Target: "j/u2"},
				Node{Name: "u1", Target: "j/u1", Tiers: []string{}},
			),
			want:  siteSwitches(),
			warns: []string{"2 nodes have no network tiers and are left out of the tree"},
		},
		{
			name: "invalid and duplicate names",
			nodes: append(siteNodes(),
				Node{Name: "bad name", Target: "j/bad", Tiers: []string{"leaf-r1", "spine"}},
				Node{Name: "r1-n1", Target: "j/second", Tiers: []string{"leaf-r9", "spine"}},
			),
			want: siteSwitches(),
			warns: []string{
				`node "bad name" (target "j/bad"): not a name Slurm takes`,
				`node "r1-n1": reported by two targets, "j/r1-n1" and "j/second"`,
			},
		},
		{
			name: "empty tier",
			nodes: append(siteNodes(),
				Node{Name: "r3-n1", Tiers: []string{"", "spine"}},
			),
			want:  siteSwitches(),
			warns: []string{`node "r3-n1": an empty network tier`},
		},
		{
			name:  "root over the tops",
			nodes: gcpNodes(),
			opts:  TreeOptions{Root: "all"},
			want: append(gcpSwitches(),
				Switch{Name: "all", ID: "all", Tier: 2, Switches: []string{"blk-a", "blk-b"}}),
			warns: []string{
				`switch "sb-1" is named twice`,
				`switch "sb-1" is named twice`,
			},
		},
		{
			name:  "root named as an existing switch",
			nodes: siteNodes(),
			opts:  TreeOptions{Root: "spine"},
			want: []Switch{
				{Name: "leaf-r1", ID: "leaf-r1", Tier: 0, Nodes: []string{"r1-n1", "r1-n2"}},
				{Name: "leaf-r2", ID: "leaf-r2", Tier: 0, Nodes: []string{"r2-n1", "r2-n2"}},
				{Name: "spine-" + hashSpine, ID: "spine", Tier: 1, Switches: []string{"leaf-r1", "leaf-r2"}},
				{Name: "spine", ID: "spine", Tier: 2, Switches: []string{"spine-" + hashSpine}},
			},
			warns: []string{`switch "spine" is named twice (under different parents, as the root, or as another switch's made name); this one, under "", is spine-` + hashSpine},
		},
		{
			name:  "no nodes",
			nodes: nil,
			want:  nil,
		},
		{
			name:  "only untiered nodes",
			nodes: []Node{{Name: "u1"}},
			want:  nil,
			warns: []string{"1 nodes have no network tiers"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Tree(tt.nodes, tt.opts)
			if err != nil {
				t.Fatalf("Tree: %v", err)
			}
			got, warns := plan.Switches, plan.Warnings
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Tree switches (-want +got):\n%s", diff)
			}
			checkWarns(t, warns, tt.warns)
		})
	}
}

func checkWarns(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("warnings = %q, want %d like %q", got, len(want), want)
		return
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("warning %d = %q, want it to contain %q", i, got[i], want[i])
		}
	}
}

func TestTreeWarningDetails(t *testing.T) {
	// The untiered warning lists the nodes, sorted.
	plan, err := Tree(append(siteNodes(), Node{Name: "u2"}, Node{Name: "u1"}), TreeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warns := plan.Warnings
	if len(warns) != 1 || !strings.HasSuffix(warns[0], ": u1, u2") {
		t.Errorf("warnings = %q, want one ending in the nodes \": u1, u2\"", warns)
	}
	// The double-named sub-block's warnings say the parent and the new name.
	plan, err = Tree(gcpNodes(), TreeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warns = plan.Warnings
	joined := strings.Join(warns, "\n")
	for _, want := range []string{
		`under "blk-a", is sb-1-` + hashSb1BlkA,
		`under "blk-b", is sb-1-` + hashSb1BlkB,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings %q: none says %q", warns, want)
		}
	}
}

func TestTreeInvalidRoot(t *testing.T) {
	for _, root := range []string{"bad root", "a,b", strings.Repeat("r", 65), "-r", "r[1]"} {
		plan, err := Tree(siteNodes(), TreeOptions{Root: root})
		if err == nil {
			t.Errorf("Tree(Root %q) = %v, want an error", root, plan.Switches)
		}
	}
}

func TestWriteTree(t *testing.T) {
	ociSwitches := []Switch{
		{Name: ociLocalBlockName, ID: ociLocalBlock, Tier: 0, Nodes: []string{"oci-1", "oci-2"}},
		{Name: ociNetworkBlockName, ID: ociNetworkBlock, Tier: 1, Switches: []string{ociLocalBlockName}},
		{Name: ociHPCIslandName, ID: ociHPCIsland, Tier: 2, Switches: []string{ociNetworkBlockName}},
	}
	tests := []struct {
		name     string
		switches []Switch
		want     string
	}{
		{
			name:     "site",
			switches: siteSwitches(),
			want: "# Slurm topology.conf for TopologyPlugin=topology/tree, written by gpuaffinity fleet slurm-tree\n" +
				"SwitchName=leaf-r1 Nodes=r1-n[1-2]\n" +
				"SwitchName=leaf-r2 Nodes=r2-n[1-2]\n" +
				"SwitchName=spine Switches=leaf-r[1-2]\n",
		},
		{
			name:     "gcp renamed",
			switches: gcpSwitches(),
			want: "# Slurm topology.conf for TopologyPlugin=topology/tree, written by gpuaffinity fleet slurm-tree\n" +
				"# sb-1-30ac13c5: sb-1\n" +
				"SwitchName=sb-1-30ac13c5 Nodes=a3-[1-2]\n" +
				"# sb-1-30ac14c5: sb-1\n" +
				"SwitchName=sb-1-30ac14c5 Nodes=a3-4\n" +
				"SwitchName=sb-2 Nodes=a3-3\n" +
				"SwitchName=blk-a Switches=sb-1-30ac13c5,sb-2\n" +
				"SwitchName=blk-b Switches=sb-1-30ac14c5\n",
		},
		{
			name:     "oci hashed",
			switches: ociSwitches,
			want: "# Slurm topology.conf for TopologyPlugin=topology/tree, written by gpuaffinity fleet slurm-tree\n" +
				"# xad80844ddba5399c: " + ociLocalBlock + "\n" +
				"SwitchName=xad80844ddba5399c Nodes=oci-[1-2]\n" +
				"# x6b92cd0ac61cec30: " + ociNetworkBlock + "\n" +
				"SwitchName=x6b92cd0ac61cec30 Switches=xad80844ddba5399c\n" +
				"# x00ffaf7e5e21c786: " + ociHPCIsland + "\n" +
				"SwitchName=x00ffaf7e5e21c786 Switches=x6b92cd0ac61cec30\n",
		},
		{
			name:     "hostile ID quoted in the comment",
			switches: []Switch{{Name: "xabc", ID: "a\nSwitchName=evil Nodes=n1", Nodes: []string{"n1"}}},
			want: "# Slurm topology.conf for TopologyPlugin=topology/tree, written by gpuaffinity fleet slurm-tree\n" +
				"# xabc: \"a\\nSwitchName=evil Nodes=n1\"\n" +
				"SwitchName=xabc Nodes=n1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteTree(&b, tt.switches); err != nil {
				t.Fatalf("WriteTree: %v", err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("WriteTree (-want +got):\n%s", diff)
			}
		})
	}
	// What slurmctld would refuse is refused before a byte is written:
	// no switch at all, two switches of one name (slurmctld: "fatal:
	// Switch ... has already been defined"), a child defined nowhere.
	for name, sws := range map[string][]Switch{
		"no switches": nil,
		"one name twice": {
			{Name: "L", ID: "L", Nodes: []string{"n1"}},
			{Name: "L", ID: "L-2", Nodes: []string{"n2"}},
		},
		"undefined child": {
			{Name: "L", ID: "L", Nodes: []string{"n1"}},
			{Name: "S", ID: "S", Switches: []string{"L", "M"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			err := WriteTree(&b, sws)
			if err == nil || !strings.Contains(err.Error(), "refusing to write a topology.conf slurmctld would not load") {
				t.Errorf("WriteTree = %v, want a refusal", err)
			}
			if b.Len() != 0 {
				t.Errorf("WriteTree wrote %q", b.String())
			}
		})
	}
	t.Run("switch with nothing under it", func(t *testing.T) {
		var b bytes.Buffer
		err := WriteTree(&b, []Switch{{Name: "empty", ID: "empty"}})
		if err == nil || !strings.Contains(err.Error(), `"empty"`) {
			t.Errorf("WriteTree = %v, want an error naming the switch", err)
		}
		if b.Len() != 0 {
			t.Errorf("WriteTree wrote %q before failing", b.String())
		}
	})
	t.Run("writer fails", func(t *testing.T) {
		if err := WriteTree(slurmFailWriter{}, siteSwitches()); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("WriteTree = %v, want the writer's error", err)
		}
	})
}

// blockNodes: cliques c0ffee.1 (n01-n04) and c0ffee.2 (n05-n09; n09 also
// names GPU memory fabric fab9, and its clique wins), an OCI node set in
// GPU memory fabric fab9 only (oci-1..4), and a node in no domain.
func blockNodes() []Node {
	var nodes []Node
	for i := 8; i >= 1; i-- {
		c := "c0ffee.1"
		if i > 4 {
			c = "c0ffee.2"
		}
		nodes = append(nodes, Node{Name: fmt.Sprintf("n%02d", i), Clique: c})
	}
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, Node{Name: "oci-" + strconv.Itoa(i), GPUMemoryFabric: "fab9"})
	}
	nodes = append(nodes,
		Node{Name: "oci-4", GPUMemoryFabric: "fab9"},
		Node{Name: "n09", Clique: "c0ffee.2", GPUMemoryFabric: "fab9"},
		Node{Name: "loose-1"},
	)
	return nodes
}

// cliqueNodes returns len(sizes) cliques, the i-th of sizes[i] nodes.
func cliqueNodes(sizes ...int) []Node {
	var nodes []Node
	for c, size := range sizes {
		for i := 1; i <= size; i++ {
			nodes = append(nodes, Node{Name: fmt.Sprintf("c%d-n%d", c+1, i), Clique: fmt.Sprintf("u.%d", c+1)})
		}
	}
	return nodes
}

func TestBlocks(t *testing.T) {
	plan, err := Blocks(blockNodes(), BlockOptions{})
	if err != nil {
		t.Fatalf("Blocks: %v", err)
	}
	blocks, sizes, warns := plan.Blocks, plan.Sizes, plan.Warnings
	wantBlocks := []Block{
		{Name: "block1", Domain: "clique c0ffee.1", Nodes: []string{"n01", "n02", "n03", "n04"}},
		{Name: "block2", Domain: "clique c0ffee.2", Nodes: []string{"n05", "n06", "n07", "n08", "n09"}},
		{Name: "block3", Domain: "gpu memory fabric fab9", Nodes: []string{"oci-1", "oci-2", "oci-3", "oci-4"}},
	}
	if diff := cmp.Diff(wantBlocks, blocks); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	// D = 4 (what most blocks hold), N = 3: [4, 8].
	if diff := cmp.Diff([]int{4, 8}, sizes); diff != "" {
		t.Errorf("sizes (-want +got):\n%s", diff)
	}
	checkWarns(t, warns, []string{
		"1 nodes are in no NVLink domain and are left out of the blocks: loose-1",
		"block1 (clique c0ffee.1) has 4 nodes, fewer than the 5 of the largest block",
		"block3 (gpu memory fabric fab9) has 4 nodes, fewer than the 5 of the largest block",
	})
}

func TestBlocksInferSizes(t *testing.T) {
	rep := func(n, size int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = size
		}
		return s
	}
	tests := []struct {
		name    string
		cliques []int
		want    []int
	}{
		{"N=1", rep(1, 18), []int{18}},
		{"N=2", rep(2, 18), []int{18, 36}},
		{"N=3", rep(3, 18), []int{18, 36}},
		{"N=4", rep(4, 4), []int{4, 8, 16}},
		{"N=7", rep(7, 2), []int{2, 4, 8}},
		{"N=8", rep(8, 2), []int{2, 4, 8, 16}},
		{"N=9", rep(9, 1), []int{1, 2, 4, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Blocks(cliqueNodes(tt.cliques...), BlockOptions{})
			if err != nil {
				t.Fatalf("Blocks: %v", err)
			}
			sizes, warns := plan.Sizes, plan.Warnings
			if diff := cmp.Diff(tt.want, sizes); diff != "" {
				t.Errorf("sizes (-want +got):\n%s", diff)
			}
			if len(warns) != 0 {
				t.Errorf("warnings = %q, want none", warns)
			}
		})
	}
}

// A short block (a rack with a tray down) does not lower every rack's
// base size: D is the size most blocks hold, and the short block alone
// is left out, its nodes named.
func TestBlocksShortBlock(t *testing.T) {
	plan, err := Blocks(cliqueNodes(4, 4, 2), BlockOptions{})
	if err != nil {
		t.Fatalf("Blocks: %v", err)
	}
	if len(plan.Blocks) != 2 || plan.Blocks[0].Name != "block1" || plan.Blocks[1].Name != "block2" {
		t.Errorf("blocks %v, want block1 and block2", plan.Blocks)
	}
	if diff := cmp.Diff([]int{4, 8}, plan.Sizes); diff != "" {
		t.Errorf("sizes (-want +got):\n%s", diff)
	}
	checkWarns(t, plan.Warnings, []string{"block3 (clique u.3) has 2 nodes, fewer than the base block size 4: left out (Slurm wants every block at least that big), its nodes in no block: c3-n1, c3-n2"})
	// A tie between sizes takes the larger.
	plan, err = Blocks(cliqueNodes(3, 2), BlockOptions{})
	if err != nil || !slices.Equal(plan.Sizes, []int{3, 6}) || len(plan.Blocks) != 1 {
		t.Errorf("Blocks(3, 2) = %v, %v, %v; want sizes 3,6 and one block", plan.Blocks, plan.Sizes, err)
	}
}

func TestBlocksGivenSizes(t *testing.T) {
	tests := []struct {
		sizes   []int
		wantErr string // "" ok
	}{
		{[]int{3}, ""},
		{[]int{3, 6}, ""},
		{[]int{3, 6, 24}, ""},
		{[]int{3, 12}, ""},
		{[]int{1, 2}, ""},
		{[]int{3, 9}, "9 is not a power of two times 3"},
		{[]int{3, 6, 18}, "18 is not a power of two times 6"},
		{[]int{3, 3}, "3 is not a power of two times 3"},
		{[]int{6, 3}, "3 is not a power of two times 6"},
		{[]int{4}, "every block is under the base size 4: nothing to write"},
		{[]int{4, 8}, "every block is under the base size 4: nothing to write"},
		{[]int{0}, "block size 0: must be at least 1"},
		{[]int{3, 0}, "block size 0: must be at least 1"},
		{[]int{-2}, "block size -2: must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(intList(tt.sizes), func(t *testing.T) {
			plan, err := Blocks(cliqueNodes(3, 3), BlockOptions{Sizes: tt.sizes})
			blocks, sizes := plan.Blocks, plan.Sizes
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Blocks: %v", err)
				}
				if diff := cmp.Diff(tt.sizes, sizes); diff != "" {
					t.Errorf("sizes (-want +got):\n%s", diff)
				}
				if len(blocks) != 2 {
					t.Errorf("got %d blocks, want 2", len(blocks))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Blocks(sizes %v) error = %v, want one containing %q", tt.sizes, err, tt.wantErr)
			}
			if blocks != nil || sizes != nil {
				t.Errorf("Blocks failed but returned %v, %v", blocks, sizes)
			}
		})
	}
}

func TestBlocksNoDomains(t *testing.T) {
	plan, err := Blocks([]Node{{Name: "a"}, {Name: "bad name", Clique: "u.1"}}, BlockOptions{})
	blocks, sizes, warns := plan.Blocks, plan.Sizes, plan.Warnings
	if err != nil || blocks != nil || sizes != nil {
		t.Fatalf("Blocks = %v, %v, %v; want nothing", blocks, sizes, err)
	}
	checkWarns(t, warns, []string{`node "bad name"`, "1 nodes are in no NVLink domain"})
}

func TestWriteBlocks(t *testing.T) {
	blocks := []Block{
		{Name: "block1", Domain: "clique c0ffee.1", Nodes: []string{"n01", "n02", "n03", "n04"}},
		{Name: "block2", Domain: "clique c0ffee.2", Nodes: []string{"n05", "n06", "n07", "n08", "n09"}},
		{Name: "block3", Domain: "gpu memory fabric fab9", Nodes: []string{"oci-1", "oci-2", "oci-3", "oci-4"}},
	}
	var b bytes.Buffer
	if err := WriteBlocks(&b, blocks, []int{4, 8}); err != nil {
		t.Fatalf("WriteBlocks: %v", err)
	}
	want := "# Slurm topology.conf for TopologyPlugin=topology/block, written by gpuaffinity fleet slurm-block\n" +
		"# block1: NVLink domain, clique c0ffee.1\n" +
		"BlockName=block1 Nodes=n[01-04]\n" +
		"# block2: NVLink domain, clique c0ffee.2\n" +
		"BlockName=block2 Nodes=n[05-09]\n" +
		"# block3: NVLink domain, gpu memory fabric fab9\n" +
		"BlockName=block3 Nodes=oci-[1-4]\n" +
		"BlockSizes=4,8\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("WriteBlocks (-want +got):\n%s", diff)
	}

	// A hostile domain stays in its comment.
	b.Reset()
	if err := WriteBlocks(&b, []Block{{Name: "block1", Domain: "clique x\nBlockSizes=1", Nodes: []string{"n1"}}}, []int{1}); err != nil {
		t.Fatalf("WriteBlocks: %v", err)
	}
	want = "# Slurm topology.conf for TopologyPlugin=topology/block, written by gpuaffinity fleet slurm-block\n" +
		"# block1: NVLink domain, \"clique x\\nBlockSizes=1\"\n" +
		"BlockName=block1 Nodes=n1\n" +
		"BlockSizes=1\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("WriteBlocks hostile (-want +got):\n%s", diff)
	}

	for name, args := range map[string]struct {
		blocks []Block
		sizes  []int
	}{
		"no blocks": {nil, []int{4}},
		"no sizes":  {blocks, nil},
	} {
		b.Reset()
		if err := WriteBlocks(&b, args.blocks, args.sizes); err == nil {
			t.Errorf("WriteBlocks(%s) = nil, want an error", name)
		}
		if b.Len() != 0 {
			t.Errorf("WriteBlocks(%s) wrote %q", name, b.String())
		}
	}
	if err := WriteBlocks(slurmFailWriter{}, blocks, []int{4}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteBlocks = %v, want the writer's error", err)
	}
}

func TestWriteTopologyYAML(t *testing.T) {
	blocks := []Block{
		{Name: "block1", Domain: "clique c0ffee.1", Nodes: []string{"n01", "n02", "n03", "n04"}},
		{Name: "block2", Domain: "clique c0ffee.2", Nodes: []string{"n05", "n06", "n07", "n08"}},
	}
	tests := []struct {
		name     string
		switches []Switch
		blocks   []Block
		sizes    []int
		want     string
	}{
		{
			name:     "blocks and tree",
			switches: siteSwitches(),
			blocks:   blocks,
			sizes:    []int{4, 8},
			want: `# Slurm topology.yaml, written by gpuaffinity fleet slurm-yaml
- topology: nvlink
  cluster_default: true
  block:
    block_sizes:
      - 4
      - 8
    blocks:
      # block1: NVLink domain, clique c0ffee.1
      - block: block1
        nodes: n[01-04]
      # block2: NVLink domain, clique c0ffee.2
      - block: block2
        nodes: n[05-08]
- topology: network
  cluster_default: false
  tree:
    switches:
      - switch: leaf-r1
        nodes: r1-n[1-2]
      - switch: leaf-r2
        nodes: r2-n[1-2]
      - switch: spine
        children: leaf-r[1-2]
`,
		},
		{
			name:     "tree only",
			switches: siteSwitches(),
			want: `# Slurm topology.yaml, written by gpuaffinity fleet slurm-yaml
- topology: network
  cluster_default: true
  tree:
    switches:
      - switch: leaf-r1
        nodes: r1-n[1-2]
      - switch: leaf-r2
        nodes: r2-n[1-2]
      - switch: spine
        children: leaf-r[1-2]
`,
		},
		{
			name:   "blocks only",
			blocks: blocks[:1],
			sizes:  []int{4},
			want: `# Slurm topology.yaml, written by gpuaffinity fleet slurm-yaml
- topology: nvlink
  cluster_default: true
  block:
    block_sizes:
      - 4
    blocks:
      # block1: NVLink domain, clique c0ffee.1
      - block: block1
        nodes: n[01-04]
`,
		},
		{
			name: "numeric switch names stay strings",
			switches: []Switch{
				{Name: "123", ID: "123", Nodes: []string{"n1", "n2"}},
				{Name: "true", ID: "true", Tier: 1, Switches: []string{"123"}},
			},
			want: `# Slurm topology.yaml, written by gpuaffinity fleet slurm-yaml
- topology: network
  cluster_default: true
  tree:
    switches:
      - switch: "123"
        nodes: n[1-2]
      - switch: "true"
        children: "123"
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteTopologyYAML(&b, tt.switches, tt.blocks, tt.sizes); err != nil {
				t.Fatalf("WriteTopologyYAML: %v", err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("WriteTopologyYAML (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("nothing", func(t *testing.T) {
		var b bytes.Buffer
		if err := WriteTopologyYAML(&b, nil, nil, nil); err == nil {
			t.Error("WriteTopologyYAML(nothing) = nil, want an error")
		}
		if b.Len() != 0 {
			t.Errorf("WriteTopologyYAML(nothing) wrote %q", b.String())
		}
	})
	// Two switches of one name, or a block under the base size, are
	// refused before a byte is written.
	for name, args := range map[string]struct {
		sws    []Switch
		blocks []Block
		sizes  []int
	}{
		"one name twice":  {sws: []Switch{{Name: "L", ID: "L", Nodes: []string{"n1"}}, {Name: "L", ID: "L-2", Nodes: []string{"n2"}}}},
		"block too small": {blocks: []Block{{Name: "b1", Domain: "clique u.1", Nodes: []string{"n1"}}}, sizes: []int{2}},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			err := WriteTopologyYAML(&b, args.sws, args.blocks, args.sizes)
			if err == nil || !strings.Contains(err.Error(), "refusing to write a topology.yaml slurmctld would not load") || b.Len() != 0 {
				t.Errorf("WriteTopologyYAML = %v, wrote %d bytes; want a refusal", err, b.Len())
			}
		})
	}
	t.Run("switch with nothing under it", func(t *testing.T) {
		if err := WriteTopologyYAML(&bytes.Buffer{}, []Switch{{Name: "e", ID: "e"}}, nil, nil); err == nil {
			t.Error("WriteTopologyYAML = nil, want an error")
		}
	})
	t.Run("writer fails", func(t *testing.T) {
		if err := WriteTopologyYAML(slurmFailWriter{}, siteSwitches(), nil, nil); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("WriteTopologyYAML = %v, want the writer's error", err)
		}
	})
}

// A node with fewer tiers than its peers, whose last tier is a switch
// the peers have a leaf under, has no known leaf: it is left out with a
// warning, and the peers' tree stays whole.
func TestTreeMixedDepth(t *testing.T) {
	plan, err := Tree([]Node{
		{Name: "a", Tiers: []string{"b1"}},
		{Name: "b", Tiers: []string{"s1", "b1"}},
	}, TreeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sw, warns := plan.Switches, plan.Warnings
	want := []Switch{
		{Name: "s1", ID: "s1", Tier: 0, Nodes: []string{"b"}},
		{Name: "b1", ID: "b1", Tier: 1, Switches: []string{"s1"}},
	}
	if d := cmp.Diff(want, sw); d != "" {
		t.Errorf("Tree (-want +got):\n%s", d)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], `switch "b1"`) || !strings.Contains(warns[0], "nodes a name it") {
		t.Errorf("warnings %q, want one naming b1 and node a", warns)
	}
}
