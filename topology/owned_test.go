package topology

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// productFiles calls f with the path and text of every non-test Go file
// of the repository outside this package.
func productFiles(t *testing.T, f func(path, text string)) {
	t.Helper()
	srcfiles.Product(t, "..", f, "topology")
}

// TestXGMIOneOwner fails when a second rule for "two AMD GPUs share a
// direct XGMI link" appears outside this package: health and the
// exporter once each kept their own (a loop over a GPU's XGMILinks, a
// test of Hops against 1). They must ask XGMIDirect, XGMIHops or
// DirectXGMIPeers.
func TestXGMIOneOwner(t *testing.T) {
	tells := []*regexp.Regexp{
		regexp.MustCompile(`range [^\n]*\.XGMILinks\b`),
		regexp.MustCompile(`\.Hops\s*[!=<>]=?\s*1\b`),
		regexp.MustCompile(`\bfunc xgmi(Hops|Between)\(`),
	}
	productFiles(t, func(p, text string) {
		for _, re := range tells {
			if m := re.FindString(text); m != "" {
				t.Errorf("%s decides XGMI directness itself (%q): use topology.XGMIDirect", p, m)
			}
		}
	})
}

// TestNVLinkCliqueOwned fails when the node's NVLink clique is derived
// anywhere but NVLinkClique (health once held it, and fleet imported
// health for it).
func TestNVLinkCliqueOwned(t *testing.T) {
	productFiles(t, func(p, text string) {
		if strings.Contains(text, "func NVLinkClique(") {
			t.Errorf("%s has its own NVLinkClique: use topology.NVLinkClique", p)
		}
	})
}

// TestSocketInterfaceOwned fails when the node's socket interface is
// chosen outside SocketInterface: nccl once read the default route itself
// and fell back further than the front-end role (on a RoCE LAG node with
// no route table it named a bond slave with no address). Outside this
// package the route's interface may only be set (discover) or read from
// the root (rdma.DefaultRouteInterface), never read off a Node.
func TestSocketInterfaceOwned(t *testing.T) {
	read := regexp.MustCompile(`\.DefaultRouteInterface\b(\s*[^\s=(]|\s*==)`)
	if read.FindString("if n.DefaultRouteInterface != \"\" {") == "" || read.FindString("return n.DefaultRouteInterface\n}") == "" {
		t.Fatal("the tell-tale misses a read")
	}
	if read.FindString("n.DefaultRouteInterface = s.route") != "" || read.FindString("rdma.DefaultRouteInterface(root)") != "" {
		t.Fatal("the tell-tale takes a write or the reader for a read")
	}
	productFiles(t, func(p, text string) {
		if m := read.FindString(text); m != "" {
			t.Errorf("%s reads the default route's interface itself (%q): use topology.SocketInterface", p, m)
		}
	})
}

// XGMIDirect's both: each side must list the link, or either.
func TestXGMIDirect(t *testing.T) {
	gpu := func(bus string, links ...XGMILink) GPU {
		return GPU{BusID: bus, Vendor: VendorAMD, AMD: &AMDGPU{XGMILinks: links}}
	}
	a := gpu("0000:05:00.0", XGMILink{Peer: "0000:26:00.0", Hops: 1}, XGMILink{Peer: "0000:46:00.0", Hops: 1}, XGMILink{Peer: "0000:66:00.0", Hops: 2})
	b := gpu("0000:26:00.0", XGMILink{Peer: "0000:05:00.0", Hops: 1})
	c := gpu("0000:46:00.0") // lost its side of the link to a
	d := gpu("0000:66:00.0", XGMILink{Peer: "0000:05:00.0", Hops: 2})
	e := GPU{BusID: "0000:86:00.0", Vendor: VendorAMD} // not in KFD
	for _, tc := range []struct {
		name       string
		x, y       GPU
		both, want bool
	}{
		{"both list it", a, b, true, true},
		{"both list it, either", b, a, false, true},
		{"one side lost it", a, c, true, false},
		{"one side lost it, either", c, a, false, true},
		{"two hops", a, d, true, false},
		{"two hops, either", a, d, false, false},
		{"no KFD node", a, e, false, false},
	} {
		if got := XGMIDirect(tc.x, tc.y, tc.both); got != tc.want {
			t.Errorf("%s: XGMIDirect(%s, %s, %v) = %v, want %v", tc.name, tc.x.BusID, tc.y.BusID, tc.both, got, tc.want)
		}
	}
	if h := a.AMD.XGMIHops("0000:66:00.0"); h != 2 {
		t.Errorf("XGMIHops = %d, want 2", h)
	}
	if h := c.AMD.XGMIHops("0000:05:00.0"); h != 0 {
		t.Errorf("XGMIHops of a lost link = %d, want 0", h)
	}
	if n := a.AMD.DirectXGMIPeers(); n != 2 {
		t.Errorf("DirectXGMIPeers = %d, want 2", n)
	}
	if xgmiBetween(a, b) != 1 || xgmiBetween(a, c) != 0 {
		t.Errorf("xgmiBetween: %d %d, want 1 0", xgmiBetween(a, b), xgmiBetween(a, c))
	}
}
