package nccl

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/ncclxml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

var xmlUpdate = flag.Bool("update", false, "rewrite the golden files under testdata/xml")

// xmlRender renders n and parses the result back.
func xmlRender(t *testing.T, n topology.Node, opts XMLOptions) (string, *ncclxml.Element) {
	t.Helper()
	var b bytes.Buffer
	if err := TopologyXML(&b, n, opts); err != nil {
		t.Fatalf("TopologyXML: %v", err)
	}
	if err := ncclxml.CheckFor(b.Bytes(), XMLDialect(n)); err != nil {
		t.Fatalf("ncclxml.CheckFor %v: %v\n%s", XMLDialect(n), err, b.String())
	}
	root, err := ncclxml.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), root
}

// xmlFind returns the element with this busid (pci) or numaid (cpu).
func xmlFind(e *ncclxml.Element, attr, value string) *ncclxml.Element {
	if v, ok := e.Value(attr); ok && v == value {
		return e
	}
	for _, c := range e.Children {
		if f := xmlFind(c, attr, value); f != nil {
			return f
		}
	}
	return nil
}

// xmlPath is the chain from the root down to the pci with busid, each
// step named "cpu N" or its busid: "cpu 0/0000:16:00.0/0000:1b:00.0".
func xmlPath(root *ncclxml.Element, busid string) string {
	var walk func(e *ncclxml.Element, path []string) []string
	walk = func(e *ncclxml.Element, path []string) []string {
		step := e.Name
		if v, ok := e.Value("busid"); ok {
			step = v
		} else if v, ok := e.Value("numaid"); ok {
			step = "cpu " + v
		}
		if e.Name != "system" {
			path = append(path, step)
		}
		if v, _ := e.Value("busid"); v == busid {
			return path
		}
		for _, c := range e.Children {
			if p := walk(c, slices.Clip(path)); p != nil {
				return p
			}
		}
		return nil
	}
	return strings.Join(walk(root, nil), "/")
}

func xmlLeafCount(e *ncclxml.Element) int {
	if e.Name == "pci" && len(e.Children) == 0 {
		return 1
	}
	n := 0
	for _, c := range e.Children {
		n += xmlLeafCount(c)
	}
	return n
}

// TestXMLFacts holds each fixture's XML to facts computed by hand from
// the machine's published layout and NCCL's walk (cpu → the switch
// upstream port → device; a device under a root port or on a root bus
// straight under the cpu).
func TestXMLFacts(t *testing.T) {
	tests := []struct {
		machine string
		paths   map[string]string // busid → path
		attrs   map[string]string // "busid|attr" or "cpu N|attr" → value
		leaves  int
		absent  []string
	}{
		{
			machine: "dgx-h100",
			paths: map[string]string{
				"0000:1b:00.0": "cpu 0/0000:16:00.0/0000:1b:00.0", // GPU0
				"0000:18:00.0": "cpu 0/0000:16:00.0/0000:18:00.0", // mlx5_0
				"0000:df:00.0": "cpu 1/0000:da:00.0/0000:df:00.0", // GPU7
				"0000:dc:00.0": "cpu 1/0000:da:00.0/0000:dc:00.0", // mlx5_11
			},
			attrs: map[string]string{
				"cpu 0|affinity":          "00000000,000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff",
				"cpu 0|familyid":          "6",
				"cpu 0|modelid":           "143",
				"0000:16:00.0|class":      "0x060400",
				"0000:16:00.0|link_width": "16",
				"0000:1b:00.0|link_speed": "32.0 GT/s PCIe",
				"0000:1b:00.0|device":     "0x2330",
			},
			leaves: 16,
			// Front-end RoCE (mlx5_1/2, mlx5_7/8) and the Intel NIC.
			absent: []string{"0000:29:00.0", "0000:aa:00.0", "0000:04:00.0"},
		},
		{
			machine: "aws-p5",
			paths: map[string]string{
				"0000:53:00.0": "cpu 0/0000:45:00.0/0000:53:00.0", // GPU0
				"0000:4f:00.0": "cpu 0/0000:45:00.0/0000:4f:00.0", // its 4 EFA
				"0000:50:00.0": "cpu 0/0000:45:00.0/0000:50:00.0",
				"0000:51:00.0": "cpu 0/0000:45:00.0/0000:51:00.0",
				"0000:52:00.0": "cpu 0/0000:45:00.0/0000:52:00.0",
				"0000:ca:00.0": "cpu 1/0000:bc:00.0/0000:ca:00.0", // GPU7
				"0000:c9:00.0": "cpu 1/0000:bc:00.0/0000:c9:00.0",
			},
			leaves: 40,
			absent: []string{"0000:47:00.0"}, // ENA front end
		},
		{
			machine: "azure-nd-h100-v5",
			paths: map[string]string{
				"0001:00:00.0": "cpu 0/0001:00:00.0",
				"0101:00:00.0": "cpu 0/0101:00:00.0",
				"000c:00:00.0": "cpu 1/000c:00:00.0",
				"0108:00:00.0": "cpu 1/0108:00:00.0",
			},
			attrs: map[string]string{
				"cpu 0|affinity":          "00000000,0000ffff,ffffffff", // as Azure's ndv5 file
				"cpu 1|affinity":          "ffffffff,ffff0000,00000000",
				"0001:00:00.0|link_width": "0", // root bus: NCCL reads no port width
				"0001:00:00.0|link_speed": "32.0 GT/s PCIe",
				"0101:00:00.0|class":      "0x020700",
			},
			leaves: 16,
			absent: []string{"cf63:00:02.0"}, // accelerated-networking VF
		},
		{
			machine: "oci-bm-gpu-h100",
			paths: map[string]string{
				// RP 07:01.0 → USP 08:00.0 → DSP 09:xx → USP 0a/0d → DSP → device.
				"0000:0f:00.0": "cpu 0/0000:08:00.0/0000:0d:00.0/0000:0f:00.0",
				"0000:0c:00.0": "cpu 0/0000:08:00.0/0000:0a:00.0/0000:0c:00.0", // mlx5_0+mlx5_1
				"0000:d8:00.0": "cpu 1/0000:d1:00.0/0000:d6:00.0/0000:d8:00.0",
			},
			attrs: map[string]string{
				// The first-level switch reports a 5.0 GT/s upstream link.
				"0000:08:00.0|link_speed": "5.0 GT/s PCIe",
				"0000:0d:00.0|link_speed": "32.0 GT/s PCIe",
			},
			leaves: 16,
			absent: []string{"0000:0c:00.1", "0000:17:00.0", "0000:98:00.0"},
		},
		{
			// aws-ofi-nccl's p4d file is installed and places the devices
			// (the fixture without it: TestXMLSynthesize): its switch
			// ffff:ff:01.0 holds GPUs 10:1c, 10:1d and the EFA 10:1b, and
			// its 8 GT/s x16 links bound the leaves'.
			machine: "aws-p4d",
			paths: map[string]string{
				"0000:10:1c.0": "cpu 0/ffff:ff:01.0/0000:10:1c.0",
				"0000:10:1b.0": "cpu 0/ffff:ff:01.0/0000:10:1b.0", // EFA keeps its own function
				"0000:a0:1d.0": "cpu 1/ffff:ff:04.0/0000:a0:1d.0",
			},
			attrs: map[string]string{
				"cpu 0|affinity":          "000000ff,ffff0000,00ffffff", // as AWS's p4d file
				"0000:10:1c.0|link_speed": "8 GT/s",
				"0000:10:1c.0|link_width": "16",
			},
			leaves: 12,
			absent: []string{"0000:10:00.0"}, // ENA
		},
		{
			machine: "gcp-a3-mega",
			paths: map[string]string{
				"0000:04:00.0": "cpu 0/0000:01:00.0/0000:04:00.0",
				"0000:06:00.0": "cpu 0/0000:01:00.0/0000:06:00.0",
				"0000:8e:00.0": "cpu 1/0000:88:00.0/0000:8e:00.0",
			},
			leaves: 16,
			absent: []string{"0000:00:0c.0"},
		},
		{
			machine: "grace-hopper",
			paths: map[string]string{
				"0009:01:00.0": "cpu 0/0009:01:00.0",
				"0000:01:00.0": "cpu 0/0000:01:00.0",
			},
			attrs: map[string]string{
				"cpu 0|arch":              "arm64",
				"0009:01:00.0|link_width": "16",
			},
			leaves: 2,
		},
		{
			// GB200 NVL72 tray: every GPU and NIC on a root complex (PCI
			// domain) of its own; a GPU right below its root port hangs off
			// its Grace's cpu, a ConnectX-7 two bridges down (bus 03) under
			// the bridge at bus 01; the BlueField-3 front-end ports are not
			// compute and stay out.
			machine: "gb200-nvl72-tray",
			paths: map[string]string{
				"0008:01:00.0": "cpu 0/0008:01:00.0",              // GPU0
				"0000:03:00.0": "cpu 0/0000:01:00.0/0000:03:00.0", // mlx5_0
				"0019:01:00.0": "cpu 1/0019:01:00.0",              // GPU3
				"0012:03:00.0": "cpu 1/0012:01:00.0/0012:03:00.0", // mlx5_5
			},
			attrs: map[string]string{
				"cpu 0|arch":              "arm64",
				"cpu 1|affinity":          "0000ffff,ffffffff,ffffff00,00000000,00000000", // CPUs 72-143 of 144
				"0008:01:00.0|device":     "0x2941",
				"0008:01:00.0|link_width": "16",
				"0000:03:00.0|class":      "0x020700",
			},
			leaves: 8,
			absent: []string{"0006:01:00.0", "0006:03:00.0", "0006:03:00.1", "0016:03:00.0", "0016:03:00.1"},
		},
		{
			machine: fakesys.H200VM,
			paths:   map[string]string{"0000:00:06.0": "cpu -1/0000:00:06.0"},
			attrs: map[string]string{
				"0000:00:06.0|link_width": "0",
				"cpu -1|modelid":          "207",
			},
			leaves: 1,
			absent: []string{"0000:00:03.0"}, // virtio eth0
		},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.machine] = true
		t.Run(tt.machine, func(t *testing.T) {
			t.Parallel()
			_, root := xmlRender(t, fixtureNode(t, tt.machine), XMLOptions{})
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
					continue
				}
				if got, _ := e.Value(attr); got != want {
					t.Errorf("%s %s = %q, want %q", where, attr, got, want)
				}
			}
			if got := xmlLeafCount(root); got != tt.leaves {
				t.Errorf("%d leaves, want %d", got, tt.leaves)
			}
			for _, busid := range tt.absent {
				if xmlFind(root, "busid", busid) != nil {
					t.Errorf("%s is in the XML; it is not a compute device", busid)
				}
			}
			if n := root.Count(); n >= ncclxml.MaxNodes/2 {
				t.Errorf("%d elements leave NCCL too little room for its own", n)
			}
		})
	}
	for _, m := range foundationFixtures {
		if !seen[m] {
			t.Errorf("fixture %s has no facts here", m)
		}
	}
}

// TestXMLMatchesNCCLWalk rebuilds, for every fixture, the tree that
// NCCL's own sysfs reader (ncclTopoGetXmlFromSys) makes from the built
// fake root, by walking the resolved /sys path strings and reading the
// files as NCCL does; the XML must equal it in every cpu and pci element
// and attribute (arch/vendor/familyid/modelid come from CPUID in NCCL and
// are left out of the comparison).
func TestXMLMatchesNCCLWalk(t *testing.T) {
	for _, name := range fakesys.Machines() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := fakesystest.Root(t, name)
			n, err := discover.Discover(discover.Options{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			if n.TopoFile != "" {
				// The platform's own topology file is installed (aws-p4d):
				// NCCL is given that file, not its sysfs walk, and the XML
				// follows the file (TestXMLFacts).
				return
			}
			_, got := xmlRender(t, n, XMLOptions{})
			var leaves []string
			var collect func(e *ncclxml.Element)
			collect = func(e *ncclxml.Element) {
				if e.Name == "pci" && len(e.Children) == 0 {
					v, _ := e.Value("busid")
					leaves = append(leaves, v)
				}
				for _, c := range e.Children {
					collect(c)
				}
			}
			collect(got)
			want := xmlNCCLWalk(t, root, leaves, XMLDialect(n))
			for _, cpu := range got.Children {
				cpu.Attrs = slices.DeleteFunc(cpu.Attrs, func(a ncclxml.Attr) bool {
					return slices.Contains([]string{"arch", "vendor", "familyid", "modelid"}, a.Name)
				})
			}
			// A comment (the AMD GPUs left out of a mixed node's file) is
			// not part of the tree NCCL builds.
			if d := cmp.Diff(want, got, cmpopts.IgnoreFields(ncclxml.Element{}, "Line", "Comment")); d != "" {
				t.Errorf("XML differs from NCCL's walk (-nccl +ours):\n%s", d)
			}
		})
	}
}

// xmlNCCLWalk is a transcription of what ncclTopoGetXmlFromSys does for
// each leaf busid, over the files under root/sys. For RCCL (rccl@0cbce2a
// src/graph/xml.cc) three things differ: the root is version 2, a
// numa_node of -1 is read as "0" ("Workaround kernel bug"), and an empty
// "../max_link_width" gives the port the device's own width.
func xmlNCCLWalk(t *testing.T, root string, leaves []string, dialect ncclxml.Dialect) *ncclxml.Element {
	t.Helper()
	sys := filepath.Join(root, "sys")
	read := func(path string) string { // ncclTopoGetStrFromSys: drops the last byte
		data, err := os.ReadFile(path)
		if err != nil || len(data) == 0 {
			return ""
		}
		return string(data[:len(data)-1])
	}
	gts := func(s string) (float64, bool) {
		var f float64
		_, err := fmt.Sscanf(s, "%g GT/s", &f)
		return f, err == nil || f != 0
	}
	rccl := dialect == ncclxml.RCCL
	version := "1"
	if rccl {
		version = "2"
	}
	system := &ncclxml.Element{Name: "system", Attrs: []ncclxml.Attr{{Name: "version", Value: version}}}
	nodes := map[string]*ncclxml.Element{}
	placed := map[*ncclxml.Element]bool{}
	var fill func(busid, path string)
	fill = func(busid, path string) {
		e := nodes[busid]
		if e == nil {
			e = &ncclxml.Element{Name: "pci", Attrs: []ncclxml.Attr{{Name: "busid", Value: busid}}}
			nodes[busid] = e
			for _, a := range []string{"class", "vendor", "device", "subsystem_vendor", "subsystem_device"} {
				if v := read(filepath.Join(path, a)); v != "" {
					e.Attrs = append(e.Attrs, ncclxml.Attr{Name: a, Value: v})
				}
			}
			devS, portS := read(filepath.Join(path, "max_link_speed")), read(filepath.Join(path, "../max_link_speed"))
			speed := devS
			if p, ok := gts(portS); ok {
				if d, ok := gts(devS); !ok || p < d {
					speed = portS
				}
			}
			dw, _ := strconv.Atoi(read(filepath.Join(path, "max_link_width")))
			portW := read(filepath.Join(path, "../max_link_width"))
			pw, _ := strconv.Atoi(portW)
			if rccl && portW == "" {
				pw = dw
			}
			e.Attrs = append(e.Attrs, ncclxml.Attr{Name: "link_speed", Value: speed}, ncclxml.Attr{Name: "link_width", Value: strconv.Itoa(min(dw, pw))})
		}
		if placed[e] {
			return
		}
		placed[e] = true
		numa := read(filepath.Join(path, "numa_node"))
		if rccl && numa == "-1" {
			numa = "0"
		}
		p := path
		for slash := 1; ; slash++ {
			p = filepath.Dir(p)
			comp := filepath.Base(p)
			if !xmlIsBDF(comp) {
				cpu := xmlFind(system, "numaid", numa)
				if cpu == nil {
					cpu = &ncclxml.Element{Name: "cpu", Attrs: []ncclxml.Attr{{Name: "numaid", Value: numa}}}
					if aff := read(filepath.Join(sys, "devices/system/node/node"+numa, "cpumap")); aff != "" {
						cpu.Attrs = append(cpu.Attrs, ncclxml.Attr{Name: "affinity", Value: aff})
					}
					system.Children = append(system.Children, cpu)
				}
				cpu.Children = append(cpu.Children, e)
				return
			}
			if slash == 2 {
				fill(comp, p)
				nodes[comp].Children = append(nodes[comp].Children, e)
				return
			}
		}
	}
	for _, busid := range leaves {
		path, err := filepath.EvalSymlinks(filepath.Join(sys, "bus/pci/devices", busid))
		if err != nil {
			t.Fatalf("%s: %v", busid, err)
		}
		fill(busid, path)
	}
	slices.SortFunc(system.Children, func(a, b *ncclxml.Element) int {
		x, _ := a.Value("numaid")
		y, _ := b.Value("numaid")
		i, _ := strconv.Atoi(x)
		j, _ := strconv.Atoi(y)
		return i - j
	})
	xmlSortRec(system)
	return system
}

// xmlIsBDF is NCCL's checkBDFFormat.
func xmlIsBDF(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, c := range s {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

func xmlDropAttrs(e *ncclxml.Element, names ...string) {
	e.Attrs = slices.DeleteFunc(e.Attrs, func(a ncclxml.Attr) bool { return slices.Contains(names, a.Name) })
	for _, c := range e.Children {
		xmlDropAttrs(c, names...)
	}
}

// xmlStripNCCLOwn removes what NCCL adds on its own: host_hash and keep
// attributes, and gpu and nic elements.
func xmlStripNCCLOwn(e *ncclxml.Element) {
	xmlDropAttrs(e, "host_hash", "keep")
	var strip func(e *ncclxml.Element)
	strip = func(e *ncclxml.Element) {
		e.Children = slices.DeleteFunc(e.Children, func(c *ncclxml.Element) bool { return c.Name == "gpu" || c.Name == "nic" })
		for _, c := range e.Children {
			strip(c)
		}
	}
	strip(e)
}

const xmlH200Dump = "testdata/xml/h200-vm.nccl-dump.xml"

// TestXMLH200Capture: on the real H200 guest, NCCL 2.28.9 dumped
// testdata/xml/h200-vm.nccl-dump.xml (a copy of the shared
// fixtures/h200-vm/nccl-topo-dump.xml). Without what NCCL adds
// itself (host_hash, keep, <gpu>, <nic>), our XML equals it element for
// element and attribute for attribute, in order.
func TestXMLH200Capture(t *testing.T) {
	data, err := os.ReadFile(xmlH200Dump)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ncclxml.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	xmlStripNCCLOwn(want)
	_, got := xmlRender(t, fixtureNode(t, fakesys.H200VM), XMLOptions{})
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(ncclxml.Element{}, "Line"), cmpopts.EquateEmpty()); d != "" {
		t.Errorf("XML differs from NCCL's dump (-dump +ours):\n%s", d)
	}
}

// TestXMLSynthesizeAzure: on ND H100 v5 the GPUs and NICs each sit on
// their own Hyper-V root bus (NODE); with SynthesizeSwitches GPU i and
// mlx5_ib i share a virtual switch ffff:ff:0(i+1).0, as in Azure's own
// ndv5 file.
func TestXMLSynthesizeAzure(t *testing.T) {
	n := fixtureNode(t, "azure-nd-h100-v5")
	text, root := xmlRender(t, n, XMLOptions{SynthesizeSwitches: true})
	for i, g := range n.GPUs {
		nic := n.NICs[slices.IndexFunc(n.NICs, func(x topology.NIC) bool { return x.Name == fmt.Sprintf("mlx5_ib%d", i) })]
		sw := fmt.Sprintf("ffff:ff:%02x.0", i+1)
		numa := strconv.Itoa(*g.NUMANode)
		for _, bus := range []string{g.BusID, nic.BusID} {
			if got, want := xmlPath(root, bus), "cpu "+numa+"/"+sw+"/"+bus; got != want {
				t.Errorf("GPU %d: %s at %q, want %q", i, bus, got, want)
			}
		}
		e := xmlFind(root, "busid", sw)
		for attr, want := range map[string]string{"class": "0x060400", "vendor": "0x0000", "link_speed": "32.0 GT/s PCIe", "link_width": "16"} {
			if got, _ := e.Value(attr); got != want {
				t.Errorf("%s %s = %q, want %q", sw, attr, got, want)
			}
		}
		if !strings.Contains(e.Comment, "inferred from gpuaffinity's GPU-NIC pairing") ||
			!strings.Contains(e.Comment, fmt.Sprintf("GPU %d %s + mlx5_ib%d %s: pair class NODE, undecided", i, g.BusID, i, nic.BusID)) {
			t.Errorf("%s comment %q", sw, e.Comment)
		}
	}
	if !strings.Contains(text, "<!-- Virtual switch, not on the PCI bus") {
		t.Errorf("no comment line in\n%s", text)
	}
}

// TestXMLSynthesize covers the other shapes: p4d (two GPUs share one EFA:
// one switch for the three, as in AWS's own p4d file), machines whose
// pairs already share a switch, and a C2C GPU (nothing changes).
func TestXMLSynthesize(t *testing.T) {
	// p4d as sysfs shows it, without aws-ofi-nccl's file installed.
	spec, err := fakesys.Machine("aws-p4d")
	if err != nil {
		t.Fatal(err)
	}
	spec.Files = nil
	dir := t.TempDir()
	if err := fakesys.Build(spec, dir); err != nil {
		t.Fatal(err)
	}
	n, err := discover.Discover(discover.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	if n.TopoFile != "" || n.Pairs[1].Class != topology.ClassPHB {
		t.Fatalf("p4d without its file: topo file %q, GPU 1 pair %+v", n.TopoFile, n.Pairs[1])
	}
	_, root := xmlRender(t, n, XMLOptions{SynthesizeSwitches: true})
	for bus, want := range map[string]string{
		"0000:10:1b.0": "cpu 0/ffff:ff:01.0/0000:10:1b.0",
		"0000:10:1c.0": "cpu 0/ffff:ff:01.0/0000:10:1c.0",
		"0000:10:1d.0": "cpu 0/ffff:ff:01.0/0000:10:1d.0",
		"0000:a0:1d.0": "cpu 1/ffff:ff:04.0/0000:a0:1d.0",
	} {
		if got := xmlPath(root, bus); got != want {
			t.Errorf("p4d %s at %q, want %q", bus, got, want)
		}
	}
	if sw := xmlFind(root, "busid", "ffff:ff:01.0"); sw == nil || !strings.Contains(sw.Comment, "GPU 1 0000:10:1d.0 + rdmap16s27 0000:10:1b.0: pair class PHB, decided") {
		t.Errorf("p4d switch 1: %+v", sw)
	}
	// grace-hopper, gb200-nvl72-tray: the GPUs reach the CPU over C2C;
	// not grouped, though their pairs are NODE.
	for _, m := range []string{"dgx-h100", "aws-p5", "oci-bm-gpu-h100", "gcp-a3-mega", "grace-hopper", "gb200-nvl72-tray"} {
		n := fixtureNode(t, m)
		plain, _ := xmlRender(t, n, XMLOptions{})
		synth, _ := xmlRender(t, n, XMLOptions{SynthesizeSwitches: true})
		if plain != synth {
			t.Errorf("%s: SynthesizeSwitches changed a machine whose pairs share switches:\n%s", m, synth)
		}
	}
}

// TestXMLSynthesizeSkipsSYS: a GPU whose only compute NIC is on the other
// socket is not moved beside it.
func TestXMLSynthesizeSkipsSYS(t *testing.T) {
	n := fixtureNode(t, "azure-nd-h100-v5")
	for i := range n.Pairs {
		n.Pairs[i].Class = topology.ClassSYS
	}
	plain, _ := xmlRender(t, n, XMLOptions{})
	synth, _ := xmlRender(t, n, XMLOptions{SynthesizeSwitches: true})
	if plain != synth {
		t.Errorf("SYS pairs were grouped:\n%s", synth)
	}
}

// TestXMLGolden compares each fixture's XML with testdata/xml/<name>.xml
// (and <name>.synth.xml with SynthesizeSwitches); -update rewrites them.
func TestXMLGolden(t *testing.T) {
	for _, name := range fakesys.Machines() {
		for _, synth := range []bool{false, true} {
			file := filepath.Join("testdata/xml", name+".xml")
			if synth {
				file = filepath.Join("testdata/xml", name+".synth.xml")
			}
			t.Run(filepath.Base(file), func(t *testing.T) {
				got, _ := xmlRender(t, fixtureNode(t, name), XMLOptions{SynthesizeSwitches: synth})
				if *xmlUpdate {
					if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (run go test -run TestXMLGolden -update)", err)
				}
				if d := cmp.Diff(string(want), got); d != "" {
					t.Errorf("%s differs (-file +got):\n%s", file, d)
				}
			})
		}
	}
}

// TestXMLTopoFile: after --topo-file applies Azure's ndv5 file, the XML
// has the file's tree (GPU i and mlx5_ib i under ffff:ff:0(i+1).0, with
// the file's x16 links), not the flat one sysfs gives.
func TestXMLTopoFile(t *testing.T) {
	const ref = "../ncclxml/testdata/nccl-topo-refs/azure-ndv5-topo.xml"
	data, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ncclxml.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	n, err := discover.Discover(discover.Options{Root: fakesystest.Root(t, "azure-nd-h100-v5"), TopoFile: ref})
	if err != nil {
		t.Fatal(err)
	}
	_, got := xmlRender(t, n, XMLOptions{})
	// Same elements, same nesting, same busids; Azure's file orders the
	// attributes differently and leaves out the leaves' ids.
	shape := func(e *ncclxml.Element) string {
		var b strings.Builder
		var walk func(e *ncclxml.Element, depth int)
		walk = func(e *ncclxml.Element, depth int) {
			id, _ := e.Value("busid")
			if e.Name == "cpu" {
				id, _ = e.Value("numaid")
			}
			lw, _ := e.Value("link_width")
			fmt.Fprintf(&b, "%s%s %s %s\n", strings.Repeat(" ", depth), e.Name, id, lw)
			for _, c := range e.Children {
				walk(c, depth+1)
			}
		}
		walk(e, 0)
		return b.String()
	}
	if d := cmp.Diff(shape(want), shape(got)); d != "" {
		t.Errorf("tree differs from Azure's file (-file +ours):\n%s", d)
	}
}

func TestXMLErrors(t *testing.T) {
	n := fixtureNode(t, "dgx-h100")
	n.GPUs[0].BusID = "0000:ee:00.0"
	var b bytes.Buffer
	if err := TopologyXML(&b, n, XMLOptions{}); err == nil || !strings.Contains(err.Error(), "GPU 0 (0000:ee:00.0)") || b.Len() > 0 {
		t.Errorf("TopologyXML with a GPU off the bus: %v, wrote %d bytes", err, b.Len())
	}
	// An x86 CPU without vendor or family: NCCL fills all four from CPUID.
	n = fixtureNode(t, "dgx-h100")
	n.CPU.Vendor = ""
	_, root := xmlRender(t, n, XMLOptions{})
	if _, ok := root.Children[0].Value("arch"); ok {
		t.Errorf("cpu %v: want no arch without a vendor", root.Children[0].Attrs)
	}
	// A parent loop in corrupt input ends the walk.
	n = fixtureNode(t, "dgx-h100")
	for i := range n.PCIDevices {
		switch n.PCIDevices[i].BusID {
		case "0000:15:01.0":
			n.PCIDevices[i].Parent = "0000:17:01.0"
		}
	}
	xmlRender(t, n, XMLOptions{})
}

func TestXMLCPUIDFamily(t *testing.T) {
	for f, want := range map[int]int{6: 6, 15: 15, 23: 143, 25: 175, 26: 191} {
		if got := xmlCPUIDFamily(f); got != want {
			t.Errorf("family %d: %d, want %d", f, got, want)
		}
	}
}

// TestXMLComputeNICsOnly: on every fixture the XML (which passes the
// loader checker, xmlRender) lists exactly the compute NICs, by the bus id
// NCCL names them with, and every GPU; storage, front-end and management
// NICs never appear.
func TestXMLComputeNICsOnly(t *testing.T) {
	for _, name := range fakesys.Machines() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := fixtureNode(t, name)
			_, root := xmlRender(t, n, XMLOptions{})
			want := map[string]bool{}
			for _, nic := range n.NICs {
				if nic.Role == topology.RoleCompute {
					want[nic.NCCLBusID()] = true
				}
			}
			got := map[string]bool{}
			var walk func(e *ncclxml.Element)
			walk = func(e *ncclxml.Element) {
				// A leaf of class 0x02 is a NIC; one of 0x080100 a
				// ConnectX-8 Data Direct function, where NCCL hangs the
				// NIC's <name>_dma.
				if class, _ := e.Value("class"); e.Name == "pci" && len(e.Children) == 0 && (strings.HasPrefix(class, "0x02") || class == "0x080100") {
					bus, _ := e.Value("busid")
					got[bus] = true
				}
				for _, c := range e.Children {
					walk(c)
				}
			}
			walk(root)
			if !maps.Equal(got, want) {
				t.Errorf("XML NICs %v, compute NICs %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
			for _, g := range n.GPUs {
				if g.IsAMD() && XMLDialect(n) == ncclxml.NCCL {
					continue // NCCL's file on a mixed node: TestXMLMixed
				}
				if xmlFind(root, "busid", g.BusID) == nil {
					t.Errorf("GPU %d (%s) is not in the XML", g.Index, g.BusID)
				}
			}
			for _, nic := range n.NICs {
				if nic.Role != topology.RoleCompute && !want[nic.NCCLBusID()] && xmlFind(root, "busid", nic.BusID) != nil {
					t.Errorf("%s NIC %s (%s) is in the XML", nic.Role, nic.Name, nic.BusID)
				}
			}
		})
	}
}
