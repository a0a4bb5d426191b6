package kfd

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

func addr(s string) *pci.Address {
	a, err := pci.ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return &a
}

func u32p(v uint32) *uint32 { return &v }

// wantMI300X is the machine of mi300x(), written out from its layout.
func wantMI300X() Topology {
	cpu := func(id int, gpus, far [4]int) Node {
		n := Node{ID: id, Props: Properties{CPUCoresCount: 192, MemBanksCount: 1, IOLinksCount: 5, P2PLinksCount: 4}}
		n.IOLinks = []Link{{Type: LinkHyperTransport, From: id, To: 1 - id, Weight: 32}}
		for _, g := range gpus {
			n.IOLinks = append(n.IOLinks, Link{Type: LinkPCIExpress, From: id, To: g, Weight: 20,
				MinBandwidth: 312, MaxBandwidth: 64000, Flags: LinkFlagEnabled | LinkFlagNonCoherent})
		}
		for _, g := range far {
			n.P2PLinks = append(n.P2PLinks, Link{Type: LinkPCIExpress, From: id, To: g, Weight: 52,
				Flags: LinkFlagEnabled | LinkFlagNonCoherent})
		}
		return n
	}
	t := Topology{
		System: SystemProperties{PlatformOEM: 2314885531281050945, PlatformID: 8241994366303052120, PlatformRev: 2},
		Nodes: []Node{
			cpu(0, [4]int{2, 3, 4, 5}, [4]int{6, 7, 8, 9}),
			cpu(1, [4]int{6, 7, 8, 9}, [4]int{2, 3, 4, 5}),
		},
	}
	pcis := []string{"0000:05:00.0", "0000:2b:00.0", "0000:5b:00.0", "0000:65:00.0",
		"0000:7d:00.0", "0000:a5:00.0", "0000:d5:00.0", "0000:e7:00.0"}
	locations := []uint32{0x0500, 0x2b00, 0x5b00, 0x6500, 0x7d00, 0xa500, 0xd500, 0xe700}
	for i := range 8 {
		id, socket := 2+i, 0
		if i >= 4 {
			socket = 1
		}
		n := Node{
			ID: id, GPUID: gpuIDs[i], Name: "ip discovery",
			Props: Properties{
				SIMDCount: 1216, SIMDPerCU: 4, MemBanksCount: 1, CachesCount: 459, IOLinksCount: 8, P2PLinksCount: 1,
				GFXTargetVersion: 90402, VendorID: 0x1002, DeviceID: 0x74a1, LocationID: locations[i],
				DRMRenderMinor: uint32(128 + i), HiveID: 12278230016431186561,
				NumSDMAEngines: 2, NumSDMAXGMIEngines: 14, UniqueID: uniqueIDs[i], NumXCC: 8,
			},
			IOLinks: []Link{{Type: LinkPCIExpress, From: id, To: socket, Weight: 20,
				MinBandwidth: 312, MaxBandwidth: 64000, Flags: LinkFlagEnabled}},
			P2PLinks: []Link{{Type: LinkPCIExpress, From: id, To: 1 - socket, Weight: 52, Flags: LinkFlagEnabled}},
			PCI:      addr(pcis[i]),
			DRM: DRM{
				XGMIDeviceID: xgmiDevIDs[i], XGMIPhysicalID: u32p(uint32(i)), XGMIHiveID: 12278230016431186561,
				RenderMinor: uint32(128 + i), ComputePartition: "SPX", MemoryPartition: "NPS1",
			},
		}
		for peer := 2; peer <= 9; peer++ {
			if peer != id {
				n.IOLinks = append(n.IOLinks, Link{Type: LinkXGMI, From: id, To: peer, Weight: 15,
					MinBandwidth: 50000, MaxBandwidth: 50000, Flags: LinkFlagEnabled})
			}
		}
		t.Nodes = append(t.Nodes, n)
	}
	return t
}

func TestReadTopologyMI300X(t *testing.T) {
	for name, root := range map[string]func(*testing.T) *rootfs.Root{
		"memory": func(*testing.T) *rootfs.Root { return mi300x().memory() },
		"disk":   func(t *testing.T) *rootfs.Root { return mi300x().diskRoot(t) },
	} {
		t.Run(name, func(t *testing.T) {
			got, errs := ReadTopology(root(t))
			for _, err := range errs {
				t.Errorf("unexpected error: %v", err)
			}
			if d := cmp.Diff(wantMI300X(), got); d != "" {
				t.Errorf("topology (-want +got):\n%s", d)
			}
		})
	}
}

// TestMI300XShape checks the published shape of the machine on what was
// read: 8 GPUs of gfx942, fully connected by single-hop XGMI (weight
// 15), each with one PCIe link (weight 20) to the CPU of its half.
func TestMI300XShape(t *testing.T) {
	top, errs := ReadTopology(mi300x().memory())
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	gpus := 0
	for _, n := range top.Nodes {
		if !n.IsGPU() {
			continue
		}
		gpus++
		if g := n.Props.GFXTarget(); g != "gfx942" {
			t.Errorf("node %d: GFXTarget %q, want gfx942", n.ID, g)
		}
		var xgmi, pcie []int
		for _, l := range n.IOLinks {
			switch {
			case l.XGMI() && l.Weight == 15:
				xgmi = append(xgmi, l.To)
			case l.PCIe() && l.Weight == 20:
				pcie = append(pcie, l.To)
			default:
				t.Errorf("node %d: unexpected link %+v", n.ID, l)
			}
		}
		if len(xgmi) != 7 || len(pcie) != 1 || pcie[0] != (n.ID-2)/4 {
			t.Errorf("node %d: XGMI to %v, PCIe to %v; want 7 XGMI peers and PCIe to CPU %d", n.ID, xgmi, pcie, (n.ID-2)/4)
		}
	}
	if gpus != 8 {
		t.Errorf("%d GPUs, want 8", gpus)
	}
}

func TestNoKFD(t *testing.T) {
	m := rootfs.NewMemory("empty")
	m.File("sys/bus/pci/devices/.keep", nil)
	top, errs := ReadTopology(m.Root())
	if len(top.Nodes) != 0 || errs != nil || top.System != (SystemProperties{}) {
		t.Errorf("root without KFD: %+v %v", top, errs)
	}
}

// TestCPUOnly is a two-socket machine with amdkfd loaded and no GPU:
// KFD still lists the CPU nodes.
func TestCPUOnly(t *testing.T) {
	tr := newTree()
	tr.link(kfdClass, "../../devices/virtual/kfd/kfd")
	for cpu := range 2 {
		n := node(cpu)
		tr.file(n+"/gpu_id", "0\n")
		tr.file(n+"/name", "\n")
		tr.file(n+"/properties", cpuProps(1, 0))
		tr.file(n+"/io_links/0/properties", linkProps(1, cpu, 1-cpu, 32, 0, 0, 0))
		tr.dir(n + "/p2p_links")
	}
	top, errs := ReadTopology(tr.memory())
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if len(top.Nodes) != 2 {
		t.Fatalf("%d nodes, want 2", len(top.Nodes))
	}
	for _, n := range top.Nodes {
		if n.IsGPU() || n.PCI != nil || n.DRM != (DRM{}) || len(n.IOLinks) != 1 || n.IOLinks[0].Type != LinkHyperTransport {
			t.Errorf("CPU node %+v", n)
		}
	}
}

// denyFS answers EPERM for the files deny selects, as KFD does for a GPU
// the reader's device cgroup does not grant (a memory root cannot).
type denyFS struct {
	*rootfs.Root
	deny func(rel string) bool
}

func (d denyFS) ReadFile(rel string, limit int) ([]byte, error) {
	if d.deny(rel) {
		return nil, fmt.Errorf("read %s: %w", d.Path(rel), syscall.EPERM)
	}
	return d.Root.ReadFile(rel, limit)
}

// TestDenied: a container given GPUs 0-3 only. KFD answers EPERM for
// every file of nodes 6-9 (gpu_id, name, properties, links); the CPU
// nodes and the granted GPUs read.
func TestDenied(t *testing.T) {
	root := mi300x().memory()
	deny := func(rel string) bool {
		for id := 6; id <= 9; id++ {
			if strings.HasPrefix(rel, fmt.Sprintf("%s/%d/", NodesDir, id)) {
				return true
			}
		}
		return false
	}
	top, errs := readTopology(denyFS{root, deny})
	if len(top.Nodes) != 10 {
		t.Fatalf("%d nodes, want 10 (denied GPUs are kept)", len(top.Nodes))
	}
	want := wantMI300X()
	for _, n := range top.Nodes {
		if n.ID < 6 {
			if d := cmp.Diff(want.Nodes[n.ID], n); d != "" {
				t.Errorf("granted node %d (-want +got):\n%s", n.ID, d)
			}
			continue
		}
		if !n.Denied || !n.IsGPU() || n.GPUID != 0 || n.PCI != nil || n.IOLinks != nil || n.P2PLinks != nil {
			t.Errorf("denied node %d = %+v, want Denied, a GPU, nothing else", n.ID, n)
		}
	}
	if len(errs) != 4 {
		t.Fatalf("errors %v, want one per denied node", errs)
	}
	for i, err := range errs {
		file := fmt.Sprintf("mi300x/%s/%d/gpu_id", NodesDir, 6+i)
		if !errors.Is(err, ErrDenied) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), file) ||
			!strings.Contains(err.Error(), "device cgroup") {
			t.Errorf("error %q: want ErrDenied, fs.ErrPermission, naming %s", err, file)
		}
	}
}

// TestFIFO: a FIFO planted where node 2's properties should be is
// refused without blocking, named, and the node kept.
func TestFIFO(t *testing.T) {
	tr := mi300x()
	delete(tr.files, node(2)+"/properties")
	dir := tr.disk(t)
	fifo := dir + "/" + node(2) + "/properties"
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan struct{})
	var (
		top  Topology
		errs []error
	)
	go func() {
		defer close(done)
		r, err := rootfs.Open(dir)
		if err != nil {
			t.Error(err)
			return
		}
		defer r.Close()
		top, errs = ReadTopology(r)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ReadTopology blocked on a FIFO")
	}
	// Named as read: through the class link.
	named := dir + "/" + NodesDir + "/2/properties"
	if len(errs) != 1 || !errors.Is(errs[0], sysattr.ErrNotRegular) || !strings.Contains(errs[0].Error(), named) {
		t.Fatalf("errors %v, want one refusing %s", errs, named)
	}
	n := top.Nodes[2]
	if n.ID != 2 || n.GPUID != gpuIDs[0] || n.Props != (Properties{}) || n.PCI != nil || len(n.IOLinks) != 8 {
		t.Errorf("node 2 = %+v, want kept with its gpu_id and links, no properties", n)
	}
}

func TestGarbage(t *testing.T) {
	for _, tc := range []struct {
		name, file, data, want string
	}{
		{"properties", node(3) + "/properties", "cpu_cores_count 0\nsimd_count lots\n", "properties: line 2"},
		{"link", node(4) + "/io_links/3/properties", "type 11\nnode_from 4\nnode_to\n", "io_links/3/properties: line 3"},
		{"link without node_to", node(4) + "/io_links/3/properties", "type 11\nnode_from 4\n", "no node_to"},
		{"gpu_id", node(5) + "/gpu_id", "0x1234\n", "gpu_id"},
		{"hive id", pciDir(0) + "/xgmi_hive_info/xgmi_hive_id", "-1\n", "xgmi_hive_id"},
		{"partition", pciDir(1) + "/current_compute_partition", "spx mode\n", "not a partition mode"},
		{"render node", pciDir(2) + "/drm/renderDx/dev", "226:1\n", "renderDx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := mi300x()
			tr.file(tc.file, tc.data)
			top, errs := ReadTopology(tr.memory())
			if len(top.Nodes) != 10 {
				t.Errorf("%d nodes, want all 10 kept", len(top.Nodes))
			}
			found := false
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want) && errors.Is(err, errSyntax) {
					found = true
				}
			}
			if !found {
				t.Errorf("errors %v, want one with %q", errs, tc.want)
			}
		})
	}
}

// TestLinkToMissingNode: a GPU vanished between listing and reading (or
// a snapshot lost it): the links naming it are kept and reported.
func TestLinkToMissingNode(t *testing.T) {
	tr := mi300x()
	tr.remove(node(9))
	top, errs := ReadTopology(tr.memory())
	if len(top.Nodes) != 9 {
		t.Fatalf("%d nodes, want 9", len(top.Nodes))
	}
	// Node 9 was named by CPU 1's io_link 4, CPU 0's p2p_link 3 and one
	// XGMI link of each of the 7 other GPUs.
	n := 0
	for _, err := range errs {
		if !strings.Contains(err.Error(), "node_to 9: no such KFD node") {
			t.Errorf("unexpected error: %v", err)
		}
		n++
	}
	if n != 9 {
		t.Errorf("%d errors, want 9: %v", n, errs)
	}
	if !strings.Contains(fmt.Sprint(errs), "mi300x/"+NodesDir+"/1/io_links/4/properties") {
		t.Errorf("errors do not name CPU 1's link file: %v", errs)
	}
}

func TestRenderMismatch(t *testing.T) {
	tr := mi300x()
	tr.remove(pciDir(2) + "/drm/renderD130")
	tr.file(pciDir(2)+"/drm/renderD140/dev", "226:140\n")
	top, errs := ReadTopology(tr.memory())
	if len(errs) != 1 || !errors.Is(errs[0], ErrMismatch) {
		t.Fatalf("errors %v, want one ErrMismatch", errs)
	}
	msg := errs[0].Error()
	for _, s := range []string{NodesDir + "/4/properties", "drm_render_minor 130", "sys/bus/pci/devices/0000:5b:00.0/drm", "renderD140"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not name %q", msg, s)
		}
	}
	if n := top.Nodes[4]; n.Props.DRMRenderMinor != 130 || n.DRM.RenderMinor != 140 {
		t.Errorf("node 4 keeps KFD %d and DRM %d, want 130 and 140", n.Props.DRMRenderMinor, n.DRM.RenderMinor)
	}

	tr = mi300x()
	tr.remove(pciDir(3) + "/drm")
	if _, errs := ReadTopology(tr.memory()); len(errs) != 1 || !errors.Is(errs[0], ErrMismatch) || !strings.Contains(errs[0].Error(), "has no renderD131") {
		t.Errorf("no drm/: errors %v, want one ErrMismatch saying renderD131 is missing", errs)
	}
}

func TestMissingPCIDevice(t *testing.T) {
	tr := mi300x()
	tr.remove("sys/bus/pci/devices/" + gpuAddr(5))
	top, errs := ReadTopology(tr.memory())
	if len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) || !strings.Contains(errs[0].Error(), "no PCI function 0000:a5:00.0") ||
		!strings.Contains(errs[0].Error(), "KFD node 7") {
		t.Fatalf("errors %v, want one naming node 7 and 0000:a5:00.0", errs)
	}
	if n := top.Nodes[7]; n.PCI == nil || n.PCI.String() != "0000:a5:00.0" || n.DRM != (DRM{}) {
		t.Errorf("node 7: PCI %v DRM %+v, want the decoded address and no DRM", n.PCI, n.DRM)
	}
}

// TestPartitionInReset: amdgpu answers EPERM for the partition modes
// while the GPU resets; that is not a device cgroup.
func TestPartitionInReset(t *testing.T) {
	root := mi300x().memory()
	file := pciDir(0) + "/current_compute_partition"
	top, errs := readTopology(denyFS{root, func(rel string) bool { return rel == "sys/bus/pci/devices/0000:05:00.0/current_compute_partition" }})
	if len(errs) != 1 || errors.Is(errs[0], ErrDenied) || !strings.Contains(errs[0].Error(), "in reset") {
		t.Fatalf("errors %v, want one saying the GPU is in reset (%s)", errs, file)
	}
	if n := top.Nodes[2]; n.Denied || n.DRM.ComputePartition != "" || n.DRM.MemoryPartition != "NPS1" {
		t.Errorf("node 2 = %+v", n)
	}
}

// TestCPXPartitions: one MI300X split in two compute partitions gives
// two KFD nodes on one PCI function. Kernels mark the second one in
// location_id's devfn (location_id |= node_id) or in bits 31:28; both
// read as partition 1 of 0000:05:00.0, whose render node is not under
// the PCI function (it is an amdgpu_xcp platform device's).
func TestCPXPartitions(t *testing.T) {
	for name, loc := range map[string]uint32{"devfn": 1280 | 1, "bits 31:28": 1<<28 | 1280} {
		t.Run(name, func(t *testing.T) {
			tr := mi300x()
			for id := 4; id <= 9; id++ {
				tr.remove(node(id))
			}
			tr.removeIf(func(p string) bool { return strings.Contains(p, "/io_links/") || strings.Contains(p, "/p2p_links/") })
			props := strings.Replace(gpuProps(1), "location_id 11008\n", fmt.Sprintf("location_id %d\n", loc), 1)
			props = strings.Replace(props, "io_links_count 8", "io_links_count 0", 1)
			props = strings.Replace(props, "p2p_links_count 1", "p2p_links_count 0", 1)
			tr.file(node(3)+"/properties", props)
			tr.file(node(2)+"/properties", strings.NewReplacer("io_links_count 8", "io_links_count 0", "p2p_links_count 1", "p2p_links_count 0").Replace(gpuProps(0)))
			for cpu := range 2 {
				tr.file(node(cpu)+"/properties", cpuProps(0, 0))
			}
			tr.file(pciDir(0)+"/current_compute_partition", "CPX\n")
			top, errs := ReadTopology(tr.memory())
			for _, err := range errs {
				t.Errorf("unexpected error: %v", err)
			}
			p0, p1 := top.Nodes[2], top.Nodes[3]
			if p0.PCI.String() != "0000:05:00.0" || p0.Partition != 0 || p0.DRM.RenderMinor != 128 || p0.DRM.ComputePartition != "CPX" {
				t.Errorf("partition 0: PCI %v partition %d DRM %+v", p0.PCI, p0.Partition, p0.DRM)
			}
			if p1.PCI.String() != "0000:05:00.0" || p1.Partition != 1 || p1.DRM.RenderMinor != 0 || p1.DRM.ComputePartition != "CPX" ||
				p1.Props.DRMRenderMinor != 129 {
				t.Errorf("partition 1: PCI %v partition %d DRM %+v", p1.PCI, p1.Partition, p1.DRM)
			}
		})
	}
}

func TestBounds(t *testing.T) {
	t.Run("nodes", func(t *testing.T) {
		tr := newTree()
		for id := range MaxNodes + 2 {
			tr.file(fmt.Sprintf("%s/%d/gpu_id", nodesOnDisk, id), "0\n")
		}
		tr.link(kfdClass, "../../devices/virtual/kfd/kfd")
		top, errs := ReadTopology(tr.memory())
		if len(top.Nodes) != MaxNodes || top.Nodes[MaxNodes-1].ID != MaxNodes-1 {
			t.Errorf("%d nodes read, want the first %d", len(top.Nodes), MaxNodes)
		}
		if !strings.Contains(fmt.Sprint(errs), fmt.Sprintf("%d KFD nodes, more than %d", MaxNodes+2, MaxNodes)) {
			t.Errorf("errors %v, want one on the node bound", errs)
		}
	})
	t.Run("links", func(t *testing.T) {
		tr := mi300x()
		for m := 5; m < MaxLinks+3; m++ {
			tr.file(fmt.Sprintf("%s/io_links/%d/properties", node(0), m), linkProps(1, 0, 1, 32, 0, 0, 0))
		}
		top, errs := ReadTopology(tr.memory())
		if len(top.Nodes[0].IOLinks) != MaxLinks {
			t.Errorf("%d links read, want %d", len(top.Nodes[0].IOLinks), MaxLinks)
		}
		if !strings.Contains(fmt.Sprint(errs), fmt.Sprintf("%d links, more than %d", MaxLinks+3, MaxLinks)) {
			t.Errorf("errors %v, want one on the link bound", errs)
		}
	})
	t.Run("count", func(t *testing.T) {
		tr := mi300x()
		tr.remove(node(0) + "/io_links/4")
		_, errs := ReadTopology(tr.memory())
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "io_links_count 5") {
			t.Errorf("errors %v, want one on io_links_count", errs)
		}
	})
	t.Run("entry name", func(t *testing.T) {
		tr := mi300x()
		tr.file(nodesOnDisk+"/07/gpu_id", "0\n")
		_, errs := ReadTopology(tr.memory())
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), `"07" is not a KFD entry number`) {
			t.Errorf("errors %v, want one naming 07", errs)
		}
	})
}
