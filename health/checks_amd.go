package health

import (
	"context"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The AMD Instinct side of the checks. An AMD GPU has no NVML, no NVRM
// XIDs and no NVLink: the checks of NVIDIA's machinery judge the NVIDIA
// GPUs only (nvidiaOnly), and the amd.* checks judge the AMD ones from
// what amdgpu and amdkfd say (topology.GPU.AMD, Node.ROCm): XGMI links,
// RAS error counts, PCIe replays and the IOMMU mode RCCL asks for.
// gpu.visible and topo.gdr judge each vendor's GPUs by its own rules
// (KFD instead of NVML; amdkfd peer memory or dma-buf instead of
// nvidia_peermem). Rules and sources: docs/health.md, "AMD Instinct".

// isNVIDIA: every GPU that is not AMD's (hand-built nodes leave Vendor
// empty; discovery sets 0x10de).
func isNVIDIA(g topology.GPU) bool { return !g.IsAMD() }

// byVendor splits GPUs into the NVIDIA and the AMD ones, keeping order.
func byVendor(gpus []topology.GPU) (nv, amd []topology.GPU) {
	for _, g := range gpus {
		if g.IsAMD() {
			amd = append(amd, g)
		} else {
			nv = append(nv, g)
		}
	}
	return nv, amd
}

// withGPUs is in with the selection narrowed to gpus (the same Node,
// options and compute NICs).
func (in *Input) withGPUs(gpus []topology.GPU) *Input {
	sub := *in
	sub.gpus = gpus
	return &sub
}

// nvidiaOnly runs a check of NVIDIA's own machinery (NVML's answers, NVRM
// XIDs, NVLink) on the selected NVIDIA GPUs only. Where the selection
// holds AMD GPUs and no NVIDIA one it skips ("no NVIDIA GPU", with what
// covers the AMD GPUs instead) rather than reading the AMD GPUs' absent
// NVML answers as "not supported". A selection without AMD GPUs runs the
// check as it is.
func nvidiaOnly(instead string, run func(context.Context, *Input) Result) func(context.Context, *Input) Result {
	return func(ctx context.Context, in *Input) Result {
		nv, amd := byVendor(in.gpus)
		switch {
		case len(amd) == 0:
			return run(ctx, in)
		case len(nv) == 0:
			r := skip("no NVIDIA GPU (%s)", plural(len(amd), "AMD GPU"))
			if instead != "" {
				r.Reason += ": " + instead
			}
			return r
		}
		return run(ctx, in.withGPUs(nv))
	}
}

// amdOnly runs an amd.* check on the selected AMD GPUs; it skips where
// the selection has none.
func amdOnly(run func(context.Context, *Input) Result) func(context.Context, *Input) Result {
	return func(ctx context.Context, in *Input) Result {
		_, amd := byVendor(in.gpus)
		if len(amd) == 0 {
			return skip("no AMD GPU")
		}
		return run(ctx, in.withGPUs(amd))
	}
}

// mergeVendors joins the results a check got for each vendor's GPUs of a
// mixed node into one: the worst verdict, the reasons worst first (so the
// summary line names the failure), the hints and details of the warn and
// fail parts. One result is returned as it is.
func mergeVendors(rs ...Result) Result {
	if len(rs) == 1 {
		return rs[0]
	}
	rs = slices.Clone(rs)
	sortfn.SortStable(rs, func(a, b Result) int { return b.Verdict.rank() - a.Verdict.rank() })
	out := Result{Verdict: rs[0].Verdict}
	var reasons, hints []string
	for _, r := range rs {
		reasons = append(reasons, r.Reason)
		if r.Verdict != Fail && r.Verdict != Warn {
			continue
		}
		if r.Hint != "" && !slices.Contains(hints, r.Hint) {
			hints = append(hints, r.Hint)
		}
		if len(r.Details) > 0 {
			out.Details = append(out.Details, r.Details...)
		} else {
			out.Details = append(out.Details, r.Reason)
		}
	}
	if len(out.Details) < 2 {
		out.Details = nil
	}
	out.Reason = strings.Join(reasons, "; ")
	out.Hint = strings.Join(hints, "; ")
	return out
}

// amdVisible is gpu.visible for AMD GPUs: amdkfd must list each GPU the
// PCI bus shows (topology.GPUNotInKFD: amdgpu not loaded, not bound, or
// the GPU failed to initialise), and let this process use it
// (topology.GPUKFDDenied: KFD answers EPERM because the device cgroup
// does not give the container the GPU).
func amdVisible(gpus []topology.GPU) Result {
	var bad, hints []string
	notInKFD, denied := false, false
	for _, g := range gpus {
		switch g.State {
		case topology.GPUOK:
		case topology.GPUNotInKFD:
			notInKFD = true
			bad = append(bad, gpuName(g)+" is on the PCI bus but KFD lists no node for it: amdgpu/amdkfd is not loaded, not bound to it, or the GPU failed to initialise")
		case topology.GPUKFDDenied:
			denied = true
			bad = append(bad, fmt.Sprintf("%s: KFD denies it (EPERM): the device cgroup does not give this container %s and /dev/kfd", gpuName(g), renderNode(g)))
		default:
			bad = append(bad, fmt.Sprintf("%s: state %s", gpuName(g), g.State))
		}
	}
	if notInKFD {
		hints = append(hints, "load amdgpu (modprobe amdgpu; AMD's boot settings blacklist it with modprobe.blacklist=amdgpu and load it after boot: check that ran) and read dmesg | grep -i amdgpu for why the GPU did not initialise; reboot, then RMA if it stays out")
	}
	if denied {
		hints = append(hints, "give the container the GPU: /dev/kfd and the GPU's /dev/dri/renderD<N> (docker --device, or the AMD device plugin's amd.com/gpu resource); "+
			"if it is meant to hold only some GPUs, select them with --gpus")
	}
	return verdictOf(bad, Fail, strings.Join(hints, "; "),
		fmt.Sprintf("all %s listed by KFD (amdgpu/amdkfd)", plural(len(gpus), "AMD GPU")))
}

// renderNode names an AMD GPU's render node where KFD said it.
func renderNode(g topology.GPU) string {
	if g.AMD != nil && g.AMD.RenderMinor != nil {
		return fmt.Sprintf("/dev/dri/renderD%d", *g.AMD.RenderMinor)
	}
	return "the GPU's /dev/dri/renderD node"
}

func fullMesh(g topology.GPU) bool { return g.AMD.FullMeshXGMI() }

func hopsWord(h int) string {
	if h == 0 {
		return "no XGMI link"
	}
	return plural(h, "hop")
}

// checkXGMI: every AMD GPU of an XGMI hive reaches the others over
// direct (one-hop) XGMI links, which are the only ones RCCL puts in its
// topology (topology.XGMIDirect decides what is one). On full-mesh boards
// (topology.AMDGPU.FullMeshXGMI) each pair of the hive's selected GPUs must have one,
// seen from both sides, and a GPU of the node's kind outside the hive its
// peers share has lost XGMI altogether. Elsewhere each selected GPU must
// have as many direct peers as the best-linked member: the most direct
// KFD links, or linked peers amdgpu's xgmi_num_links names
// (AMDGPU.XGMILinkedPeers), any member has, at most the hive's other
// members.
func checkXGMI(_ context.Context, in *Input) Result {
	type hive struct {
		id      string
		members []topology.GPU // the node's KFD-listed GPUs in it
	}
	var hives []hive
	for _, g := range in.Node.GPUs {
		if !g.IsAMD() || g.AMD == nil || g.AMD.HiveID == "" {
			continue
		}
		i := slices.IndexFunc(hives, func(h hive) bool { return h.id == g.AMD.HiveID })
		if i < 0 {
			hives = append(hives, hive{id: g.AMD.HiveID})
			i = len(hives) - 1
		}
		hives[i].members = append(hives[i].members, g)
	}
	selected := func(g topology.GPU) bool {
		return slices.ContainsFunc(in.gpus, func(s topology.GPU) bool { return s.BusID == g.BusID })
	}
	var bad, ok []string
	// A full-mesh GPU KFD lists outside the hive the others of its ISA
	// share has no XGMI link at all.
	for _, g := range in.gpus {
		if g.AMD == nil || g.AMD.HiveID != "" || !fullMesh(g) {
			continue
		}
		for _, h := range hives {
			if fullMesh(h.members[0]) && h.members[0].AMD.GFXTarget == g.AMD.GFXTarget && len(h.members) > 1 {
				bad = append(bad, fmt.Sprintf("%s is in no XGMI hive while GPU %s are in hive %s: it has no XGMI link to them", gpuName(g), gpuIndices(h.members), h.id))
				break
			}
		}
	}
	checked := 0
	for _, h := range hives {
		var sel []topology.GPU
		for _, g := range h.members {
			if selected(g) {
				sel = append(sel, g)
			}
		}
		if len(h.members) < 2 || len(sel) == 0 {
			continue
		}
		if fullMesh(h.members[0]) {
			if len(sel) < 2 {
				continue
			}
			checked += len(sel)
			n := len(bad)
			for i, a := range sel {
				for _, b := range sel[i+1:] {
					if !topology.XGMIDirect(a, b, true) {
						ha, hb := a.AMD.XGMIHops(b.BusID), b.AMD.XGMIHops(a.BusID)
						bad = append(bad, fmt.Sprintf("%s ↔ %s: no direct XGMI link (GPU %d sees %s, GPU %d sees %s)",
							gpuName(a), gpuName(b), a.Index, hopsWord(ha), b.Index, hopsWord(hb)))
					}
				}
			}
			if len(bad) == n {
				ok = append(ok, fmt.Sprintf("%s of XGMI hive %s each with a direct link to the %d others", plural(len(sel), "GPU"), h.id, len(sel)-1))
			}
			continue
		}
		want := 0
		for _, g := range h.members {
			want = max(want, g.AMD.DirectXGMIPeers())
			if g.AMD.XGMILinkedPeers != nil {
				want = max(want, *g.AMD.XGMILinkedPeers)
			}
		}
		want = min(want, len(h.members)-1)
		checked += len(sel)
		n := len(bad)
		for _, g := range sel {
			if d := g.AMD.DirectXGMIPeers(); d < want {
				bad = append(bad, fmt.Sprintf("%s has direct XGMI links to %d of the %d GPUs it should reach in hive %s", gpuName(g), d, want, h.id))
			}
		}
		if len(bad) == n {
			ok = append(ok, fmt.Sprintf("%s of XGMI hive %s with %d direct links each", plural(len(sel), "GPU"), h.id, want))
		}
	}
	if len(bad) > 0 {
		return verdictOf(bad, Fail, "RCCL puts only direct (one-hop) XGMI links in its topology, so such a pair talks over PCIe or through another GPU, at a fraction of XGMI's bandwidth: "+
			"see amd-smi topology / rocm-smi --showtopo and amd-smi xgmi; reset the GPUs or reboot; a link that stays down needs the OAM or the baseboard reseated or replaced", "")
	}
	if checked == 0 {
		switch {
		case len(hives) == 0:
			return skip("no XGMI hive: the AMD GPUs reach each other over PCIe only")
		default:
			return skip("fewer than 2 selected GPUs in an XGMI hive: no pair to check")
		}
	}
	return Result{Verdict: Pass, Reason: strings.Join(ok, "; ")}
}

// plural64 is plural for a counter.
func plural64(n uint64, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// gpuIndices lists GPUs by index ("0,1,2").
func gpuIndices(gs []topology.GPU) string {
	idx := make([]int, len(gs))
	for i, g := range gs {
		idx[i] = g.Index
	}
	return joinInts(idx)
}

// checkRAS reads amdgpu's RAS error counts (ras/<block>_err_count, since
// the driver loaded: the analogue of NVML's volatile ECC counts, which
// gpu.ecc judges). An uncorrectable error in any block fails, as
// gpu.ecc fails a volatile uncorrectable ECC error; deferred (poisoned,
// not yet consumed) and correctable errors warn. Skip where no selected
// GPU has RAS counts.
func checkRAS(_ context.Context, in *Input) Result {
	var bad, warn []string
	known := 0
	for _, g := range in.gpus {
		if g.AMD == nil || len(g.AMD.RAS) == 0 {
			continue
		}
		known++
		for _, c := range g.AMD.RAS {
			switch {
			case c.UE > 0:
				msg := fmt.Sprintf("%s: %s in %s", gpuName(g), plural64(c.UE, "uncorrectable RAS error"), c.Block)
				if c.CE > 0 {
					msg += fmt.Sprintf(" (and %d correctable)", c.CE)
				}
				bad = append(bad, msg)
			case c.DE != nil && *c.DE > 0:
				warn = append(warn, fmt.Sprintf("%s: %s in %s (poisoned data not yet consumed)", gpuName(g), plural64(*c.DE, "deferred RAS error"), c.Block))
			case c.CE > 0:
				warn = append(warn, fmt.Sprintf("%s: %s in %s", gpuName(g), plural64(c.CE, "correctable RAS error"), c.Block))
			}
		}
	}
	if known == 0 {
		return skip("amdgpu reports no RAS error counts (no ras/*_err_count: RAS off or not supported)")
	}
	if len(bad) > 0 {
		return verdictOf(append(bad, warn...), Fail,
			"drain the node and reset the GPU (amd-smi reset) once no job runs; an uncorrectable HBM (umc) error retires its page (ras/gpu_vram_bad_pages); errors that return after a reset mean RMA", "")
	}
	if len(warn) > 0 {
		return verdictOf(warn, Warn,
			"corrected errors harmed nothing yet; a count that keeps growing (amd-smi metric --ecc-blocks) predicts an uncorrectable one: plan a reset, RMA if it climbs; deferred errors become uncorrectable when the data is read", "")
	}
	return Result{Verdict: Pass, Reason: fmt.Sprintf("no RAS errors on %s", plural(known, "GPU"))}
}

// checkPCIeReplay reads amdgpu's pcie_replay_count (link-level replays
// since boot: the packets the GPU's PCIe link had to resend). Replays
// keep the data intact, so any count warns and none fails; a link that
// trained narrow is gpu.pcie_link's.
func checkPCIeReplay(_ context.Context, in *Input) Result {
	var warn []string
	known := 0
	for _, g := range in.gpus {
		if g.AMD == nil || g.AMD.PCIeReplayCount == nil {
			continue
		}
		known++
		if c := *g.AMD.PCIeReplayCount; c > 0 {
			warn = append(warn, fmt.Sprintf("%s: %s since boot", gpuName(g), plural64(c, "PCIe replay")))
		}
	}
	if known == 0 {
		return skip("amdgpu reports no PCIe replay count (no pcie_replay_count; an SR-IOV VF has none)")
	}
	return verdictOf(warn, Warn,
		"the link resends packets: a count that keeps growing means a marginal link; reseat the GPU or its riser, look at lspci -vvv (LnkSta, AER) and dmesg | grep -i aer; the count restarts at boot",
		fmt.Sprintf("no PCIe replays on %s", plural(known, "GPU")))
}

// checkAMDIOMMU: RCCL warns at init when iommu=pt is not on the kernel
// command line ("can lead to system instability or hang"), except on
// Hyper-V and cray kernels, and AMD's kernel parameters ask for it
// (passthrough: no DMA translation for the adapters). The mode is
// topology's (the IOMMU group types of the GPUs and RDMA NICs):
// passthrough and off pass, translated fails (a fabric check: the
// profiles decide), unknown warns. A VM is skipped: the host's IOMMU is
// the one that matters there.
func checkAMDIOMMU(_ context.Context, in *Input) Result {
	if in.Node.Platform.Virtual {
		return skip("a VM: the hypervisor owns the IOMMU (RCCL skips its iommu=pt check on Hyper-V)")
	}
	io := in.Node.Storage.GDS.IOMMU
	desc := fmt.Sprintf("IOMMU %s (%s; cmdline %s)", orUnknown(string(io.Mode)), iommuUnits(io.Units), orWord(strings.Join(io.Cmdline, " "), "sets no IOMMU option"))
	if dev := translatedDevice(io); dev != "" {
		desc += "; " + dev
	}
	pt := slices.ContainsFunc(io.Cmdline, func(o string) bool { return strings.Contains(o, "iommu=pt") })
	switch io.Mode {
	case topology.IOMMUPassthrough:
		r := Result{Verdict: Pass, Reason: desc + ": passthrough, as AMD and RCCL ask"}
		if !pt {
			r.Reason += " (RCCL reads only the command line and still prints its missing iommu=pt warning)"
		}
		return r
	case topology.IOMMUOff:
		return Result{Verdict: Pass, Reason: desc + ": no DMA translation (AMD's guidance is iommu=pt; RCCL prints its missing iommu=pt warning)"}
	case topology.IOMMUTranslated:
		why := desc + ": GPU and NIC DMA is translated; RCCL warns that running without iommu=pt can lead to system instability or hang, and AMD asks for iommu=pt"
		if pt {
			why += " (iommu=pt is on the command line, yet the groups translate: a later option or the kernel overrides it)"
		}
		return Result{Verdict: Fail, Reason: why,
			Hint: "boot with iommu=pt (AMD Instinct kernel parameters: pci=realloc=off pci=bfsort iommu=pt, plus intel_iommu=on on Intel hosts) and reboot"}
	}
	return Result{Verdict: Warn, Reason: desc + ": the mode could not be told (no IOMMU group type of a GPU or RDMA NIC readable)",
		Hint: "check /sys/kernel/iommu_groups/*/type of the GPUs: AMD's guidance is iommu=pt (identity groups)"}
}

// amdGDR is topo.gdr for AMD GPUs. RCCL's GPUDirect RDMA takes amdkfd's
// peer-memory client where it is registered (memory_peers/amdkfd/version,
// what RCCL's ncclIbGdrSupport looks for), else dma-buf: ROCr's
// hsa_amd_portable_export_dmabuf (ROCm 5.6 or later) and a kernel with
// ib_umem_dmabuf (5.12 or later; RCCL also wants CONFIG_DMABUF_MOVE_NOTIFY
// and CONFIG_PCI_P2PDMA), and RCCL uses it only with NCCL_DMABUF_ENABLE=1
// where its default is 0 (RCCL 2.21.5). Neither: fail. nvidia_peermem
// plays no part.
func amdGDR(n topology.Node) Result {
	if n.ROCm != nil && n.ROCm.PeerMemory != "" {
		return Result{Verdict: Pass, Reason: fmt.Sprintf("amdkfd peer memory registered (memory_peers/amdkfd version %s): RCCL's GPUDirect RDMA path", n.ROCm.PeerMemory)}
	}
	kmaj, kmin, kok := kernelVersion(n.Kernel.Release)
	if kok && (kmaj > 5 || kmaj == 5 && kmin >= 12) {
		return Result{Verdict: Pass, Reason: fmt.Sprintf("dma-buf: kernel %d.%d (amdkfd peer memory not registered): RCCL takes GPUDirect RDMA through dma-buf with NCCL_DMABUF_ENABLE=1 (ROCm 5.6 or later)", kmaj, kmin)}
	}
	why := "amdkfd peer memory not registered (no memory_peers/amdkfd/version)"
	if !kok {
		why += " and the kernel version is unknown (dma-buf needs 5.12+)"
	} else {
		why += fmt.Sprintf(" and kernel %d.%d is older than 5.12 (no dma-buf)", kmaj, kmin)
	}
	return Result{Verdict: Fail, Reason: why + ": RCCL moves the AMD GPUs' network traffic through host memory",
		Hint: "amdkfd registers its peer-memory client with MLNX OFED's ib_peer_mem when the first ROCm process opens the GPU: run one (rocminfo) and check again; " +
			"else install MLNX OFED / the amdgpu DKMS driver with peer memory, or move to a kernel of 5.12 or later and run RCCL with NCCL_DMABUF_ENABLE=1"}
}
