package nccl

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuaffinity/gpuaffinity/ncclxml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// TestXMLAMDFacts: the RCCL file of each AMD fixture, by hand from the
// layout and RCCL's walk (rccl@0cbce2a src/graph/xml.cc
// ncclTopoGetXmlFromSys, the same a2/a4 rule as NCCL's: one pci per
// switch, named by its upstream port, the MI300X OAM's own bridge pair
// (1022:1500) counting as a switch).
func TestXMLAMDFacts(t *testing.T) {
	tests := []struct {
		machine string
		paths   map[string]string
		attrs   map[string]string
		leaves  int
		absent  []string
	}{
		{
			// AMD topology-mapping.md: GPU 0 00:01.1/01:00.0/02:00.0/
			// 03:00.0/04:00.0/05:00.0, its NIC 00:01.1/01:00.0/02:01.0/
			// 09:00.0; GPU 7 e0:01.1/e1:00.0/e2:02.0/e5:00.0/e6:00.0/
			// e7:00.0, its NIC e0:01.1/e1:00.0/e2:04.0/f1:00.0.
			machine: "amd-mi300x",
			paths: map[string]string{
				"0000:05:00.0": "cpu 0/0000:01:00.0/0000:03:00.0/0000:05:00.0",
				"0000:09:00.0": "cpu 0/0000:01:00.0/0000:09:00.0",
				"0000:e7:00.0": "cpu 1/0000:e1:00.0/0000:e5:00.0/0000:e7:00.0",
				"0000:f1:00.0": "cpu 1/0000:e1:00.0/0000:f1:00.0",
			},
			attrs: map[string]string{
				"0000:05:00.0|class":  "0x120000",
				"0000:05:00.0|vendor": "0x1002",
				"0000:05:00.0|device": "0x74a1",
				"0000:03:00.0|device": "0x1500",
				"cpu 0|familyid":      "175", // EPYC 9654: family 25 = 0xf + 0xa << 4
				"cpu 0|modelid":       "17",
			},
			leaves: 16,
			absent: []string{"0000:b9:00.0", "0000:b9:00.1"}, // the Broadcom front end
		},
		{
			machine: "amd-mi300x-pollara",
			paths: map[string]string{
				"0000:05:00.0": "cpu 0/0000:01:00.0/0000:03:00.0/0000:05:00.0",
				"0000:09:00.0": "cpu 0/0000:01:00.0/0000:09:00.0", // ionic_6
			},
			attrs:  map[string]string{"0000:09:00.0|vendor": "0x1dd8", "0000:09:00.0|device": "0x1002"},
			leaves: 16,
			absent: []string{"0000:b9:00.0"},
		},
		{
			// The RCCL VM model (topo_8p_940vm.xml): every GPU and NIC on
			// its own root bus, straight under its cpu; RCCL gives such a
			// function its own width (16), where NCCL reads 0.
			machine: "azure-nd-mi300x-v5",
			paths: map[string]string{
				"0011:00:00.0": "cpu 0/0011:00:00.0",
				"0010:00:00.0": "cpu 0/0010:00:00.0",
				"0081:00:00.0": "cpu 1/0081:00:00.0",
				"0080:00:00.0": "cpu 1/0080:00:00.0",
			},
			attrs: map[string]string{
				"0011:00:00.0|device":     "0x74b5",
				"0011:00:00.0|link_width": "16",
				"0010:00:00.0|link_width": "16",
				"cpu 0|affinity":          "00000000,0000ffff,ffffffff",
				"cpu 1|affinity":          "ffffffff,ffff0000,00000000",
			},
			leaves: 16,
		},
		{
			// OCI: GPU 11 under its OAM bridge 0f under the child switch
			// 0d under the top switch 08; NIC 0c (rdma0) under 0a under 08
			// (the fixture's sources).
			machine: "oci-bm-gpu-mi300x",
			paths: map[string]string{
				"0000:11:00.0": "cpu 0/0000:08:00.0/0000:0d:00.0/0000:0f:00.0/0000:11:00.0",
				"0000:0c:00.0": "cpu 0/0000:08:00.0/0000:0a:00.0/0000:0c:00.0",
				"0000:da:00.0": "cpu 1/0000:d1:00.0/0000:d6:00.0/0000:d8:00.0/0000:da:00.0",
			},
			leaves: 16,
			absent: []string{"0000:17:00.0", "0000:98:00.0"}, // mlx5_1, mlx5_6: front end
		},
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			n := fixtureNode(t, tt.machine)
			if d := XMLDialect(n); d != ncclxml.RCCL {
				t.Fatalf("dialect %v", d)
			}
			_, root := xmlRender(t, n, XMLOptions{})
			if v, _ := root.Value("version"); v != "2" {
				t.Errorf("version %q, want 2 (RCCL's NCCL_TOPO_XML_VERSION)", v)
			}
			for busid, want := range tt.paths {
				if got := xmlPath(root, busid); got != want {
					t.Errorf("%s: path %q, want %q", busid, got, want)
				}
			}
			for key, want := range tt.attrs {
				where, attr, _ := strings.Cut(key, "|")
				var e *ncclxml.Element
				if id, ok := strings.CutPrefix(where, "cpu "); ok {
					e = xmlFind(root, "numaid", id)
				} else {
					e = xmlFind(root, "busid", where)
				}
				if e == nil {
					t.Errorf("%s: not in the XML", where)
				} else if got, _ := e.Value(attr); got != want {
					t.Errorf("%s %s = %q, want %q", where, attr, got, want)
				}
			}
			if got := xmlLeafCount(root); got != tt.leaves {
				t.Errorf("%d leaves, want %d", got, tt.leaves)
			}
			for _, b := range tt.absent {
				if xmlFind(root, "busid", b) != nil {
					t.Errorf("%s is in the XML", b)
				}
			}
			// RCCL fills <gpu> (dev, sm, gcn, arch, rank, gdr) and its
			// <xgmi> links from HIP and KFD itself, and would trust a
			// value in the file: none is written.
			var walk func(e *ncclxml.Element)
			walk = func(e *ncclxml.Element) {
				if e.Name == "gpu" || e.Name == "xgmi" || e.Name == "nic" {
					t.Errorf("<%s> in the file", e.Name)
				}
				for _, c := range e.Children {
					walk(c)
				}
			}
			walk(root)
		})
	}
}

// TestXMLRCCLVMModel: the azure-nd-mi300x-v5 file has the very cpu and
// pci elements of RCCL's own MI300X VM model (the fixture's source), once
// what RCCL adds itself (<gpu>, <nic>) is taken out of the model.
func TestXMLRCCLVMModel(t *testing.T) {
	data, err := os.ReadFile("../ncclxml/testdata/rccl-topo-refs/topo_8p_940vm.xml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ncclxml.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	xmlStripNCCLOwn(want)
	_, got := xmlRender(t, fixtureNode(t, "azure-nd-mi300x-v5"), XMLOptions{})
	// The model keeps its elements in RCCL's (discovery) order; ours are
	// sorted by busid as RCCL sorts what it inserts itself.
	xmlSortRec(want)
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(ncclxml.Element{}, "Line", "Comment"), cmpopts.EquateEmpty()); d != "" {
		t.Errorf("differs from RCCL's VM model (-model +ours):\n%s", d)
	}
}

// TestXMLMixed: with NVIDIA and AMD GPUs the file is NCCL's (version 1),
// the AMD GPUs are left out, and a comment says so.
func TestXMLMixed(t *testing.T) {
	n := envMixedNode(t)
	if XMLDialect(n) != ncclxml.NCCL {
		t.Fatalf("dialect %v", XMLDialect(n))
	}
	text, root := xmlRender(t, n, XMLOptions{})
	if v, _ := root.Value("version"); v != "1" {
		t.Errorf("version %q", v)
	}
	for _, g := range n.GPUs {
		if found := xmlFind(root, "busid", g.BusID) != nil; found == g.IsAMD() {
			t.Errorf("GPU %d (%s, AMD %v): in the file %v", g.Index, g.BusID, g.IsAMD(), found)
		}
	}
	if !strings.Contains(root.Comment, "Left out: AMD GPU(s) 4 (0000:9d:00.0), 5 (0000:c3:00.0), 6 (0000:d1:00.0), 7 (0000:df:00.0)") ||
		!strings.HasPrefix(text, "<!-- NCCL's file (version 1)") {
		t.Errorf("comment %q", root.Comment)
	}
	// An NVIDIA-only node's file is unchanged: TestXMLGolden.

	// The mixed-h100-mi210 fixture, by hand from its spec: the H100
	// (01:00.0) and the ConnectX-7 (41:00.0) each straight under the one
	// cpu (a function right below a root port), the MI210 (23:00.0) and
	// its card's bridges (21:00.0) left out.
	_, root = xmlRender(t, fixtureNode(t, "mixed-h100-mi210"), XMLOptions{})
	for busid, want := range map[string]string{"0000:01:00.0": "cpu 0/0000:01:00.0", "0000:41:00.0": "cpu 0/0000:41:00.0", "0000:23:00.0": "", "0000:21:00.0": ""} {
		if got := xmlPath(root, busid); got != want {
			t.Errorf("mixed-h100-mi210 %s: path %q, want %q", busid, got, want)
		}
	}
	if !strings.Contains(root.Comment, "Left out: AMD GPU(s) 1 (0000:23:00.0).") {
		t.Errorf("mixed-h100-mi210 comment %q", root.Comment)
	}
}

// TestXMLRCCLNumaUnknown: RCCL reads a numa_node of -1 as 0 ("Workaround
// kernel bug", xml.cc) and gives a root-bus function its own link width;
// NCCL keeps -1 and width 0 (h200-vm's real dump).
func TestXMLRCCLNumaUnknown(t *testing.T) {
	n := fixtureNode(t, "h200-vm")
	n.GPUs[0].Vendor = topology.VendorAMD
	n.GPUs[0].AMD = &topology.AMDGPU{Ordinals: []int{0}}
	_, root := xmlRender(t, n, XMLOptions{})
	if got := xmlPath(root, "0000:00:06.0"); got != "cpu 0/0000:00:06.0" {
		t.Errorf("path %q, want cpu 0", got)
	}
	if e := xmlFind(root, "busid", "0000:00:06.0"); e == nil {
		t.Fatal("GPU not in the file")
	} else if w, _ := e.Value("link_width"); w != "16" {
		t.Errorf("link_width %q, want the device's own 16", w)
	}
	var b bytes.Buffer
	if err := TopologyXML(&b, fixtureNode(t, "h200-vm"), XMLOptions{}); err != nil || !strings.Contains(b.String(), `numaid="-1"`) || !strings.Contains(b.String(), `link_width="0"`) {
		t.Errorf("NCCL file changed: %v\n%s", err, b.String())
	}
	if slices.Contains([]ncclxml.Dialect{XMLDialect(topology.Node{})}, ncclxml.RCCL) {
		t.Error("a node without GPUs gets RCCL's file")
	}
}
