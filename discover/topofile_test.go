package discover

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/fakesys"
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
	root := fakesys.Root(t, "azure-nd-h100-v5")
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
