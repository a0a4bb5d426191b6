package health

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The amd-mi300x fixture's GPUs by index, as AMD's reference map gives
// them (ROCm/system-acceptance-docs@23e7312
// docs/network/topology-mapping.md: GPU0 05:00.0, GPU1 2b, GPU2 5b, GPU3
// 65, GPU4 7d, GPU5 a5, GPU6 d5, GPU7 e7), all 8 one fully connected
// XGMI hive (rocm-smi --showtopo on 8x MI300X: XGMI, weight 15, hops 1
// for every pair; shared/research/frontier.md §4.2).
var mi300xBus = []string{"0000:05:00.0", "0000:2b:00.0", "0000:5b:00.0", "0000:65:00.0",
	"0000:7d:00.0", "0000:a5:00.0", "0000:d5:00.0", "0000:e7:00.0"}

// amdChecks are the checks that judge AMD GPUs.
var amdChecks = []string{"gpu.visible", "gpu.pcie_link", "amd.xgmi", "amd.ras", "amd.pcie_replay", "topo.gdr", "amd.iommu"}

// nvidiaOnlyChecks are the checks of NVIDIA's machinery.
var nvidiaOnlyChecks = []string{"gpu.row_remap", "gpu.ecc", "gpu.retired_pages", "gpu.xid", "gpu.recovery_action",
	"gpu.fabric", "gpu.imex", "gpu.persistence", "nvlink.active"}

// amdRoot is the amd-mi300x fixture, built once per test.
func amdRoot(t *testing.T) func() topology.Node {
	t.Helper()
	root := fakesystest.Root(t, "amd-mi300x")
	return func() topology.Node { return discoverRoot(t, root) }
}

// healthyAMD fills what discovery does not read yet, or what the fixture
// leaves out, with a healthy node's answers: RAS counts of 0 in the
// blocks MI300X counts, no PCIe replays, amdkfd peer memory, and the
// IOMMU in passthrough with iommu=pt as AMD's kernel parameters ask
// (system-acceptance-docs docs/common/kernel-parameters.md).
func healthyAMD(n *topology.Node) {
	for i := range n.GPUs {
		if a := n.GPUs[i].AMD; a != nil {
			a.RAS = []topology.RASCount{{Block: "gfx"}, {Block: "mmhub"}, {Block: "umc", DE: ptr(uint64(0))}, {Block: "xgmi_wafl"}}
			a.PCIeReplayCount = ptr(uint64(0))
		}
	}
	n.ROCm = &topology.ROCmInfo{PeerMemory: "1.0"}
	io := topology.IOMMU{Mode: topology.IOMMUPassthrough, Units: []string{"ivhd0", "ivhd1"}, Cmdline: []string{"iommu=pt"}}
	for _, b := range mi300xBus {
		io.Groups = append(io.Groups, topology.IOMMUGroup{BusID: b, Type: "identity"})
	}
	n.Storage.GDS.IOMMU = io
}

func gpuByIndex(n *topology.Node, i int) *topology.GPU {
	k := slices.IndexFunc(n.GPUs, func(g topology.GPU) bool { return g.Index == i })
	return &n.GPUs[k]
}

// linkDown takes the direct XGMI link between GPUs a and b away as the
// XGMI TA reports it then: routed through a third GPU, 2 hops, KFD weight
// 30 (15 per hop), no bandwidth.
func linkDown(n *topology.Node, a, b int) {
	ga, gb := gpuByIndex(n, a), gpuByIndex(n, b)
	for _, p := range [][2]*topology.GPU{{ga, gb}, {gb, ga}} {
		for i, l := range p[0].AMD.XGMILinks {
			if l.Peer == p[1].BusID {
				p[0].AMD.XGMILinks[i] = topology.XGMILink{Peer: l.Peer, Hops: 2, Weight: 30}
			}
		}
	}
}

// The healthy MI300X node: every check that judges AMD GPUs passes, the
// NVML-only ones skip as not applying, nothing warns or fails.
func TestAMDHealthyNode(t *testing.T) {
	n := amdRoot(t)()
	healthyAMD(&n)
	rep := run(t, n, Options{Root: "/nonexistent", Interval: 0})
	if !rep.Healthy {
		t.Errorf("unhealthy: %s", rep.Summary())
	}
	for _, r := range rep.Results {
		if r.Verdict == Fail || r.Verdict == Warn {
			t.Errorf("%s: %s %s", r.ID, r.Verdict, r.Reason)
		}
	}
	want(t, result(t, rep, "gpu.count"), Pass, "8 GPUs, AMD Instinct MI300X")
	want(t, result(t, rep, "gpu.visible"), Pass, "all 8 AMD GPUs listed by KFD")
	want(t, result(t, rep, "gpu.pcie_link"), Pass, "8 GPUs at full PCIe width")
	want(t, result(t, rep, "amd.xgmi"), Pass, "8 GPUs of XGMI hive 0x", "each with a direct link to the 7 others")
	want(t, result(t, rep, "amd.ras"), Pass, "no RAS errors on 8 GPUs")
	want(t, result(t, rep, "amd.pcie_replay"), Pass, "no PCIe replays on 8 GPUs")
	want(t, result(t, rep, "topo.gdr"), Pass, "amdkfd peer memory registered (memory_peers/amdkfd version 1.0)")
	want(t, result(t, rep, "amd.iommu"), Pass, "IOMMU passthrough (units ivhd0,ivhd1; cmdline iommu=pt): passthrough, as AMD and RCCL ask")
	want(t, result(t, rep, "topo.aligned"), Pass, "8 GPUs with a compute NIC at PXB or better")
	for _, id := range nvidiaOnlyChecks {
		want(t, result(t, rep, id), Skip, "no NVIDIA GPU (8 AMD GPUs)")
	}
	if r := result(t, rep, "topo.gdr"); strings.Contains(r.Reason+r.Hint, "nvidia_peermem") {
		t.Errorf("topo.gdr names nvidia_peermem for AMD GPUs: %+v", r)
	}
}

// A live AMD node has no libnvidia-ml: NVML fails to open. That is no
// fault of the AMD GPUs: gpu.visible judges them by KFD and the NVML
// checks do not apply.
func TestAMDNodeWithoutNVML(t *testing.T) {
	n := amdRoot(t)()
	healthyAMD(&n)
	n.NVML = topology.NVMLInfo{Source: "none", Failed: true, Error: "nvml: ERROR_LIBRARY_NOT_FOUND"}
	rep := run(t, n, Options{Root: "/nonexistent"})
	if !rep.Healthy {
		t.Errorf("unhealthy: %s", rep.Summary())
	}
	want(t, result(t, rep, "gpu.visible"), Pass, "all 8 AMD GPUs listed by KFD")
	for _, id := range nvidiaOnlyChecks {
		want(t, result(t, rep, id), Skip, "no NVIDIA GPU")
	}
}

// The faults of amd-mi300x-faults, set on the model: RAS UE on GPU 3
// (umc ue 2 ce 14), GPU 5 trained to x8, GPU 6 without its direct links
// to GPUs 0 and 1, 37 PCIe replays on GPU 2, no amdkfd peer memory, no
// iommu=pt (translated groups).
func TestAMDFaults(t *testing.T) {
	n := amdRoot(t)()
	healthyAMD(&n)
	gpuByIndex(&n, 3).AMD.RAS[2] = topology.RASCount{Block: "umc", UE: 2, CE: 14, DE: ptr(uint64(0))}
	gpuByIndex(&n, 5).PCIe.Width = 8
	linkDown(&n, 6, 0)
	linkDown(&n, 6, 1)
	gpuByIndex(&n, 2).AMD.PCIeReplayCount = ptr(uint64(37))
	n.ROCm.PeerMemory = ""
	n.Storage.GDS.IOMMU = topology.IOMMU{Mode: topology.IOMMUTranslated, Units: []string{"ivhd0", "ivhd1"}, Cmdline: []string{},
		Groups: []topology.IOMMUGroup{{BusID: "0000:05:00.0", Type: "DMA-FQ"}}}

	rep := run(t, n, Options{Root: "/nonexistent"})
	want(t, result(t, rep, "amd.ras"), Fail, "GPU 3 (0000:65:00.0): 2 uncorrectable RAS errors in umc (and 14 correctable)")
	want(t, result(t, rep, "gpu.pcie_link"), Fail, "GPU 5 (0000:a5:00.0) PCIe link x8 of x16")
	x := result(t, rep, "amd.xgmi")
	want(t, x, Fail, "GPU 0 (0000:05:00.0) ↔ GPU 6 (0000:d5:00.0): no direct XGMI link (GPU 0 sees 2 hops, GPU 6 sees 2 hops) (and 1 more)")
	if len(x.Details) != 2 || x.Details[1] != "GPU 1 (0000:2b:00.0) ↔ GPU 6 (0000:d5:00.0): no direct XGMI link (GPU 1 sees 2 hops, GPU 6 sees 2 hops)" {
		t.Errorf("amd.xgmi details %q", x.Details)
	}
	if !strings.Contains(x.Hint, "RCCL puts only direct (one-hop) XGMI links in its topology") {
		t.Errorf("amd.xgmi hint %q", x.Hint)
	}
	want(t, result(t, rep, "amd.pcie_replay"), Warn, "GPU 2 (0000:5b:00.0): 37 PCIe replays since boot")
	// Kernel 6.8 has dma-buf: GPUDirect RDMA without peer memory, when
	// RCCL is told NCCL_DMABUF_ENABLE=1.
	want(t, result(t, rep, "topo.gdr"), Pass, "dma-buf: kernel 6.8 (amdkfd peer memory not registered)", "NCCL_DMABUF_ENABLE=1")
	want(t, result(t, rep, "amd.iommu"), Fail, "IOMMU translated", "0000:05:00.0 in a DMA-FQ group", "system instability or hang")
	if rep.Healthy || rep.Summary() != "gpu.pcie_link: GPU 5 (0000:a5:00.0) PCIe link x8 of x16" {
		t.Errorf("summary %q", rep.Summary())
	}

	// The GPU checks stay failures in every profile; amd.iommu is a
	// fabric check.
	for _, c := range []struct {
		p        Profile
		multi    bool
		iommu    Verdict
		downgrad bool
	}{{Pretrain, false, Fail, false}, {Finetune, false, Warn, true}, {Finetune, true, Fail, false}, {Inference, false, Warn, true}} {
		rep := run(t, n, Options{Root: "/nonexistent", Profile: c.p, MultiNode: c.multi})
		if r := result(t, rep, "amd.iommu"); r.Verdict != c.iommu || r.Downgraded != c.downgrad {
			t.Errorf("%s multi=%v: amd.iommu %s downgraded=%v", c.p, c.multi, r.Verdict, r.Downgraded)
		}
		for _, id := range []string{"amd.ras", "amd.xgmi", "gpu.pcie_link"} {
			if r := result(t, rep, id); r.Verdict != Fail {
				t.Errorf("%s: %s %s, want fail", c.p, id, r.Verdict)
			}
		}
	}

	// Narrowed to GPUs 2-4 (none of them part of the missing links),
	// the XGMI check passes; GPU 3's RAS still fails.
	rep = run(t, n, Options{Root: "/nonexistent", GPUs: []int{2, 3, 4}})
	want(t, result(t, rep, "amd.xgmi"), Pass, "3 GPUs of XGMI hive", "each with a direct link to the 2 others")
	want(t, result(t, rep, "amd.ras"), Fail, "GPU 3 (0000:65:00.0)")
}

// One side of a link is enough to fail it: RCCL on each GPU reads only
// that GPU's links.
func TestAMDXGMIOneSided(t *testing.T) {
	n := amdRoot(t)()
	g := gpuByIndex(&n, 4)
	g.AMD.XGMILinks = slices.DeleteFunc(g.AMD.XGMILinks, func(l topology.XGMILink) bool { return l.Peer == "0000:e7:00.0" })
	r := run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.xgmi"}}).Results[0]
	want(t, r, Fail, "GPU 4 (0000:7d:00.0) ↔ GPU 7 (0000:e7:00.0): no direct XGMI link (GPU 4 sees no XGMI link, GPU 7 sees 1 hop)")
}

// A full-mesh GPU that fell out of the hive its peers share has no XGMI
// link at all.
func TestAMDXGMIOutOfHive(t *testing.T) {
	n := amdRoot(t)()
	g := gpuByIndex(&n, 6)
	g.AMD.HiveID, g.AMD.XGMILinks = "", []topology.XGMILink{}
	for i := range n.GPUs {
		if a := n.GPUs[i].AMD; a != nil {
			a.XGMILinks = slices.DeleteFunc(a.XGMILinks, func(l topology.XGMILink) bool { return l.Peer == "0000:d5:00.0" })
		}
	}
	r := run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.xgmi"}}).Results[0]
	want(t, r, Fail, "GPU 6 (0000:d5:00.0) is in no XGMI hive while GPU 0,1,2,3,4,5,7 are in hive 0x")
	if len(r.Details) != 0 {
		t.Errorf("only the lost GPU is named: %q", r.Details)
	}
}

// Outside full-mesh boards (MI250X, gfx90a: its GCDs are not all joined
// to each other) each GPU needs the direct links xgmi_num_links names,
// else as many as the best-linked member has.
func TestAMDXGMIPartialMesh(t *testing.T) {
	n := amdRoot(t)()
	for i := range n.GPUs {
		a := n.GPUs[i].AMD
		a.GFXTarget = "gfx90a"
		a.XGMILinkedPeers, a.XGMINumLinks = ptr(2), ptr(2)
		// A ring: each GPU linked directly to its two neighbours only.
		prev, next := mi300xBus[(i+7)%8], mi300xBus[(i+1)%8]
		for k, l := range a.XGMILinks {
			if l.Peer != prev && l.Peer != next {
				a.XGMILinks[k] = topology.XGMILink{Peer: l.Peer, Hops: 2, Weight: 30}
			}
		}
	}
	r := run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.xgmi"}}).Results[0]
	want(t, r, Pass, "8 GPUs of XGMI hive", "with 2 direct links each")

	a := gpuByIndex(&n, 3).AMD
	for k, l := range a.XGMILinks {
		if l.Peer == mi300xBus[4] {
			a.XGMILinks[k] = topology.XGMILink{Peer: l.Peer, Hops: 3, Weight: 45}
		}
	}
	r = run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.xgmi"}}).Results[0]
	want(t, r, Fail, "GPU 3 (0000:65:00.0) has direct XGMI links to 1 of the 2 GPUs it should reach in hive 0x")

	// The peers xgmi_num_links links raise the expectation above what
	// the best-linked member's KFD links show.
	n = amdRoot(t)()
	for i := range n.GPUs {
		n.GPUs[i].AMD.GFXTarget = "gfx90a"
		n.GPUs[i].AMD.XGMILinkedPeers = ptr(7)
	}
	for _, i := range []int{0, 1, 3, 4, 6, 7} {
		linkDown(&n, 2, i)
		linkDown(&n, 5, i)
	}
	r = run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.xgmi"}}).Results[0]
	want(t, r, Fail, "GPU 0 (0000:05:00.0) has direct XGMI links to 5 of the 7 GPUs it should reach", "(and 7 more)")
}

func TestAMDXGMISkips(t *testing.T) {
	n := amdRoot(t)()
	for i := range n.GPUs {
		n.GPUs[i].AMD.HiveID, n.GPUs[i].AMD.XGMILinks = "", []topology.XGMILink{}
		n.GPUs[i].AMD.GFXTarget = "gfx90a"
	}
	want(t, run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.xgmi"}}).Results[0], Skip, "no XGMI hive")
	n = amdRoot(t)()
	want(t, run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.xgmi"}, GPUs: []int{3}}).Results[0], Skip, "fewer than 2 selected GPUs")
}

func TestAMDRAS(t *testing.T) {
	get := amdRoot(t)
	for _, c := range []struct {
		name string
		ras  []topology.RASCount
		v    Verdict
		want string
	}{
		{"ce", []topology.RASCount{{Block: "umc", CE: 14}}, Warn, "GPU 1 (0000:2b:00.0): 14 correctable RAS errors in umc"},
		{"de", []topology.RASCount{{Block: "umc", CE: 3, DE: ptr(uint64(2))}}, Warn, "GPU 1 (0000:2b:00.0): 2 deferred RAS errors in umc (poisoned data not yet consumed)"},
		{"ue gfx", []topology.RASCount{{Block: "gfx", UE: 1}, {Block: "umc", CE: 5}}, Fail, "GPU 1 (0000:2b:00.0): 1 uncorrectable RAS error in gfx (and 1 more)"},
		{"ue xgmi", []topology.RASCount{{Block: "xgmi_wafl", UE: 4}}, Fail, "GPU 1 (0000:2b:00.0): 4 uncorrectable RAS errors in xgmi_wafl"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := get()
			healthyAMD(&n)
			gpuByIndex(&n, 1).AMD.RAS = c.ras
			// A GPU failure: inference enforces it too.
			want(t, run(t, n, Options{Root: "/nonexistent", Profile: Inference, Only: []string{"amd.ras"}}).Results[0], c.v, c.want)
		})
	}
	// No ras/ counters (RAS off) and no pcie_replay_count (a VF).
	n := get()
	for i := range n.GPUs {
		n.GPUs[i].AMD.RAS, n.GPUs[i].AMD.PCIeReplayCount = []topology.RASCount{}, nil
	}
	want(t, run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.ras"}}).Results[0], Skip, "amdgpu reports no RAS error counts")
	want(t, run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.pcie_replay"}}).Results[0], Skip, "no PCIe replay count")
}

// KFD that lists no node for a GPU, or denies one to this container.
func TestAMDVisible(t *testing.T) {
	n := amdRoot(t)()
	g4, g7 := gpuByIndex(&n, 4), gpuByIndex(&n, 7)
	g4.State, g4.AMD = topology.GPUNotInKFD, nil
	g7.State = topology.GPUKFDDenied // KFD said its render node before the cgroup changed
	rep := run(t, n, Options{Root: "/nonexistent", Profile: Inference})
	r := result(t, rep, "gpu.visible")
	want(t, r, Fail, "GPU 4 (0000:7d:00.0) is on the PCI bus but KFD lists no node for it: amdgpu/amdkfd is not loaded", "(and 1 more)")
	if len(r.Details) != 2 || r.Details[1] != "GPU 7 (0000:e7:00.0): KFD denies it (EPERM): the device cgroup does not give this container /dev/dri/renderD184 and /dev/kfd" {
		t.Errorf("details %q", r.Details)
	}
	for _, h := range []string{"modprobe amdgpu", "/dev/kfd and the GPU's /dev/dri/renderD<N>", "--gpus"} {
		if !strings.Contains(r.Hint, h) {
			t.Errorf("hint %q does not say %q", r.Hint, h)
		}
	}
	// A GPU without its KFD info breaks none of the AMD checks.
	for _, id := range []string{"amd.xgmi", "amd.ras", "amd.pcie_replay"} {
		if x := result(t, rep, id); strings.Contains(x.Reason, "panicked") {
			t.Errorf("%s: %s", id, x.Reason)
		}
	}
	// A denied GPU whose render node is unknown.
	g7.AMD = nil
	rep = run(t, n, Options{Root: "/nonexistent", GPUs: []int{7}, Only: []string{"gpu.visible"}})
	want(t, rep.Results[0], Fail, "GPU 7 (0000:e7:00.0): KFD denies it (EPERM): the device cgroup does not give this container the GPU's /dev/dri/renderD node and /dev/kfd")
	// The container's own GPUs pass.
	rep = run(t, n, Options{Root: "/nonexistent", GPUs: []int{0, 1}, Only: []string{"gpu.visible"}})
	want(t, rep.Results[0], Pass, "all 2 AMD GPUs listed by KFD")
}

// topo.gdr for AMD GPUs: amdkfd peer memory, else dma-buf (kernel 5.12+);
// nvidia_peermem counts for nothing.
func TestAMDGDR(t *testing.T) {
	get := amdRoot(t)
	for _, c := range []struct {
		name, peer, kernel string
		modules            []string
		v                  Verdict
		want               string
	}{
		{"peer memory on 5.15", "1.0", "5.15.0-119-generic", nil, Pass, "amdkfd peer memory registered (memory_peers/amdkfd version 1.0)"},
		{"dma-buf", "", "6.8.0-52-generic", nil, Pass, "dma-buf: kernel 6.8 (amdkfd peer memory not registered): RCCL takes GPUDirect RDMA through dma-buf with NCCL_DMABUF_ENABLE=1"},
		{"old kernel", "", "5.4.0-100-generic", []string{"amdgpu", "nvidia_peermem"}, Fail, "amdkfd peer memory not registered (no memory_peers/amdkfd/version) and kernel 5.4 is older than 5.12 (no dma-buf)"},
		{"no kernel", "", "", nil, Fail, "the kernel version is unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := get()
			n.ROCm = &topology.ROCmInfo{PeerMemory: c.peer}
			n.Kernel = topology.KernelInfo{Release: c.kernel, Modules: c.modules}
			r := run(t, n, Options{Root: "/nonexistent", Only: []string{"topo.gdr"}}).Results[0]
			want(t, r, c.v, c.want)
			if strings.Contains(r.Reason+r.Hint, "nvidia_peermem") {
				t.Errorf("names nvidia_peermem: %+v", r)
			}
			if c.v == Fail && !strings.Contains(r.Hint, "NCCL_DMABUF_ENABLE=1") {
				t.Errorf("hint %q", r.Hint)
			}
		})
	}
	n := get()
	n.ROCm = nil // a node built before ROCmInfo
	n.Kernel.Release = "5.4.0-100-generic"
	want(t, run(t, n, Options{Root: "/nonexistent", Only: []string{"topo.gdr"}}).Results[0], Fail, "amdkfd peer memory not registered")
}

func TestAMDIOMMU(t *testing.T) {
	get := amdRoot(t)
	groups := func(typ string) []topology.IOMMUGroup {
		return []topology.IOMMUGroup{{BusID: "0000:05:00.0", Type: typ}, {BusID: "0000:09:00.0", Type: typ}}
	}
	for _, c := range []struct {
		name    string
		io      topology.IOMMU
		virtual bool
		v       Verdict
		want    string
	}{
		{"passthrough by amd_iommu", topology.IOMMU{Mode: topology.IOMMUPassthrough, Units: []string{"ivhd0"}, Cmdline: []string{"amd_iommu=pt"}, Groups: groups("identity")}, false, Pass,
			"IOMMU passthrough (units ivhd0; cmdline amd_iommu=pt): passthrough, as AMD and RCCL ask"},
		{"passthrough by the kernel's default", topology.IOMMU{Mode: topology.IOMMUPassthrough, Units: []string{"ivhd0"}, Cmdline: []string{}, Groups: groups("identity")}, false, Pass,
			"(RCCL reads only the command line and still prints its missing iommu=pt warning)"},
		{"off", topology.IOMMU{Mode: topology.IOMMUOff, Units: []string{}, Cmdline: []string{"amd_iommu=off"}}, false, Pass,
			"IOMMU off (no IOMMU unit; cmdline amd_iommu=off): no DMA translation"},
		{"translated", topology.IOMMU{Mode: topology.IOMMUTranslated, Units: []string{"ivhd0"}, Cmdline: []string{}, Groups: groups("DMA-FQ")}, false, Fail,
			"IOMMU translated (units ivhd0; cmdline sets no IOMMU option); 0000:05:00.0 in a DMA-FQ group"},
		{"translated despite iommu=pt", topology.IOMMU{Mode: topology.IOMMUTranslated, Units: []string{"ivhd0"}, Cmdline: []string{"iommu=pt", "iommu.strict=1"}, Groups: groups("DMA")}, false, Fail,
			"iommu=pt is on the command line, yet the groups translate"},
		{"unknown", topology.IOMMU{Mode: topology.IOMMUUnknown, Units: []string{"ivhd0"}, Cmdline: []string{}}, false, Warn, "the mode could not be told"},
		{"vm", topology.IOMMU{Mode: topology.IOMMUTranslated, Units: []string{"vtd0"}, Groups: groups("DMA")}, true, Skip, "a VM: the hypervisor owns the IOMMU"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := get()
			n.Storage.GDS.IOMMU = c.io
			n.Platform.Virtual = c.virtual
			r := run(t, n, Options{Root: "/nonexistent", Only: []string{"amd.iommu"}}).Results[0]
			want(t, r, c.v, c.want)
			if c.v == Fail && !strings.Contains(r.Hint, "iommu=pt") {
				t.Errorf("hint %q", r.Hint)
			}
		})
	}
}

// NVIDIA nodes: the amd.* checks skip, and nothing else changes (the
// other tests of this package run on NVIDIA nodes untouched).
func TestAMDChecksSkipOnNVIDIA(t *testing.T) {
	n := discoverRoot(t, healthyRoot(t, "dgx-h100"))
	goodHealth(&n)
	rep := run(t, n, Options{Root: "/nonexistent"})
	for _, id := range []string{"amd.xgmi", "amd.ras", "amd.pcie_replay", "amd.iommu"} {
		want(t, result(t, rep, id), Skip, "no AMD GPU")
	}
	want(t, result(t, rep, "topo.gdr"), Pass, "nvidia_peermem loaded")
	if r := result(t, rep, "topo.gdr"); r.Reason != "nvidia_peermem loaded" {
		t.Errorf("NVIDIA topo.gdr reason changed: %q", r.Reason)
	}
}

// A node with both vendors' GPUs: each check judges its vendor's GPUs.
func TestMixedVendorNode(t *testing.T) {
	n := discoverRoot(t, healthyRoot(t, "dgx-h100"))
	goodHealth(&n)
	amd := amdRoot(t)()
	healthyAMD(&amd)
	n.ROCm = amd.ROCm
	for i, g := range amd.GPUs[:2] {
		g.Index = 8 + i
		n.GPUs = append(n.GPUs, g)
		// Each with GPU i's NIC, to keep topo.aligned out of it.
		p := n.Pairs[slices.IndexFunc(n.Pairs, func(p topology.Pair) bool { return p.GPU == i })]
		p.GPU = g.Index
		n.Pairs = append(n.Pairs, p)
	}
	// The two AMD GPUs are a hive of 2 by themselves.
	for i := 8; i < 10; i++ {
		g := gpuByIndex(&n, i)
		g.AMD.XGMILinks = slices.DeleteFunc(g.AMD.XGMILinks, func(l topology.XGMILink) bool {
			return l.Peer != "0000:05:00.0" && l.Peer != "0000:2b:00.0"
		})
	}
	e := &Expect{}
	e.GPUs.NVLinksPerGPU = 18
	rep := run(t, n, Options{Root: "/nonexistent", Expect: e})
	if !rep.Healthy {
		t.Fatalf("unhealthy: %s", rep.Summary())
	}
	want(t, result(t, rep, "gpu.visible"), Pass, "all 2 AMD GPUs listed by KFD", "all 8 GPUs answer NVML")
	want(t, result(t, rep, "gpu.ecc"), Pass, "no uncorrectable ECC errors on 8 GPUs")
	want(t, result(t, rep, "nvlink.active"), Pass, "8 GPUs with 18 active NVLinks each")
	want(t, result(t, rep, "amd.xgmi"), Pass, "2 GPUs of XGMI hive", "each with a direct link to the 1 others")
	want(t, result(t, rep, "topo.gdr"), Pass, "NVIDIA GPUs: nvidia_peermem loaded", "AMD GPUs: amdkfd peer memory registered")

	// An NVIDIA failure and an AMD failure in one check: the failure
	// leads, the other vendor's verdict follows.
	gpuByIndex(&n, 9).State = topology.GPUKFDDenied
	rep = run(t, n, Options{Root: "/nonexistent", Only: []string{"gpu.visible"}})
	r := rep.Results[0]
	want(t, r, Fail, "GPU 9 (0000:2b:00.0): KFD denies it (EPERM)")
	if !strings.HasSuffix(r.Reason, "; all 8 GPUs answer NVML") {
		t.Errorf("reason %q", r.Reason)
	}
	gpuByIndex(&n, 9).State = topology.GPUOK
	gpuByIndex(&n, 0).Health.ECCUncorrectedVolatile = ptr(uint64(2))
	gpuByIndex(&n, 8).AMD.RAS = []topology.RASCount{{Block: "umc", UE: 1}}
	rep = run(t, n, Options{Root: "/nonexistent", Only: []string{"gpu.ecc", "amd.ras"}})
	// DGX H100: GPU 0 is at 1b:00.0 (the dgx-h100 fixture, NVIDIA's map).
	want(t, rep.Results[0], Fail, "GPU 0 (0000:1b:00.0) has 2 uncorrectable volatile ECC errors")
	want(t, rep.Results[1], Fail, "GPU 8 (0000:05:00.0): 1 uncorrectable RAS error in umc")
	// A selection of AMD GPUs alone: the NVML checks do not apply.
	rep = run(t, n, Options{Root: "/nonexistent", GPUs: []int{8, 9}, Only: []string{"gpu.ecc"}})
	want(t, rep.Results[0], Skip, "no NVIDIA GPU (2 AMD GPUs)")
}
