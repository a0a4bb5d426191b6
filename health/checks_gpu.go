package health

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

var allChecks = []Check{
	{"gpu.count", GroupGPU, "GPU count and model: the expected number, all the same model", checkGPUCount},
	{"gpu.visible", GroupGPU, "every GPU on the PCI bus answers its driver (NVML; KFD for AMD GPUs); none lost or denied", checkGPUVisible},
	{"gpu.pcie_link", GroupGPU, "GPU PCIe link at its maximum width", checkPCIeLink},
	{"gpu.row_remap", GroupGPU, "no row remapping pending or failed", nvidiaOnly("amd.ras counts their memory errors", needsNVML(checkRowRemap))},
	{"gpu.ecc", GroupGPU, "no uncorrectable volatile ECC errors", nvidiaOnly("amd.ras counts their memory errors", needsNVML(checkECC))},
	{"gpu.retired_pages", GroupGPU, "no page retirement pending, fewer than 63 retired pages", nvidiaOnly("amd.ras counts their memory errors", needsNVML(checkRetiredPages))},
	{"gpu.xid", GroupGPU, "no fatal XID in the kernel log since boot", nvidiaOnly("XIDs are the NVIDIA driver's", checkXID)},
	{"gpu.recovery_action", GroupGPU, "NVML asks for no recovery action", nvidiaOnly("a recovery action is NVML's", needsNVML(checkRecoveryAction))},
	{"gpu.fabric", GroupGPU, "NVLink fabric registration completed with success, health mask clear, one clique per multi-node NVLink node", nvidiaOnly("amd.xgmi checks their XGMI links", needsNVML(checkFabric))},
	{"gpu.imex", GroupFabric, "a usable IMEX channel on a multi-node NVLink node (NCCL's MNNVL needs one)", nvidiaOnly("IMEX is NVLink's", needsNVML(checkIMEX))},
	{"gpu.persistence", GroupGPU, "persistence mode on", nvidiaOnly("persistence mode is NVML's", needsNVML(checkPersistence))},
	{"nvlink.active", GroupGPU, "every GPU has the expected number of active NVLinks", nvidiaOnly("amd.xgmi checks their XGMI links", checkNVLinkActive)},
	{"amd.xgmi", GroupGPU, "every AMD GPU of an XGMI hive has a direct XGMI link to every other (full-mesh MI300/MI350 boards)", amdOnly(checkXGMI)},
	{"amd.ras", GroupGPU, "no uncorrectable amdgpu RAS errors on the AMD GPUs; corrected and deferred ones warn", amdOnly(checkRAS)},
	{"amd.pcie_replay", GroupGPU, "no PCIe replays on the AMD GPUs' links since boot (warns)", amdOnly(checkPCIeReplay)},
	{"nic.count", GroupFabric, "the expected number of compute NICs; one per selected GPU", checkNICCount},
	{"nic.port_state", GroupFabric, "compute NIC ports ACTIVE and LinkUp", checkPortState},
	{"nic.rate", GroupFabric, "compute NIC ports at or above the expected rate", checkRate},
	{"nic.errors", GroupFabric, "no link error counter increases over --interval", checkNICErrors},
	{"nic.firmware", GroupFabric, "all compute NICs run one firmware version", checkFirmware},
	{"topo.aligned", GroupFabric, "every GPU has a compute NIC at PXB or better, never across sockets", checkAligned},
	{"topo.gdr", GroupFabric, "GPUDirect RDMA available: nvidia_peermem loaded or dma-buf (AMD GPUs: amdkfd peer memory or dma-buf)", checkGDR},
	{"amd.iommu", GroupFabric, "IOMMU in passthrough (iommu=pt) or off on a bare-metal AMD GPU node, as AMD and RCCL ask", amdOnly(checkAMDIOMMU)},
	{"storage.gds", GroupStorage, "a GPUDirect Storage path: nvidia-fs loaded or P2PDMA supported, not compat mode", needsGDSTarget(checkGDS)},
	{"storage.acs", GroupStorage, "no ACS on the bridges between a GPU and the storage in its PCIe switch", needsGDSTarget(checkACS)},
	{"storage.iommu", GroupStorage, "IOMMU mode as NVIDIA's GDS guidance has it: off or passthrough on x86_64, translated on Grace", needsGDSTarget(checkIOMMU)},
	{"storage.ports", GroupStorage, "storage NIC ports up", checkStoragePorts},
	{"storage.nvme-link", GroupStorage, "data NVMe drives' PCIe links at full width and speed", needsGDSTarget(checkNVMeLink)},
	{"storage.locality", GroupStorage, "every GPU has a storage NIC on its NUMA node or nearer, never across sockets", needsGDSTarget(checkLocality)},
	{"jobs.aligned", GroupJobs, "no running GPU process is bound to CPUs none of which is local to its GPU (only with --jobs; unbound and partly warn)", checkJobs},
}

// needsNVML runs a check that reads NVML's answers only where NVML
// answered: where it failed, the check is not run and says so (gpu.visible
// fails the gate), instead of reading the missing answers as "not
// supported".
func needsNVML(run func(context.Context, *Input) Result) func(context.Context, *Input) Result {
	return func(ctx context.Context, in *Input) Result {
		if in.Node.NVML.Failed && len(in.gpus) > 0 {
			return skip("not checked: NVML failed (%s); gpu.visible fails", orUnknown(in.Node.NVML.Error))
		}
		return run(ctx, in)
	}
}

func checkGPUCount(_ context.Context, in *Input) Result {
	n := in.Node
	if n.NoPCIBus {
		return noPCIBus("GPUs")
	}
	if len(n.GPUs) == 0 && len(n.Unsupported) > 0 {
		a := n.Unsupported[0]
		name := a.Name
		if name == "" {
			name = "class " + a.Class
		}
		return Result{Verdict: Fail,
			Reason: fmt.Sprintf("0 supported GPUs: %s on the PCI bus are not supported yet (%s, %s:%s, driver %s, first at %s)",
				plural(len(n.Unsupported), "accelerator"), name, strings.TrimPrefix(a.Vendor, "0x"), strings.TrimPrefix(a.Device, "0x"), orUnknown(a.Driver), a.BusID),
			Hint: "gpuaffinity checks NVIDIA GPUs and AMD Instinct GPUs; check this node with its vendor's tools"}
	}
	if len(n.GPUs) == 0 {
		r := Result{Verdict: Fail, Reason: "no NVIDIA GPU on the PCI bus",
			Hint: "check the GPUs are seated and powered; lspci -d 10de:"}
		if in.Expect == nil || in.Expect.GPUs.Count == 0 {
			r.Reason += " (nothing expected either)"
		}
		return r
	}
	models := map[string][]int{}
	var order []string
	for _, g := range in.gpus {
		m := g.Model
		if m == "" {
			m = "device " + g.Device
		}
		if _, ok := models[m]; !ok {
			order = append(order, m)
		}
		models[m] = append(models[m], g.Index)
	}
	if e := in.Expect; e != nil {
		if in.GPUs == nil && e.GPUs.Count > 0 && len(n.GPUs) != e.GPUs.Count {
			return Result{Verdict: Fail, Reason: fmt.Sprintf("%d GPUs on the PCI bus, expected %d", len(n.GPUs), e.GPUs.Count),
				Hint: "a GPU fell off the bus or is not seated; reboot, then RMA if it stays missing"}
		}
		if e.GPUs.Model != "" {
			var bad []string
			for _, g := range in.gpus {
				switch {
				case g.Model == "":
					bad = append(bad, fmt.Sprintf("%s: model unknown (%s), expected %s: cannot verify", gpuName(g), nvmlState(in.Node), e.GPUs.Model))
				case g.Model != e.GPUs.Model:
					bad = append(bad, fmt.Sprintf("%s is %s, expected %s", gpuName(g), g.Model, e.GPUs.Model))
				}
			}
			if len(bad) > 0 {
				return verdictOf(bad, Fail, "the node is not the hardware the expectations were learned on", "")
			}
		}
	}
	if len(order) > 1 {
		var parts []string
		for _, m := range order {
			parts = append(parts, fmt.Sprintf("%s on GPU %s", m, joinInts(models[m])))
		}
		return Result{Verdict: Warn, Reason: "GPUs differ: " + strings.Join(parts, "; "),
			Hint: "mixed GPU models; pass --expect to say which is right"}
	}
	return Result{Verdict: Pass, Reason: fmt.Sprintf("%s, %s%s", plural(len(in.gpus), "GPU"), order[0], partitionNote(in.gpus))}
}

// partitionNote says how many compute partitions the AMD GPUs are split
// into, where they are (CPX: ", 64 compute partitions (CPX)"): each is a
// GPU to HIP, RCCL and Slurm, while the checks judge the physical GPUs.
func partitionNote(gpus []topology.GPU) string {
	parts, modes := 0, []string{}
	for _, g := range gpus {
		if g.AMD == nil || len(g.AMD.Partitions) < 2 {
			continue
		}
		parts += len(g.AMD.Partitions)
		if !slices.Contains(modes, g.AMD.ComputePartition) {
			modes = append(modes, g.AMD.ComputePartition)
		}
	}
	if parts == 0 {
		return ""
	}
	return fmt.Sprintf(", %d compute partitions (%s)", parts, strings.Join(modes, ", "))
}

// checkGPUVisible judges each vendor's GPUs by its own driver: NVIDIA
// GPUs against NVML (nvmlVisible), AMD GPUs against KFD (amdVisible).
func checkGPUVisible(_ context.Context, in *Input) Result {
	if len(in.gpus) == 0 {
		return skip("no GPU on the PCI bus to compare NVML with")
	}
	nv, amd := byVendor(in.gpus)
	var rs []Result
	if len(nv) > 0 {
		rs = append(rs, nvmlVisible(in.Node, nv))
	}
	if len(amd) > 0 {
		rs = append(rs, amdVisible(amd))
	}
	return mergeVendors(rs...)
}

// nvmlVisible: every NVIDIA GPU on the bus answers NVML.
func nvmlVisible(n topology.Node, gpus []topology.GPU) Result {
	if nv := n.NVML; nv.Source == "none" || nv.Source == "" {
		if !nv.Failed {
			// Only a replayed root without nvml.json: nothing of NVML
			// was captured for it.
			return skip("NVML not captured for this root (%s): cannot compare it with the PCI bus", orUnknown(nv.Error))
		}
		return Result{Verdict: Fail,
			Reason: fmt.Sprintf("NVML failed (%s): the %s on the PCI bus cannot be checked", orUnknown(nv.Error), plural(len(gpus), "GPU")),
			Hint:   nvmlHint(nv.Error)}
	}
	var bad []string
	for _, g := range gpus {
		switch g.State {
		case topology.GPUOK, topology.GPUNoNVML:
		case topology.GPUNotInNVML:
			bad = append(bad, gpuName(g)+" is on the PCI bus but NVML does not list it")
		case topology.GPULost:
			bad = append(bad, gpuName(g)+" is lost (NVML GPU_IS_LOST: fallen off the bus)")
		default:
			bad = append(bad, fmt.Sprintf("%s: NVML state %s", gpuName(g), g.State))
		}
	}
	return verdictOf(bad, Fail, "reset the GPU (nvidia-smi -r) or reboot; look for XID 79 in dmesg",
		fmt.Sprintf("all %s answer NVML", plural(len(gpus), "GPU")))
}

// nvmlHint says what to do about an NVML initialisation failure, by the
// nvml.Return its error names.
func nvmlHint(err string) string {
	switch {
	case strings.Contains(err, "ERROR_LIB_RM_VERSION_MISMATCH"):
		return "the NVML library and the loaded nvidia kernel module differ (a driver upgrade without a reboot): reboot, or unload and reload the nvidia modules"
	case strings.Contains(err, "ERROR_DRIVER_NOT_LOADED"):
		return "the nvidia kernel module is not loaded: modprobe nvidia, and see dmesg for why it did not load"
	case strings.Contains(err, "ERROR_NO_PERMISSION"):
		return "no permission to talk to the driver: run as root or fix the permissions of /dev/nvidia*"
	case strings.Contains(err, "ERROR_LIBRARY_NOT_FOUND"):
		return "libnvidia-ml.so.1 was not found: install the driver's NVML library; in a container, run it with the NVIDIA container toolkit"
	case strings.Contains(err, "ERROR_FUNCTION_NOT_FOUND"):
		return "the NVML library is older than the calls gpuaffinity needs: install a matching driver"
	}
	return "nvidia-smi will show the same failure; look for XIDs in dmesg, then reset the GPUs or reboot"
}

func checkPCIeLink(_ context.Context, in *Input) Result {
	if len(in.gpus) == 0 {
		return skip("no GPU")
	}
	var bad, notes []string
	busLink := map[string]topology.PCILink{}
	for _, d := range in.Node.PCIDevices {
		busLink[d.BusID] = d.Link
	}
	for _, g := range in.gpus {
		w, mw := g.PCIe.Width, g.PCIe.MaxWidth
		if l, ok := busLink[g.BusID]; ok && l.Width > 0 && l.MaxWidth > 0 && l.Width < l.MaxWidth && (w == 0 || l.Width < w) {
			w, mw = l.Width, l.MaxWidth // sysfs sees a narrower link than NVML
		}
		if w > 0 && mw > 0 && w < mw {
			bad = append(bad, fmt.Sprintf("%s PCIe link x%d of x%d", gpuName(g), w, mw))
			continue
		}
		if e := in.Expect; e != nil && e.GPUs.PCIeWidth > 0 && w < e.GPUs.PCIeWidth {
			if w == 0 {
				bad = append(bad, fmt.Sprintf("%s PCIe link width unknown, expected x%d: cannot verify", gpuName(g), e.GPUs.PCIeWidth))
			} else {
				bad = append(bad, fmt.Sprintf("%s PCIe link x%d, expected x%d", gpuName(g), w, e.GPUs.PCIeWidth))
			}
			continue
		}
		if g.PCIe.Gen > 0 && g.PCIe.MaxGen > 0 && g.PCIe.Gen < g.PCIe.MaxGen {
			notes = append(notes, fmt.Sprintf("GPU %d", g.Index))
		}
	}
	if len(bad) > 0 {
		return verdictOf(bad, Fail, "reseat the GPU or its riser; a narrow link halves host↔GPU bandwidth", "")
	}
	ok := fmt.Sprintf("%s at full PCIe width", plural(len(in.gpus), "GPU"))
	if len(notes) > 0 {
		ok += fmt.Sprintf("; %s below max generation (normal at idle)", strings.Join(notes, ","))
	}
	return Result{Verdict: Pass, Reason: ok}
}

// nvmlField collects a health field over the selected GPUs: it skips when
// no GPU reports it and otherwise lists the GPUs for which bad says so.
func nvmlField(in *Input, field string, bad func(h topology.GPUHealth) (string, bool, bool)) ([]string, int) {
	var out []string
	known := 0
	for _, g := range in.gpus {
		msg, isKnown, isBad := bad(g.Health)
		if !isKnown {
			continue
		}
		known++
		if isBad {
			out = append(out, gpuName(g)+" "+msg)
		}
	}
	return out, known
}

func checkRowRemap(_ context.Context, in *Input) Result {
	bad, known := nvmlField(in, "remap", func(h topology.GPUHealth) (string, bool, bool) {
		if h.RemapPending == nil && h.RemapFailure == nil {
			return "", false, false
		}
		switch {
		case h.RemapFailure != nil && *h.RemapFailure:
			return "row remapping failed", true, true
		case h.RemapPending != nil && *h.RemapPending:
			return "row remapping pending", true, true
		}
		return "", true, false
	})
	if known == 0 {
		return skip("NVML reports no row remapping (absent or not supported)")
	}
	hint := "pending: reset the GPU (no jobs running) to apply the remap; failed: RMA the GPU"
	return verdictOf(bad, Fail, hint, fmt.Sprintf("no remap pending or failed on %s", plural(known, "GPU")))
}

func checkECC(_ context.Context, in *Input) Result {
	bad, known := nvmlField(in, "ecc", func(h topology.GPUHealth) (string, bool, bool) {
		if h.ECCUncorrectedVolatile == nil {
			return "", false, false
		}
		v := *h.ECCUncorrectedVolatile
		return fmt.Sprintf("has %d uncorrectable volatile ECC errors", v), true, v > 0
	})
	if known == 0 {
		return skip("NVML reports no ECC counts (absent, ECC off or not supported)")
	}
	return verdictOf(bad, Fail, "drain the node and reset the GPU; repeated errors after reset mean RMA",
		fmt.Sprintf("no uncorrectable ECC errors on %s", plural(known, "GPU")))
}

// maxRetiredPages is DCGM's limit (common/DcgmGPUHardwareLimits.h): 63
// retired pages or more fail.
const maxRetiredPages = 63

func checkRetiredPages(_ context.Context, in *Input) Result {
	bad, known := nvmlField(in, "retired", func(h topology.GPUHealth) (string, bool, bool) {
		if h.RetiredPages == nil && h.RetiredPagesPending == nil {
			return "", false, false
		}
		if h.RetiredPagesPending != nil && *h.RetiredPagesPending {
			return "has a page retirement pending", true, true
		}
		if h.RetiredPages != nil && *h.RetiredPages >= maxRetiredPages {
			return fmt.Sprintf("has %d retired pages (limit %d)", *h.RetiredPages, maxRetiredPages-1), true, true
		}
		return "", true, false
	})
	if known == 0 {
		return skip("NVML reports no page retirement (absent, or row-remapping GPU)")
	}
	return verdictOf(bad, Fail, "pending: reset the GPU to retire the pages; over the limit: RMA the GPU",
		fmt.Sprintf("page retirement healthy on %s", plural(known, "GPU")))
}

var recoveryActions = map[int]string{0: "none", 1: "GPU reset", 2: "node reboot", 3: "drain P2P", 4: "drain and reset"}

func checkRecoveryAction(_ context.Context, in *Input) Result {
	bad, known := nvmlField(in, "recovery", func(h topology.GPUHealth) (string, bool, bool) {
		if h.RecoveryAction == nil {
			return "", false, false
		}
		a := *h.RecoveryAction
		name, ok := recoveryActions[a]
		if !ok {
			name = fmt.Sprintf("action %d", a)
		}
		return "needs recovery: " + name, true, a != 0
	})
	if known == 0 {
		return skip("NVML reports no recovery action (driver before R550 or not supported)")
	}
	return verdictOf(bad, Fail, "do what NVML asks: reset the GPU or reboot the node (drain it first)",
		fmt.Sprintf("no recovery action on %s", plural(known, "GPU")))
}

func checkPersistence(_ context.Context, in *Input) Result {
	bad, known := nvmlField(in, "persistence", func(h topology.GPUHealth) (string, bool, bool) {
		if h.Persistence == nil {
			return "", false, false
		}
		return "has persistence mode off", true, !*h.Persistence
	})
	if known == 0 {
		return skip("NVML reports no persistence mode")
	}
	return verdictOf(bad, Warn, "enable nvidia-persistenced (or nvidia-smi -pm 1) so the driver stays loaded between jobs",
		fmt.Sprintf("persistence mode on for %s", plural(known, "GPU")))
}

func checkNVLinkActive(_ context.Context, in *Input) Result {
	want := 0
	if in.Expect != nil {
		want = in.Expect.GPUs.NVLinksPerGPU
	}
	visible := 0
	for _, g := range in.Node.GPUs {
		if g.NVLinkVisible {
			visible++
			if in.Expect == nil {
				want = max(want, activeLinks(g))
			}
		}
	}
	if in.Expect != nil && want > 0 {
		// Expected links must be seen on every selected GPU.
		var blind []string
		for _, g := range in.gpus {
			if !g.NVLinkVisible {
				blind = append(blind, fmt.Sprintf("%s: %d NVLinks expected, none visible (%s): cannot verify", gpuName(g), want, nvmlState(in.Node)))
			}
		}
		if len(blind) > 0 {
			return verdictOf(blind, Fail, "NVML must answer for the expected NVLinks: see gpu.visible", "")
		}
	}
	if visible == 0 {
		if in.Node.NVML.Failed {
			return skip("NVLinks not visible: NVML failed (%s); gpu.visible fails", orUnknown(in.Node.NVML.Error))
		}
		return skip("NVLinks not visible (NVML NOT_SUPPORTED: VM or PCIe card)")
	}
	if want == 0 {
		return skip("no NVLink expected (none active on any GPU)")
	}
	var bad []string
	checked := 0
	for _, g := range in.gpus {
		if !g.NVLinkVisible {
			continue
		}
		checked++
		if a := activeLinks(g); a < want {
			var down []string
			for _, l := range g.NVLinks {
				if !l.Active {
					down = append(down, fmt.Sprint(l.Link))
				}
			}
			msg := fmt.Sprintf("%s has %d of %d NVLinks active", gpuName(g), a, want)
			if len(down) > 0 {
				msg += " (down: " + strings.Join(down, ",") + ")"
			}
			bad = append(bad, msg)
		}
	}
	if checked == 0 {
		return skip("NVLinks of the selected GPUs not visible")
	}
	return verdictOf(bad, Fail, "nvidia-smi nvlink -s; reset the GPU, then reseat or RMA (an NVLink down breaks NCCL's ring and NVLS)",
		fmt.Sprintf("%s with %d active NVLinks each", plural(checked, "GPU"), want))
}

// nvmlState says why NVML answers are missing, for reasons.
func nvmlState(n topology.Node) string {
	switch nv := n.NVML; {
	case nv.Failed:
		return "NVML failed: " + orUnknown(nv.Error)
	case nv.Source == "none" || nv.Source == "":
		return "no NVML: " + orUnknown(nv.Error)
	}
	return "NVML does not report it"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// noPCIBus is the verdict of a check whose devices sit on a PCI bus the
// root does not show (sys/bus/pci/devices missing: a partial mount of
// /sys, a kernel built without PCI): it fails, saying what it could not
// see, rather than reading "none found" as "none there".
func noPCIBus(what string) Result {
	return Result{Verdict: Fail, Reason: "no PCI bus in sysfs (sys/bus/pci/devices): the " + what + " could not be seen",
		Hint: "mount /sys whole (a container needs the host's /sys), or take the snapshot again with gpuaffinity snapshot"}
}
