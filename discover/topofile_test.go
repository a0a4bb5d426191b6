package discover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/ncclxml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// refFile returns a published topology file (copies of the shared
// research/nccl-topo-refs in ncclxml/testdata).
func refFile(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "ncclxml", "testdata", "nccl-topo-refs", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Azure's own ND H100 v5 file (azhpc-images topology/ndv5-topo.xml) puts
// GPU i and mlx5_ib i under one virtual switch: with it the pairs become
// PIX and decided, where sysfs alone gives NODE, undecided.
func TestTopoFileAzureNDv5(t *testing.T) {
	root := sharedRoot(t, "azure-nd-h100-v5")
	n, err := Discover(Options{Root: root, TopoFile: refFile(t, "azure-ndv5-topo.xml")})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Pairs) != 8 {
		t.Fatalf("pairs = %+v", n.Pairs)
	}
	for i, p := range n.Pairs {
		want := "mlx5_ib" + string(rune('0'+i))
		if p.GPU != i || !slices.Equal(p.NICs, []string{want}) || p.Class != topology.ClassPIX || !p.Decided {
			t.Errorf("GPU %d: %+v, want %s at PIX, decided", i, p, want)
		}
	}
	if n.TopoFile == "" || len(n.TopoFileDevices) != 16 {
		t.Errorf("topo file %q devices %v", n.TopoFile, n.TopoFileDevices)
	}
	// The file's hidden switches are not disagreements; the one NIC it
	// does not name (the Ethernet VF) is reported.
	var fileWarnings []string
	for _, w := range n.Warnings {
		if strings.Contains(w, "topology file") {
			fileWarnings = append(fileWarnings, w)
		}
	}
	if len(fileWarnings) != 1 || !strings.Contains(fileWarnings[0], "mlx5_an0") {
		t.Errorf("topology file warnings = %q", fileWarnings)
	}
	// GPU 0 to mlx5_ib1: two virtual switches under one CPU, as NCCL sees it.
	if c := n.PathClass(0, "mlx5_ib1"); c != topology.ClassPHB {
		t.Errorf("GPU0-mlx5_ib1 = %v, want PHB", c)
	}
	if c := n.PathClass(0, "mlx5_ib4"); c != topology.ClassSYS {
		t.Errorf("GPU0-mlx5_ib4 = %v, want SYS", c)
	}
}

// AWS's p4d file (aws-ofi-nccl topology/p4d-24xl-topo.xml): 2 GPUs and
// one EFA under each switch.
func TestTopoFileAWSp4d(t *testing.T) {
	root := sharedRoot(t, "aws-p4d")
	n, err := Discover(Options{Root: root, TopoFile: refFile(t, "aws-p4d-24xl-topo.xml")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"rdmap16s27", "rdmap16s27", "rdmap32s27", "rdmap32s27", "rdmap144s27", "rdmap144s27", "rdmap160s27", "rdmap160s27"}
	for i, p := range n.Pairs {
		if !slices.Equal(p.NICs, []string{want[i]}) || p.Class != topology.ClassPIX {
			t.Errorf("GPU %d: %+v, want %s at PIX", i, p, want[i])
		}
	}
}

// A file for another machine: it names none of our devices.
func TestTopoFileWrongMachine(t *testing.T) {
	root := sharedRoot(t, "dgx-h100")
	_, err := Discover(Options{Root: root, TopoFile: refFile(t, "azure-ndv5-topo.xml")})
	if err == nil || !strings.Contains(err.Error(), "names none") {
		t.Fatalf("want an error, got %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.xml")
	os.WriteFile(bad, []byte("<?xml version=\"1.0\"?>\n<system version=\"1\"/>\n"), 0o644)
	if _, err := Discover(Options{Root: root, TopoFile: bad}); err == nil || !strings.Contains(err.Error(), "bad.xml") {
		t.Fatalf("a malformed file must be an error naming it, got %v", err)
	}
	if _, err := Discover(Options{Root: root, TopoFile: filepath.Join(t.TempDir(), "nope.xml")}); err == nil {
		t.Fatal("a missing file must be an error")
	}
}

// A file that places a GPU under a different real switch than sysfs
// shows is reported, and the file wins.
func TestTopoFileDisagreement(t *testing.T) {
	root := sharedRoot(t, "dgx-h100")
	// DGX H100 GPU0 0000:1b:00.0 sits below switch 0000:16:00.0 with
	// mlx5_0; this file claims it sits directly below NUMA 1's CPU.
	f := filepath.Join(t.TempDir(), "topo.xml")
	os.WriteFile(f, []byte(`<system version="1">
  <cpu numaid="1" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:1b:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
  </cpu>
</system>
`), 0o644)
	n, err := Discover(Options{Root: root, TopoFile: f})
	if err != nil {
		t.Fatal(err)
	}
	if !hasWarning(n, "0000:1b:00.0 is below the CPU; sysfs says below") || !hasWarning(n, "on NUMA node 1; sysfs says 0") {
		t.Errorf("warnings %q", n.Warnings)
	}
	if n.Pairs[0].Class == topology.ClassPIX {
		t.Errorf("the file must win: pair %+v", n.Pairs[0])
	}
}

// On Azure the file the HPC image installs is used without a flag, and
// is what env points NCCL_TOPO_FILE at.
func TestTopoFileAzureInstalled(t *testing.T) {
	root := fakesystest.Root(t, "azure-nd-h100-v5")
	data, err := os.ReadFile(refFile(t, "azure-ndv5-topo.xml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "opt/microsoft/ndv5")
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "topo.xml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	n := discoverRoot(t, root)
	if n.TopoFile != "/opt/microsoft/ndv5/topo.xml" || n.Pairs[5].Class != topology.ClassPIX || n.Pairs[5].NICs[0] != "mlx5_ib5" {
		t.Errorf("topo file %q, pair %+v", n.TopoFile, n.Pairs[5])
	}
}

// withExtraGPU returns a topology file with a GPU leaf (0000:ff:00.0) the
// fixture machines do not have added below its first <cpu>.
func withExtraGPU(t *testing.T, data []byte) []byte {
	t.Helper()
	s := string(data)
	i := strings.Index(s, "<cpu ")
	j := strings.Index(s[i:], ">")
	if i < 0 || j < 0 {
		t.Fatal("no <cpu> in the file")
	}
	i += j + 1
	return []byte(s[:i] + "\n    <pci busid=\"0000:ff:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"/>" + s[i:])
}

// A vendor file found on the node that does not fit it is one warning
// naming the file and why, and is not used: discovery gives the sysfs
// answer. The same file named with --topo-file is an error naming it
// (except a file that lists a device the node lacks but places others,
// which the user asked for: a warning, as before).
func TestTopoFileFoundNotFitting(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(refFile(t, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	ndv5, p4d := read("azure-ndv5-topo.xml"), read("aws-p4d-24xl-topo.xml")
	const (
		azure    = "azure-nd-h100-v5"
		aws      = "aws-p4d"
		azureTop = "/opt/microsoft/ndv5/topo.xml"
		awsTop   = "/opt/amazon/ofi-nccl/share/aws-ofi-nccl/xml/p4d-24xl-topo.xml"
	)
	tests := []struct {
		name, machine, path string
		data                []byte
		size                int64  // > 0: a sparse file of this size instead of data
		why                 string // the warning is "topology file PATH: " + why + "; not used", the error "topology file PATH: " + why
		is                  error  // the explicit error wraps it
		explicitOK          bool   // with --topo-file the file is used, with a warning
	}{
		{name: "azure/aws file", machine: azure, path: azureTop, data: p4d,
			why: "names none of this node's devices (0 of 8 GPUs, 0 of 9 NICs)"},
		{name: "aws/azure file", machine: aws, path: awsTop, data: ndv5,
			why: "names none of this node's devices (0 of 8 GPUs, 0 of 8 NICs)"},
		{name: "azure/extra gpu", machine: azure, path: azureTop, data: withExtraGPU(t, ndv5), explicitOK: true,
			why: "lists 0000:ff:00.0 (class 0x030200), which this node does not have (it names 8 of 8 GPUs, 8 of 9 NICs)"},
		{name: "aws/extra gpu", machine: aws, path: awsTop, data: withExtraGPU(t, p4d), explicitOK: true,
			why: "lists 0000:ff:00.0 (class 0x030200), which this node does not have (it names 8 of 8 GPUs, 4 of 8 NICs)"},
		{name: "azure/malformed", machine: azure, path: azureTop, data: []byte("<system version=\"1\">\n  <cpu numaid=\"0\">\n"),
			why: "line 2: <cpu>: NCCL XML syntax error: unterminated element (no </cpu>)", is: ncclxml.ErrSyntax},
		{name: "aws/not a system", machine: aws, path: awsTop, data: []byte("<gpu dev=\"0\"/>\n"),
			why: "root element is <gpu>, want <system>"},
		{name: "azure/too large", machine: azure, path: azureTop, size: maxTopoFileSize + 1,
			why: fmt.Sprintf("more than %d bytes: file larger than read bound", maxTopoFileSize)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := fakesystest.Root(t, tc.machine)
			disk := filepath.Join(root, tc.path)
			if err := os.Remove(disk); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			base := discoverRoot(t, root)
			if base.TopoFile != "" {
				t.Fatalf("without the file, topo file %q", base.TopoFile)
			}
			os.MkdirAll(filepath.Dir(disk), 0o755)
			if err := os.WriteFile(disk, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.size > 0 {
				if err := os.Truncate(disk, tc.size); err != nil {
					t.Fatal(err)
				}
			}

			n, err := Discover(Options{Root: root})
			if err != nil {
				t.Fatalf("a found file that does not fit must not fail discovery: %v", err)
			}
			var extra []string
			for _, w := range n.Warnings {
				if !slices.Contains(base.Warnings, w) {
					extra = append(extra, w)
				}
			}
			if want := "topology file " + tc.path + ": " + tc.why + "; not used"; len(extra) != 1 || extra[0] != want {
				t.Errorf("new warnings %q, want one: %q", extra, want)
			}
			if len(n.Warnings) != len(base.Warnings)+1 {
				t.Errorf("%d warnings, want the %d of sysfs alone and one more", len(n.Warnings), len(base.Warnings))
			}
			if n.TopoFile != "" || n.TopoFileDevices != nil {
				t.Errorf("topo file %q devices %v, want none", n.TopoFile, n.TopoFileDevices)
			}
			if !reflect.DeepEqual(n.PCIDevices, base.PCIDevices) || !reflect.DeepEqual(n.Pairs, base.Pairs) {
				t.Errorf("the file changed the node: pairs %+v, want sysfs's %+v", n.Pairs, base.Pairs)
			}

			n, err = Discover(Options{Root: root, TopoFile: disk})
			if tc.explicitOK {
				if err != nil || n.TopoFile != disk || !hasWarning(n, "topology file "+disk+": lists 0000:ff:00.0 (class 0x030200), which this node does not have") {
					t.Errorf("--topo-file: err %v, topo file %q, warnings %q", err, n.TopoFile, n.Warnings)
				}
				return
			}
			if want := "topology file " + disk + ": " + tc.why; err == nil || err.Error() != want {
				t.Errorf("--topo-file: err %v, want %q", err, want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("--topo-file: err %v does not wrap %v", err, tc.is)
			}
		})
	}
}

// FuzzApplyTopoFile applies any bytes as a vendor topology file to a
// discovered node: it must not panic, and a file it refuses leaves the
// node exactly as it was (applyTopoFile's contract); one it takes still
// gives a node topology.Link can pair and JSON can carry.
func FuzzApplyTopoFile(f *testing.F) {
	for _, name := range []string{"azure-ndv5-topo.xml", "azure-ndv4-topo.xml", "aws-p4d-24xl-topo.xml", "aws-p5.48xl-topo-pr1226-unmerged.xml"} {
		b, err := os.ReadFile(filepath.Join("..", "ncclxml", "testdata", "nccl-topo-refs", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Add([]byte(`<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0"><gpu dev="0"/></pci></cpu></system>`), false)
	n, err := Discover(Options{Root: sharedRoot(f, "azure-nd-h100-v5")})
	if err != nil {
		f.Fatal(err)
	}
	base, err := json.Marshal(n)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, found bool) {
		var n topology.Node
		if err := json.Unmarshal(base, &n); err != nil {
			t.Fatal(err)
		}
		_, err := applyTopoFile(&n, data, nil, "/fuzz/topo.xml", found)
		if err != nil {
			after, merr := json.Marshal(n)
			if merr != nil || string(after) != string(base) {
				t.Fatalf("a refused file (%v) changed the node", err)
			}
			if !strings.Contains(err.Error(), "/fuzz/topo.xml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		topology.Link(&n, topology.RoleOptions{})
		if _, err := json.Marshal(n); err != nil {
			t.Fatal(err)
		}
	})
}
