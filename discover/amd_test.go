package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/kfd"
	"github.com/gpuaffinity/gpuaffinity/pci"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// amdDev is an MI300X function at bus b (class 0x120000, 1002:74a1).
func amdDev(b uint8) pci.Device {
	return pci.Device{Address: pci.Address{Bus: b}, Vendor: 0x1002, DeviceID: 0x74a1, Class: 0x120000, Driver: "amdgpu"}
}

func kfdGPU(id int, b uint8, partition int, links ...kfd.Link) kfd.Node {
	a := pci.Address{Bus: b}
	return kfd.Node{ID: id, GPUID: uint32(1000 + id), PCI: &a, Partition: partition, IOLinks: links,
		Props: kfd.Properties{SIMDCount: 1216 / 8, SIMDPerCU: 4, NumXCC: 1, GFXTargetVersion: 90402,
			DRMRenderMinor: uint32(128 + id - 1), HiveID: 0xabc}}
}

// TestAMDGPUs: GPUs are matched to KFD nodes by PCI address and numbered
// in KFD node order (HIP's order) after the NVIDIA GPUs; a CPX GPU has
// one ordinal per partition, its CUs summed and its inside links left
// out; a GPU KFD does not list is not-in-kfd, one whose node the device
// cgroup denies is kfd-denied, each with a warning naming it.
func TestAMDGPUs(t *testing.T) {
	xgmi := func(from, to int, w uint32) kfd.Link {
		return kfd.Link{Type: kfd.LinkXGMI, From: from, To: to, Weight: w}
	}
	// Node 0 is the CPU. The GPU at bus 0x40 probed first (nodes 1, 2:
	// two partitions joined by weight 13, each linked to the other GPU's
	// partition at 41 = 13+13+15, one hop); the GPU at 0x20 is node 3 and
	// 4. The GPU at 0x60 has no node; the GPU at 0x80 is denied.
	top := kfd.Topology{Nodes: []kfd.Node{
		{ID: 0, Props: kfd.Properties{CPUCoresCount: 96}},
		kfdGPU(1, 0x40, 0, xgmi(1, 2, 13), xgmi(1, 3, 41)),
		kfdGPU(2, 0x40, 1, xgmi(2, 1, 13), xgmi(2, 4, 41)),
		kfdGPU(3, 0x20, 0, xgmi(3, 4, 13), xgmi(3, 1, 41)),
		kfdGPU(4, 0x20, 1, xgmi(4, 3, 13), xgmi(4, 2, 41)),
		{ID: 5, Denied: true},
	}}
	devs := []pci.Device{amdDev(0x20), amdDev(0x40), amdDev(0x60), amdDev(0x80)}
	var warns []string
	gs := amdGPUs(devs, top, 2, func(errs ...error) {
		for _, e := range errs {
			warns = append(warns, e.Error())
		}
	})
	type want struct {
		bus      string
		index    int
		state    topology.GPUState
		ordinals []int
		cus      int
		peer     string
	}
	wants := []want{
		{"0000:40:00.0", 2, topology.GPUOK, []int{0, 1}, 76, "0000:20:00.0"},
		{"0000:20:00.0", 3, topology.GPUOK, []int{2, 3}, 76, "0000:40:00.0"},
		{"0000:60:00.0", 4, topology.GPUNotInKFD, nil, 0, ""},
		{"0000:80:00.0", 5, topology.GPUNotInKFD, nil, 0, ""},
	}
	if len(gs) != len(wants) {
		t.Fatalf("%d GPUs, want %d: %+v", len(gs), len(wants), gs)
	}
	for i, w := range wants {
		g := gs[i]
		if g.BusID != w.bus || g.Index != w.index || g.State != w.state || g.Model != "AMD Instinct MI300X" {
			t.Errorf("GPU %d: %s index %d state %s model %q, want %s %d %s", i, g.BusID, g.Index, g.State, g.Model, w.bus, w.index, w.state)
		}
		if w.ordinals == nil {
			if g.AMD != nil {
				t.Errorf("%s: AMD info %+v without a KFD node", g.BusID, g.AMD)
			}
			continue
		}
		if g.AMD == nil {
			t.Fatalf("%s: no AMD info", g.BusID)
		}
		if fmt.Sprint(g.AMD.Ordinals) != fmt.Sprint(w.ordinals) || g.AMD.ComputeUnits != w.cus || g.AMD.XCCs != 2 || g.AMD.GFXTarget != "gfx942" {
			t.Errorf("%s: %+v, want ordinals %v, %d CUs, 2 XCCs", g.BusID, g.AMD, w.ordinals, w.cus)
		}
		if l := g.AMD.XGMILinks; len(l) != 1 || l[0].Peer != w.peer || l[0].Hops != 1 || l[0].Weight != 41 {
			t.Errorf("%s: XGMI links %+v, want one hop to %s", g.BusID, l, w.peer)
		}
		if g.AMD.HiveID != "0x0000000000000abc" {
			t.Errorf("%s: hive %q", g.BusID, g.AMD.HiveID)
		}
	}
	joined := strings.Join(warns, "\n")
	// One denied node, two unlisted GPUs: which is denied cannot be told.
	for _, w := range []string{"KFD denies 1 GPU node(s) (EPERM: the device cgroup) and lists no node for 2 GPU(s)",
		"GPU 0000:60:00.0 (AMD Instinct MI300X) is on the PCI bus but KFD lists no node", "GPU 0000:80:00.0 (AMD Instinct MI300X) is on the PCI bus but KFD lists no node"} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings %q lack %q", warns, w)
		}
	}

	// As many denied nodes as unlisted GPUs: those are the denied ones.
	top.Nodes = append(top.Nodes, kfd.Node{ID: 6, Denied: true})
	warns = nil
	gs = amdGPUs(devs, top, 0, func(errs ...error) {
		for _, e := range errs {
			warns = append(warns, e.Error())
		}
	})
	for _, g := range gs[2:] {
		if g.State != topology.GPUKFDDenied || !strings.Contains(strings.Join(warns, "\n"), "GPU "+g.BusID+": KFD denies it") {
			t.Errorf("%s: state %s, warnings %q", g.BusID, g.State, warns)
		}
	}
}

// TestAMDWithoutKFD: amd-mi300x without amdkfd's topology (amdgpu not
// loaded) still has its 8 GPUs on the bus, each not-in-kfd with a warning
// naming it, no render node and no XGMI links: never 0 GPUs, never "ok".
func TestAMDWithoutKFD(t *testing.T) {
	root := fakesystest.Root(t, "amd-mi300x")
	if err := os.RemoveAll(filepath.Join(root, "sys/devices/virtual/kfd")); err != nil {
		t.Fatal(err)
	}
	n := discoverRoot(t, root)
	if len(n.GPUs) != 8 {
		t.Fatalf("%d GPUs, want 8", len(n.GPUs))
	}
	for _, g := range n.GPUs {
		if g.State != topology.GPUNotInKFD || g.AMD != nil {
			t.Errorf("GPU %d %s: state %s, AMD %+v", g.Index, g.BusID, g.State, g.AMD)
		}
		want := "GPU " + g.BusID + " (AMD Instinct MI300X) is on the PCI bus but " + kfd.NodesDir + " does not exist"
		if !strings.Contains(strings.Join(n.Warnings, "\n"), want) {
			t.Errorf("no warning %q in %q", want, n.Warnings)
		}
	}
	for _, p := range n.GPUPaths {
		if p.XGMI != 0 {
			t.Errorf("GPU%d-GPU%d: %d XGMI links without KFD", p.A, p.B, p.XGMI)
		}
	}
	if n.ROCm == nil {
		t.Error("no rocm section on a node with AMD GPUs")
	}
}

// TestROCmInfo: the DKMS amdgpu version and amdkfd's peer-memory client
// are read where present; garbage is a warning naming the file.
func TestROCmInfo(t *testing.T) {
	root := fakesystest.Root(t, "amd-mi300x")
	write := func(rel, s string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(amdgpuVersion, "6.10.5\n")
	write(kfd.PeerMemoryPaths[0], "bad\x01version\n")
	n := discoverRoot(t, root)
	if n.ROCm == nil || n.ROCm.DriverVersion != "6.10.5" || n.ROCm.PeerMemory != "" {
		t.Errorf("rocm %+v", n.ROCm)
	}
	if !strings.Contains(strings.Join(n.Warnings, "\n"), kfd.PeerMemoryPaths[0]) {
		t.Errorf("no warning naming %s: %q", kfd.PeerMemoryPaths[0], n.Warnings)
	}
}

// TestAMDPartitionGap: two GPUs in CPX, one of which KFD lists with a
// partition less (as the last MI300X of ROCm's k8s-device-plugin CPX
// capture: 7 nodes): each GPU lists its partitions (KFD node, ordinal,
// render node), and the short one is a warning naming it.
func TestAMDPartitionGap(t *testing.T) {
	cpx := func(n kfd.Node) kfd.Node { n.DRM.ComputePartition = "CPX"; return n }
	top := kfd.Topology{Nodes: []kfd.Node{
		{ID: 0, Props: kfd.Properties{CPUCoresCount: 96}},
		cpx(kfdGPU(1, 0x20, 0)), cpx(kfdGPU(2, 0x20, 1)),
		cpx(kfdGPU(3, 0x40, 0)),
	}}
	var warns []string
	gs := amdGPUs([]pci.Device{amdDev(0x20), amdDev(0x40)}, top, 0, func(errs ...error) {
		for _, e := range errs {
			warns = append(warns, e.Error())
		}
	})
	if len(gs) != 2 {
		t.Fatalf("%d GPUs", len(gs))
	}
	p := gs[0].AMD.Partitions
	if len(p) != 2 || p[1].Partition != 1 || p[1].KFDNode != 2 || p[1].Ordinal != 1 || p[1].RenderMinor == nil || *p[1].RenderMinor != 129 {
		t.Errorf("GPU 0 partitions %+v", p)
	}
	if gs[1].AMD.Partitions != nil {
		t.Errorf("GPU 1 (one node): partitions %+v, want none", gs[1].AMD.Partitions)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "GPU 0000:40:00.0 is in CPX with 1 KFD node(s), other CPX GPUs have 2") {
		t.Errorf("warnings %q", warns)
	}
}
