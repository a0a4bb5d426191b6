package fleet

import (
	"bytes"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Hashes below were computed by hand with a separate FNV-64a
// implementation (offset basis 0xcbf29ce484222325, prime 0x100000001b3,
// h ^= b; h *= prime per byte; printed "x%x"), written in Python, not
// with hash/fnv or LabelValue. That program gives "a" 0xaf63dc4c8601ec8c,
// FNV-64a's published test vector.
const (
	// longOCID is 95 characters, over the 63 Kubernetes allows.
	longOCID     = "ocid1.computebaremetalhost.oc1.iad.anuwcljrp7h4xoycqymnh6cpqjkzqfqgnwxwvm2fmgqfrdh3dnvpw6n5flya"
	longOCIDHash = "x899a86baadf2e938"
	// hashAB is "a b"'s, hashDashX "-x"'s (15 hex digits: %x does not pad),
	// hash64a 64 "a"s', hashBadUnderscore "bad_"'s.
	hashAB            = "xe63f991904833892"
	hashDashX         = "x7d04207b4982ea0"
	hash64a           = "xdb007849f35ebbe5"
	hashBadUnderscore = "x9a2f0b9baa12e885"
)

func TestLabelsScheme(t *testing.T) {
	tests := []struct {
		name   string
		node   Node
		scheme Scheme
		want   []Label
	}{
		{
			name:   "gcp",
			node:   Node{Name: "a3-1", Cloud: "gcp", Tiers: []string{"sb-7", "blk-2"}, HostID: "host-9"},
			scheme: SchemeCloud,
			want: []Label{
				{"cloud.google.com/gce-topology-block", "blk-2"},
				{"cloud.google.com/gce-topology-host", "host-9"},
				{"cloud.google.com/gce-topology-subblock", "sb-7"},
			},
		},
		{
			name:   "gcp, empty scheme is cloud",
			node:   Node{Name: "a3-1", Cloud: "gcp", Tiers: []string{"sb-7", "blk-2"}, HostID: "host-9"},
			scheme: "",
			want: []Label{
				{"cloud.google.com/gce-topology-block", "blk-2"},
				{"cloud.google.com/gce-topology-host", "host-9"},
				{"cloud.google.com/gce-topology-subblock", "sb-7"},
			},
		},
		{
			name:   "gcp tier beyond the cloud's keys",
			node:   Node{Name: "a3-1", Cloud: "gcp", Tiers: []string{"sb-7", "blk-2", "cluster-1"}},
			scheme: SchemeCloud,
			want: []Label{
				{"cloud.google.com/gce-topology-block", "blk-2"},
				{"cloud.google.com/gce-topology-subblock", "sb-7"},
				{"gpuaffinity.io/network.tier-2", "cluster-1"},
			},
		},
		{
			name:   "oci",
			node:   Node{Name: "bm-1", Cloud: "oci", Tiers: []string{"lb-1", "nb-2", "isl-3"}, HostID: "hid-4"},
			scheme: SchemeCloud,
			want: []Label{
				// "host_id" sorts before "hpc_island_id" ('o' < 'p').
				{"oci.oraclecloud.com/rdma.host_id", "hid-4"},
				{"oci.oraclecloud.com/rdma.hpc_island_id", "isl-3"},
				{"oci.oraclecloud.com/rdma.local_block_id", "lb-1"},
				{"oci.oraclecloud.com/rdma.network_block_id", "nb-2"},
			},
		},
		{
			name:   "oci GB200 with a long host OCID and a GPU memory fabric",
			node:   Node{Name: "gb-1", Cloud: "oci", Tiers: []string{"lb-1", "nb-2", "isl-3"}, HostID: longOCID, GPUMemoryFabric: "fab-5"},
			scheme: SchemeCloud,
			want: []Label{
				{"gpuaffinity.io/gpu-memory-fabric", "fab-5"},
				{"oci.oraclecloud.com/rdma.host_id", longOCIDHash},
				{"oci.oraclecloud.com/rdma.hpc_island_id", "isl-3"},
				{"oci.oraclecloud.com/rdma.local_block_id", "lb-1"},
				{"oci.oraclecloud.com/rdma.network_block_id", "nb-2"},
			},
		},
		{
			name:   "bare metal site tiers and GB200 clique",
			node:   Node{Name: "gb200-01", Cloud: "baremetal", Tiers: []string{"leaf", "spine"}, Clique: "uuid.32766"},
			scheme: SchemeCloud,
			want: []Label{
				{"gpuaffinity.io/network.tier-0", "leaf"},
				{"gpuaffinity.io/network.tier-1", "spine"},
				{"nvidia.com/gpu.clique", "uuid.32766"},
			},
		},
		{
			name:   "aws host id gets the own key",
			node:   Node{Name: "p5-1", Cloud: "aws", Tiers: []string{"nn-1"}, HostID: "h-1"},
			scheme: SchemeCloud,
			want: []Label{
				{"gpuaffinity.io/host-id", "h-1"},
				{"gpuaffinity.io/network.tier-0", "nn-1"},
			},
		},
		{
			name:   "empty values give no label",
			node:   Node{Name: "n", Cloud: "baremetal", Tiers: []string{"", "spine"}},
			scheme: SchemeCloud,
			want:   []Label{{"gpuaffinity.io/network.tier-1", "spine"}},
		},
		{
			name:   "nothing to label",
			node:   Node{Name: "n", Cloud: "gcp"},
			scheme: SchemeCloud,
			want:   nil,
		},
		{
			name:   "topograph with clique",
			node:   Node{Name: "n", Cloud: "oci", Tiers: []string{"lb-1", "nb-2", "isl-3"}, HostID: "hid-4", Clique: "uuid.1", GPUMemoryFabric: "fab-5"},
			scheme: SchemeTopograph,
			want: []Label{
				{"accelerator.topograph.run/domain", "uuid.1"},
				{"fabric.topograph.run/tier-0", "lb-1"},
				{"fabric.topograph.run/tier-1", "nb-2"},
				{"fabric.topograph.run/tier-2", "isl-3"},
			},
		},
		{
			name:   "topograph without clique uses GPU memory fabric",
			node:   Node{Name: "n", Cloud: "oci", Tiers: []string{"lb-1"}, GPUMemoryFabric: "fab-5"},
			scheme: SchemeTopograph,
			want: []Label{
				{"accelerator.topograph.run/domain", "fab-5"},
				{"fabric.topograph.run/tier-0", "lb-1"},
			},
		},
		{
			name:   "topograph gcp, no host label",
			node:   Node{Name: "n", Cloud: "gcp", Tiers: []string{"sb-7", "blk-2"}, HostID: "host-9"},
			scheme: SchemeTopograph,
			want: []Label{
				{"fabric.topograph.run/tier-0", "sb-7"},
				{"fabric.topograph.run/tier-1", "blk-2"},
			},
		},
		{
			// Sorted by key as strings: tier-10 comes before tier-2.
			name:   "sorted by key, not by tier number",
			node:   Node{Name: "n", Cloud: "baremetal", Tiers: []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10"}},
			scheme: SchemeTopograph,
			want: []Label{
				{"fabric.topograph.run/tier-0", "t0"},
				{"fabric.topograph.run/tier-1", "t1"},
				{"fabric.topograph.run/tier-10", "t10"},
				{"fabric.topograph.run/tier-2", "t2"},
				{"fabric.topograph.run/tier-3", "t3"},
				{"fabric.topograph.run/tier-4", "t4"},
				{"fabric.topograph.run/tier-5", "t5"},
				{"fabric.topograph.run/tier-6", "t6"},
				{"fabric.topograph.run/tier-7", "t7"},
				{"fabric.topograph.run/tier-8", "t8"},
				{"fabric.topograph.run/tier-9", "t9"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warns := Labels(tt.node, tt.scheme)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Labels = %v, want %v", got, tt.want)
			}
			if len(warns) != 0 {
				t.Errorf("Labels warnings = %q, want none", warns)
			}
		})
	}
}

func TestLabelsInvalidValueWarns(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  string
	}{
		{"space", "a b", hashAB},
		{"leading dash", "-x", hashDashX},
		{"trailing underscore", "bad_", hashBadUnderscore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := Node{Name: "gpu-node-7", Cloud: "baremetal", Tiers: []string{tt.value}}
			got, warns := Labels(n, SchemeCloud)
			want := []Label{{"gpuaffinity.io/network.tier-0", tt.want}}
			if !slices.Equal(got, want) {
				t.Errorf("Labels = %v, want %v", got, want)
			}
			if len(warns) != 1 {
				t.Fatalf("Labels warnings = %q, want one", warns)
			}
			for _, sub := range []string{`node "gpu-node-7"`, "gpuaffinity.io/network.tier-0", strconv.Quote(tt.value), tt.want} {
				if !strings.Contains(warns[0], sub) {
					t.Errorf("warning %q does not contain %q", warns[0], sub)
				}
			}
		})
	}
	// A long value is hashed without a word: long OCIDs are normal.
	_, warns := Labels(Node{Name: "n", Cloud: "oci", HostID: longOCID}, SchemeCloud)
	if len(warns) != 0 {
		t.Errorf("Labels of a long OCID warned %q, want none", warns)
	}
	// A hostile value's warning is quoted: no raw newline in it.
	_, warns = Labels(Node{Name: "n", Cloud: "baremetal", Tiers: []string{"x\nWARNING fake"}}, SchemeCloud)
	if len(warns) != 1 || strings.Contains(warns[0], "\n") {
		t.Errorf("Labels warnings of a value with a newline = %q, want one without a raw newline", warns)
	}
}

func TestLabelValue(t *testing.T) {
	fnvHex := func(s string) string {
		h := fnv.New64a()
		h.Write([]byte(s))
		return "x" + strconv.FormatUint(h.Sum64(), 16)
	}
	valid63 := strings.Repeat("a", 62) + "z"
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{longOCID, longOCIDHash, false},
		{strings.Repeat("a", 64), hash64a, false},
		{valid63, valid63, true},
		{"a", "a", true},
		{"rack-12.row_3.A", "rack-12.row_3.A", true},
		{"uuid.32766", "uuid.32766", true},
		{"a b", hashAB, false},
		{"-x", hashDashX, false},
		{"bad_", hashBadUnderscore, false},
	}
	for _, tt := range tests {
		got, ok := LabelValue(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("LabelValue(%q) = %q, %v, want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
		// The hand-computed hashes agree with hash/fnv's FNV-64a.
		if !tt.wantOK && tt.want != fnvHex(tt.in) {
			t.Errorf("hand-computed hash of %q %q != hash/fnv's %q", tt.in, tt.want, fnvHex(tt.in))
		}
	}
	// Values Kubernetes refuses are never passed through.
	for _, in := range []string{"", ".", "a.", "_a", "a\n", "a/b", "a:b", "é", "a\x00"} {
		got, ok := LabelValue(in)
		if ok || got == in || got != fnvHex(in) {
			t.Errorf("LabelValue(%q) = %q, %v, want %q, false", in, got, ok, fnvHex(in))
		}
	}
}

func TestParseScheme(t *testing.T) {
	tests := []struct {
		in      string
		want    Scheme
		wantErr bool
	}{
		{"", SchemeCloud, false},
		{"cloud", SchemeCloud, false},
		{"topograph", SchemeTopograph, false},
		{"Cloud", "", true},
		{"topograph ", "", true},
		{"gke", "", true},
	}
	for _, tt := range tests {
		got, err := ParseScheme(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseScheme(%q) = %q, %v, want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
			t.Errorf("ParseScheme(%q) error %q does not name the scheme", tt.in, err)
		}
	}
	// The label functions refuse an unknown scheme.
	if ls, warns := Labels(Node{Name: "n", Tiers: []string{"a"}}, "gke"); ls != nil || len(warns) != 1 || !strings.Contains(warns[0], `node "n"`) {
		t.Errorf(`Labels(scheme "gke") = %v, %q, want nil and one warning naming the node`, ls, warns)
	}
	var b bytes.Buffer
	if _, err := WriteKubectl(&b, []Node{{Name: "n", Tiers: []string{"a"}}}, "gke"); err == nil || b.Len() != 0 {
		t.Errorf(`WriteKubectl(scheme "gke") = %v, wrote %q; want an error and nothing written`, err, b.String())
	}
	if _, err := WriteJSON(&b, []Node{{Name: "n", Tiers: []string{"a"}}}, "gke"); err == nil || b.Len() != 0 {
		t.Errorf(`WriteJSON(scheme "gke") = %v, wrote %q; want an error and nothing written`, err, b.String())
	}
}

// labelNodes are the writers' test nodes: two good ones, one with a
// short invalid tier (hashed, warned), one with a name Kubernetes
// refuses, a second node of a name already seen, and one with nothing
// to label.
func labelNodes() []Node {
	return []Node{
		{Name: "a3-1", Target: "gpu/a3-1:9400", Cloud: "gcp", Tiers: []string{"sb-7", "blk-2"}, HostID: "host-9"},
		{Name: "gb200-01.rack1", Target: "gpu/gb200-01:9400", Cloud: "baremetal", Tiers: []string{"a b", "spine"}, Clique: "uuid.32766"},
		{Name: "Bad_Name", Target: "gpu/bad:9400", Cloud: "baremetal", Tiers: []string{"leaf"}},
		{Name: "a3-1", Target: "gpu/other:9400", Cloud: "gcp", Tiers: []string{"sb-8"}},
		{Name: "empty-1", Target: "gpu/empty:9400", Cloud: "aws"},
	}
}

// checkLabelWarnings checks the writers' warnings for labelNodes.
func checkLabelWarnings(t *testing.T, warns []string) {
	t.Helper()
	want := [][]string{
		{`node "gb200-01.rack1"`, `"a b"`, hashAB},
		{`node "Bad_Name"`, `"gpu/bad:9400"`, "not a valid Kubernetes node name; skipped"},
		{`node "a3-1"`, `"gpu/other:9400"`, "second node", "skipped"},
		{`node "empty-1"`, "no placement to label"},
	}
	if len(warns) != len(want) {
		t.Fatalf("warnings = %q, want %d", warns, len(want))
	}
	for i, subs := range want {
		for _, sub := range subs {
			if !strings.Contains(warns[i], sub) {
				t.Errorf("warning %d %q does not contain %q", i, warns[i], sub)
			}
		}
	}
}

func TestWriteKubectl(t *testing.T) {
	var b bytes.Buffer
	warns, err := WriteKubectl(&b, labelNodes(), SchemeCloud)
	if err != nil {
		t.Fatal(err)
	}
	want := "kubectl label node a3-1 --overwrite" +
		" cloud.google.com/gce-topology-block=blk-2" +
		" cloud.google.com/gce-topology-host=host-9" +
		" cloud.google.com/gce-topology-subblock=sb-7\n" +
		"kubectl label node gb200-01.rack1 --overwrite" +
		" gpuaffinity.io/network.tier-0=" + hashAB +
		" gpuaffinity.io/network.tier-1=spine" +
		" nvidia.com/gpu.clique=uuid.32766\n"
	if got := b.String(); got != want {
		t.Errorf("WriteKubectl wrote\n%s\nwant\n%s", got, want)
	}
	checkLabelWarnings(t, warns)

	b.Reset()
	if _, err := WriteKubectl(&b, nil, SchemeTopograph); err != nil || b.Len() != 0 {
		t.Errorf("WriteKubectl(no nodes) = %v, wrote %q; want nothing", err, b.String())
	}

	if _, err := WriteKubectl(failWriter{}, labelNodes(), SchemeCloud); err == nil {
		t.Error("WriteKubectl to a failing writer: no error")
	}
}

func TestKubectlShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a3-1", "a3-1"},
		{"nvidia.com/gpu.clique=uuid.32766", "nvidia.com/gpu.clique=uuid.32766"},
		{"a:b@c+d,e", "a:b@c+d,e"},
		{"", "''"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$(reboot)", "'$(reboot)'"},
		{"a;b", "'a;b'"},
		{"~root", "'~root'"},
		{"*", "'*'"},
		{"a\nb", "'a\nb'"},
		{"é", "'é'"},
	}
	for _, tt := range tests {
		if got := shellQuote(tt.in); got != tt.want {
			t.Errorf("shellQuote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	warns, err := WriteJSON(&b, labelNodes(), SchemeCloud)
	if err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "node": "a3-1",
    "labels": {
      "cloud.google.com/gce-topology-block": "blk-2",
      "cloud.google.com/gce-topology-host": "host-9",
      "cloud.google.com/gce-topology-subblock": "sb-7"
    },
    "remove": [
      "gpuaffinity.io/gpu-memory-fabric",
      "gpuaffinity.io/network.tier-2"
    ]
  },
  {
    "node": "gb200-01.rack1",
    "labels": {
      "gpuaffinity.io/network.tier-0": "` + hashAB + `",
      "gpuaffinity.io/network.tier-1": "spine",
      "nvidia.com/gpu.clique": "uuid.32766"
    },
    "remove": [
      "gpuaffinity.io/gpu-memory-fabric",
      "gpuaffinity.io/host-id",
      "gpuaffinity.io/network.tier-2"
    ]
  }
]
`
	if got := b.String(); got != want {
		t.Errorf("WriteJSON wrote\n%s\nwant\n%s", got, want)
	}
	checkLabelWarnings(t, warns)

	b.Reset()
	if _, err := WriteJSON(&b, nil, SchemeCloud); err != nil || b.String() != "[]\n" {
		t.Errorf("WriteJSON(no nodes) = %v, wrote %q; want %q", err, b.String(), "[]\n")
	}

	b.Reset()
	nodes := []Node{{Name: "n1", Cloud: "oci", Tiers: []string{"lb-1"}, GPUMemoryFabric: "fab-5"}}
	if _, err := WriteJSON(&b, nodes, SchemeTopograph); err != nil {
		t.Fatal(err)
	}
	want = `[
  {
    "node": "n1",
    "labels": {
      "accelerator.topograph.run/domain": "fab-5",
      "fabric.topograph.run/tier-0": "lb-1"
    },
    "remove": [
      "fabric.topograph.run/tier-1",
      "fabric.topograph.run/tier-2"
    ]
  }
]
`
	if got := b.String(); got != want {
		t.Errorf("WriteJSON(topograph) wrote\n%s\nwant\n%s", got, want)
	}

	if _, err := WriteJSON(failWriter{}, labelNodes(), SchemeCloud); err == nil {
		t.Error("WriteJSON to a failing writer: no error")
	}
}

func TestMergePatch(t *testing.T) {
	tests := []struct {
		name   string
		labels []Label
		want   string
	}{
		{
			name: "keys sorted",
			labels: []Label{
				{"nvidia.com/gpu.clique", "uuid.32766"},
				{"gpuaffinity.io/network.tier-0", "leaf"},
				{"cloud.google.com/gce-topology-block", "blk-2"},
			},
			want: `{"metadata":{"labels":{"cloud.google.com/gce-topology-block":"blk-2","gpuaffinity.io/network.tier-0":"leaf","nvidia.com/gpu.clique":"uuid.32766"}}}`,
		},
		{
			name:   "none",
			labels: nil,
			want:   `{"metadata":{"labels":{}}}`,
		},
		{
			name:   "JSON escaping",
			labels: []Label{{"k", `a"b\c`}},
			want:   `{"metadata":{"labels":{"k":"a\"b\\c"}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(MergePatch(tt.labels)); got != tt.want {
				t.Errorf("MergePatch = %s, want %s", got, tt.want)
			}
		})
	}
	// MergePatch of a node's Labels.
	ls, _ := Labels(Node{Name: "bm-1", Cloud: "oci", Tiers: []string{"lb-1", "nb-2", "isl-3"}, HostID: longOCID}, SchemeCloud)
	want := `{"metadata":{"labels":{"oci.oraclecloud.com/rdma.host_id":"` + longOCIDHash +
		`","oci.oraclecloud.com/rdma.hpc_island_id":"isl-3","oci.oraclecloud.com/rdma.local_block_id":"lb-1","oci.oraclecloud.com/rdma.network_block_id":"nb-2"}}}`
	if got := string(MergePatch(ls)); got != want {
		t.Errorf("MergePatch(Labels(oci node)) = %s, want %s", got, want)
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// Removals and MergePatch together: a tray that left its NVLink domain
// and lost its leaf name keeps only its spine; the patch sets the spine
// and deletes (JSON null, RFC 7386) every other key the scheme gives a
// bare-metal node that no other component owns. Expectations written
// from ownedKeys' rules: cloud scheme on bare metal gives
// gpuaffinity.io/network.tier-0..2, gpuaffinity.io/host-id,
// nvidia.com/gpu.clique (GPU Feature Discovery's: never deleted) and
// gpuaffinity.io/gpu-memory-fabric; on OCI the rdma.* keys (OKE's)
// instead of tiers 0-2 and the host id. A node whose placement is empty
// (its agent has read none yet) loses nothing.
func TestRemovals(t *testing.T) {
	n := Node{Name: "t1", Cloud: "baremetal", Tiers: []string{"spine"}}
	ls, _ := Labels(n, SchemeCloud)
	rm := Removals(n, SchemeCloud, ls)
	want := []string{"gpuaffinity.io/gpu-memory-fabric", "gpuaffinity.io/host-id", "gpuaffinity.io/network.tier-1",
		"gpuaffinity.io/network.tier-2"}
	if !slices.Equal(rm, want) {
		t.Errorf("Removals = %q, want %q", rm, want)
	}
	got := string(MergePatch(ls, rm...))
	wantPatch := `{"metadata":{"labels":{"gpuaffinity.io/gpu-memory-fabric":null,"gpuaffinity.io/host-id":null,` +
		`"gpuaffinity.io/network.tier-0":"spine","gpuaffinity.io/network.tier-1":null,"gpuaffinity.io/network.tier-2":null}}}`
	if got != wantPatch {
		t.Errorf("MergePatch = %s\nwant          %s", got, wantPatch)
	}
	oci := Node{Name: "o1", Cloud: "oci", Tiers: []string{"lb", "nb", "isl"}, HostID: "h"}
	ls, _ = Labels(oci, SchemeCloud)
	if rm := Removals(oci, SchemeCloud, ls); !slices.Equal(rm, []string{"gpuaffinity.io/gpu-memory-fabric"}) {
		t.Errorf("OCI Removals = %q", rm)
	}
	if rm := Removals(oci, "gke", nil); rm != nil {
		t.Errorf("Removals(unknown scheme) = %q, want none", rm)
	}
	if rm := Removals(Node{Name: "e", Cloud: "gcp", Source: ""}, SchemeCloud, nil); rm != nil {
		t.Errorf("Removals(empty placement) = %q, want none", rm)
	}
}

// Reconcile against a node's labels as the API server has them. The
// expectations follow its rules: set what differs; never change a key
// another component owns that it did not set; delete only keys it set
// (its annotation, or gpuaffinity.io's own namespace), never another
// component's, never for a stale node or an empty placement; record
// what it owns.
func TestReconcile(t *testing.T) {
	tray := Node{Name: "t1", Cloud: "baremetal", Tiers: []string{"leaf1", "spine1"}, Clique: "u.7"}
	tests := []struct {
		name    string
		n       Node
		cur     NodeMeta
		changed bool
		set     map[string]string
		remove  []string
		owned   *string
		warn    string
	}{
		{
			name:    "a node never labelled",
			n:       tray,
			cur:     NodeMeta{Name: "t1", ResourceVersion: "5"},
			changed: true,
			set:     map[string]string{"gpuaffinity.io/network.tier-0": "leaf1", "gpuaffinity.io/network.tier-1": "spine1", "nvidia.com/gpu.clique": "u.7"},
			owned:   ptr("gpuaffinity.io/network.tier-0,gpuaffinity.io/network.tier-1,nvidia.com/gpu.clique"),
		},
		{
			name: "labelled alike: nothing to send",
			n:    tray,
			cur: NodeMeta{Name: "t1", Labels: map[string]string{"gpuaffinity.io/network.tier-0": "leaf1", "gpuaffinity.io/network.tier-1": "spine1", "nvidia.com/gpu.clique": "u.7"},
				Owned: []string{"gpuaffinity.io/network.tier-0", "gpuaffinity.io/network.tier-1", "nvidia.com/gpu.clique"}, OwnedSet: true},
		},
		{
			name: "GFD's clique differs: left, warned",
			n:    tray,
			cur: NodeMeta{Name: "t1", Labels: map[string]string{"gpuaffinity.io/network.tier-0": "leaf1", "gpuaffinity.io/network.tier-1": "spine1", "nvidia.com/gpu.clique": "u.8"},
				Owned: []string{"gpuaffinity.io/network.tier-0", "gpuaffinity.io/network.tier-1"}, OwnedSet: true},
			warn: `label nvidia.com/gpu.clique="u.8" is GPU Feature Discovery's; left as it is`,
		},
		{
			name: "our clique, now another: updated",
			n:    tray,
			cur: NodeMeta{Name: "t1", Labels: map[string]string{"gpuaffinity.io/network.tier-0": "leaf1", "gpuaffinity.io/network.tier-1": "spine1", "nvidia.com/gpu.clique": "u.8"},
				Owned: []string{"gpuaffinity.io/network.tier-0", "gpuaffinity.io/network.tier-1", "nvidia.com/gpu.clique"}, OwnedSet: true},
			changed: true,
			set:     map[string]string{"nvidia.com/gpu.clique": "u.7"},
		},
		{
			name: "left its domain: our keys deleted, GFD's clique never",
			n:    Node{Name: "t1", Cloud: "baremetal", Tiers: []string{"leaf1"}},
			cur: NodeMeta{Name: "t1", Labels: map[string]string{"gpuaffinity.io/network.tier-0": "leaf1", "gpuaffinity.io/network.tier-1": "spine1", "nvidia.com/gpu.clique": "u.7", "gpuaffinity.io/gpu-memory-fabric": "f"},
				Owned: []string{"gpuaffinity.io/network.tier-0", "gpuaffinity.io/network.tier-1", "nvidia.com/gpu.clique"}, OwnedSet: true},
			changed: true,
			remove:  []string{"gpuaffinity.io/gpu-memory-fabric", "gpuaffinity.io/network.tier-1"},
			owned:   ptr("gpuaffinity.io/network.tier-0,nvidia.com/gpu.clique"),
		},
		{
			name: "a key of topograph's it did not set: not deleted",
			n:    Node{Name: "t1", Tiers: []string{"leaf1"}},
			cur:  NodeMeta{Name: "t1", Labels: map[string]string{"fabric.topograph.run/tier-0": "leaf1", "fabric.topograph.run/tier-1": "spine"}},
		},
		{
			name: "stale: nothing deleted",
			n:    Node{Name: "t1", Cloud: "baremetal", Tiers: []string{"leaf1"}, Stale: true},
			cur: NodeMeta{Name: "t1", Labels: map[string]string{"gpuaffinity.io/network.tier-0": "leaf1", "gpuaffinity.io/network.tier-1": "spine1"},
				Owned: []string{"gpuaffinity.io/network.tier-0", "gpuaffinity.io/network.tier-1"}, OwnedSet: true},
		},
		{
			name: "empty placement: nothing deleted",
			n:    Node{Name: "t1", Cloud: "gcp"},
			cur: NodeMeta{Name: "t1", Labels: map[string]string{"cloud.google.com/gce-topology-block": "b", "gpuaffinity.io/gpu-memory-fabric": "f"},
				Owned: []string{"gpuaffinity.io/gpu-memory-fabric"}, OwnedSet: true},
		},
		{
			name: "GKE's keys absent: set and owned",
			n:    Node{Name: "v1", Cloud: "gcp", Tiers: []string{"sb", "b"}, HostID: "h"},
			cur:  NodeMeta{Name: "v1", Labels: map[string]string{"cloud.google.com/gce-topology-block": "b", "cloud.google.com/gce-topology-subblock": "sb"}},
			set:  map[string]string{"cloud.google.com/gce-topology-host": "h"}, changed: true,
			owned: ptr("cloud.google.com/gce-topology-host"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := SchemeCloud
			if strings.Contains(tt.name, "topograph") {
				s = SchemeTopograph
			}
			p, changed, warns := Reconcile(tt.n, s, tt.cur)
			if changed != tt.changed {
				t.Errorf("changed = %v, want %v (patch %s)", changed, tt.changed, p.Body())
			}
			if tt.set == nil {
				tt.set = map[string]string{}
			}
			if d := cmp.Diff(tt.set, p.Labels); d != "" {
				t.Errorf("set (-want +got):\n%s", d)
			}
			if !slices.Equal(tt.remove, p.Remove) {
				t.Errorf("remove %q, want %q", p.Remove, tt.remove)
			}
			if (tt.owned == nil) != (p.Owned == nil) || tt.owned != nil && *tt.owned != *p.Owned {
				t.Errorf("owned %v, want %v", deref(p.Owned), deref(tt.owned))
			}
			if tt.warn == "" && len(warns) > 0 || tt.warn != "" && (len(warns) != 1 || !strings.Contains(warns[0], tt.warn)) {
				t.Errorf("warnings %q, want %q", warns, tt.warn)
			}
		})
	}
	// The patch: labels, annotation and the resourceVersion precondition.
	p, _, _ := Reconcile(tray, SchemeCloud, NodeMeta{Name: "t1", ResourceVersion: "5"})
	want := `{"metadata":{"annotations":{"gpuaffinity.io/fleet-labels":"gpuaffinity.io/network.tier-0,gpuaffinity.io/network.tier-1,nvidia.com/gpu.clique"},` +
		`"labels":{"gpuaffinity.io/network.tier-0":"leaf1","gpuaffinity.io/network.tier-1":"spine1","nvidia.com/gpu.clique":"u.7"},"resourceVersion":"5"}}`
	if got := string(p.Body()); got != want {
		t.Errorf("body %s\nwant %s", got, want)
	}
}

func ptr(s string) *string { return &s }

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
