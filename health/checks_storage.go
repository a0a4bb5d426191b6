package health

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/pci"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The storage checks read the storage layer discovery built
// (topology.Node.Storage), the bridges' ACS state (PCIDevice.ACS) and the
// storage NICs; docs/health.md ("Storage checks") gives NVIDIA's guidance
// each one follows.

// gdsTarget says whether the node has something GPUDirect Storage would
// serve: an NVMe drive under a data mount, or a network mount of a kind
// GDS serves (NFS over TCP is compat mode only). why names the targets or
// says what is missing.
func gdsTarget(n topology.Node) (ok bool, why string) {
	var data, net []string
	for _, d := range n.Storage.NVMe {
		if d.Use == topology.NVMeData {
			data = append(data, d.Name)
		}
	}
	tcp := 0
	for _, m := range n.Storage.Mounts {
		switch {
		case m.Kind == topology.MountNFSTCP:
			tcp++
		case m.Kind.Network():
			net = append(net, fmt.Sprintf("%s (%s)", m.Target, m.Kind))
		}
	}
	if len(data) == 0 && len(net) == 0 {
		why = "no GDS target: no NVMe drive under a data mount and no RDMA network file system mounted"
		if tcp > 0 {
			why += fmt.Sprintf(" (%s over TCP: cuFile serves those in compat mode only)", plural(tcp, "NFS mount"))
		}
		return false, why
	}
	var parts []string
	if len(data) > 0 {
		parts = append(parts, "data NVMe "+strings.Join(data, ","))
	}
	if len(net) > 0 {
		parts = append(parts, "mounts "+strings.Join(net, ", "))
	}
	return true, strings.Join(parts, "; ")
}

// needsGDSTarget runs a storage check only where the node has a GDS
// target.
func needsGDSTarget(run func(context.Context, *Input) Result) func(context.Context, *Input) Result {
	return func(ctx context.Context, in *Input) Result {
		if ok, why := gdsTarget(in.Node); !ok {
			return skip("%s", why)
		}
		if !slices.ContainsFunc(in.Node.GPUs, isNVIDIA) {
			return skip("no NVIDIA GPU: GPUDirect Storage does not apply")
		}
		// GDS is NVIDIA's: the AMD GPUs of a mixed node are not judged.
		nv, amd := byVendor(in.gpus)
		switch {
		case len(amd) > 0 && len(nv) == 0:
			return skip("no NVIDIA GPU selected (%s): GPUDirect Storage does not apply", plural(len(amd), "AMD GPU"))
		case len(amd) > 0:
			in = in.withGPUs(nv)
		}
		return run(ctx, in)
	}
}

func storageNICs(n topology.Node) []topology.NIC {
	var out []topology.NIC
	for _, c := range n.NICs {
		if c.HasRole(topology.RoleStorage) {
			out = append(out, c)
		}
	}
	return out
}

// checkGDS: a GDS path exists where nvidia-fs is loaded or GDS's P2PDMA
// mode can run (topology.GDS.Available). P2PDMA serves NVMe only: network
// mounts still go through nvidia-fs.
func checkGDS(_ context.Context, in *Input) Result {
	g := in.Node.Storage.GDS
	hint := "load nvidia-fs (modprobe nvidia-fs; the GDS packages nvidia-fs-dkms / nvidia-gds install it), or meet P2PDMA's requirements (CUDA 12.8 driver, open kernel module, kernel 6.2+, Ampere or newer, nvme_core multipath=N)"
	if !g.Available() {
		miss := "requirements unknown"
		if len(g.P2PDMA.Missing) > 0 {
			miss = strings.Join(g.P2PDMA.Missing, "; ")
		}
		return Result{Verdict: Fail,
			Reason: fmt.Sprintf("no GDS path: nvidia-fs not loaded and P2PDMA not supported (%s): cuFile would run in compat mode, staging through CPU memory", miss),
			Hint:   hint}
	}
	if g.NvidiaFS {
		r := "nvidia-fs loaded"
		if g.NvidiaFSVersion != "" {
			r = "nvidia-fs " + g.NvidiaFSVersion + " loaded"
		}
		if g.P2PDMA.Supported {
			r += "; P2PDMA supported too"
		}
		return Result{Verdict: Pass, Reason: r}
	}
	var net []string
	for _, m := range in.Node.Storage.Mounts {
		if m.Kind.Network() && m.Kind != topology.MountNFSTCP {
			net = append(net, fmt.Sprintf("%s (%s)", m.Target, m.Kind))
		}
	}
	if len(net) > 0 {
		return Result{Verdict: Warn,
			Reason: fmt.Sprintf("nvidia-fs not loaded: P2PDMA serves NVMe only, so cuFile on %s would run in compat mode, staging through CPU memory", strings.Join(net, ", ")),
			Hint:   "load nvidia-fs (modprobe nvidia-fs; the GDS packages install it): network file systems need it even where P2PDMA serves NVMe"}
	}
	return Result{Verdict: Pass, Reason: "P2PDMA supported (nvidia-fs not loaded; not needed for NVMe since CUDA 12.8)"}
}

// storagePeer is one device of a GPU's nearest storage.
type storagePeer struct {
	name, busID string
}

func (p storagePeer) String() string { return fmt.Sprintf("%s (%s)", p.name, p.busID) }

// checkACS: between a GPU and a storage device behind one PCIe switch
// (PIX, PXB), every bridge below their common ancestor must have ACS off,
// or peer requests are redirected up to the root complex. Paths through
// the root complex (PHB and worse) go there anyway.
func checkACS(_ context.Context, in *Input) Result {
	n := in.Node
	nvme := map[string]string{}
	for _, d := range n.Storage.NVMe {
		nvme[d.Name] = d.BusID
	}
	nics := map[string]string{}
	for _, c := range n.NICs {
		nics[c.Name] = c.BusID
	}
	type bridgeUse struct {
		dev   *topology.PCIDevice
		pairs []string
	}
	var order []string
	uses := map[string]*bridgeUse{}
	var unplaced []string
	pairs := 0
	for _, g := range in.gpus {
		i := slices.IndexFunc(n.Storage.Pairs, func(p topology.StoragePair) bool { return p.GPU == g.Index })
		if i < 0 {
			continue
		}
		p := n.Storage.Pairs[i]
		var peers []storagePeer
		if p.NVMeClass.SharesSwitch() {
			for _, d := range p.NVMe {
				peers = append(peers, storagePeer{d, nvme[d]})
			}
		}
		if p.NICClass.SharesSwitch() {
			for _, c := range p.NICs {
				peers = append(peers, storagePeer{"NIC " + c, nics[c]})
			}
		}
		for _, peer := range peers {
			path, ok := n.BridgesBetween(g.BusID, peer.busID)
			if !ok {
				unplaced = append(unplaced, fmt.Sprintf("%s ↔ %s: no common PCIe bridge in the tree", gpuName(g), peer))
				continue
			}
			pairs++
			for _, b := range path {
				u := uses[b.BusID]
				if u == nil {
					u = &bridgeUse{dev: &b}
					uses[b.BusID] = u
					order = append(order, b.BusID)
				}
				u.pairs = append(u.pairs, fmt.Sprintf("%s ↔ %s", gpuName(g), peer))
			}
		}
	}
	if pairs == 0 && len(unplaced) == 0 {
		return skip("no GPU shares a PCIe switch with its nearest storage (PHB, NODE or SYS: through the root complex, where ACS does not apply)")
	}
	var on, unknown []string
	off := 0
	slices.Sort(order) // bridges in bus order
	for _, bus := range order {
		u := uses[bus]
		between := "between " + u.pairs[0]
		if len(u.pairs) > 1 {
			between += fmt.Sprintf(" (and %s)", plural(len(u.pairs)-1, "more pair"))
		}
		a := u.dev.ACS
		switch {
		case a == nil:
			unknown = append(unknown, fmt.Sprintf("bridge %s: ACS not read (no configuration space recorded) %s", bus, between))
		case a.State == "on":
			bits := strings.Join(a.Enabled, " ")
			if a.Control != "" {
				bits += ", control " + a.Control
			}
			on = append(on, fmt.Sprintf("bridge %s has ACS on (%s) %s", bus, bits, between))
		case a.State == "unknown":
			why := ""
			if a.Reason != "" {
				why = ": " + a.Reason
			}
			unknown = append(unknown, fmt.Sprintf("bridge %s: ACS state unknown %s%s", bus, between, why))
		default:
			off++
		}
	}
	unknown = append(unknown, unplaced...)
	if len(on) > 0 {
		hint := "peer traffic between the GPU and its storage goes up to the root complex: disable ACS in the BIOS, or for this boot run `setpci -s <bdf> ECAP_ACS+6.w=0000` on each bridge named (NVIDIA GDS best practices guide, software settings)"
		hint = strings.Replace(hint, "<bdf>", strings.Fields(strings.TrimPrefix(on[0], "bridge "))[0], 1)
		return verdictOf(append(on, unknown...), Fail, hint, "")
	}
	if len(unknown) > 0 {
		return verdictOf(unknown, Warn, "run gpuaffinity check as root: ACS is in the extended PCI configuration space, which only root can read", "")
	}
	return Result{Verdict: Pass, Reason: fmt.Sprintf("no ACS enabled on the %s between %s that share a PCIe switch",
		plural(off, "bridge"), plural(pairs, "GPU↔storage pair"))}
}

// checkIOMMU holds the IOMMU mode to NVIDIA's GDS guidance: on x86_64
// IOMMU off, or passthrough; on Grace (arm64) enabled without
// passthrough.
func checkIOMMU(_ context.Context, in *Input) Result {
	io := in.Node.Storage.GDS.IOMMU
	arch := in.Node.CPU.Arch
	desc := fmt.Sprintf("IOMMU %s (%s; cmdline %s)", orUnknown(string(io.Mode)), iommuUnits(io.Units), orWord(strings.Join(io.Cmdline, " "), "sets no IOMMU option"))
	if dev := translatedDevice(io); dev != "" {
		desc += "; " + dev
	}
	if arch == "arm64" {
		hint := "on Grace keep the IOMMU enabled without passthrough: remove iommu.passthrough=1 / iommu=pt from the kernel command line (NVIDIA GDS installation guide)"
		switch io.Mode {
		case topology.IOMMUTranslated:
			return Result{Verdict: Pass, Reason: desc + ": enabled without passthrough, NVIDIA's guidance on Grace"}
		case topology.IOMMUPassthrough:
			return Result{Verdict: Warn, Reason: desc + ": NVIDIA's guidance on Grace (arm64) is the IOMMU enabled without passthrough", Hint: hint}
		case topology.IOMMUOff:
			return Result{Verdict: Warn, Reason: desc + ": NVIDIA's guidance on Grace (arm64) is the IOMMU enabled without passthrough", Hint: "enable the SMMU in firmware and boot without iommu.passthrough=1 (NVIDIA GDS installation guide)"}
		}
		return Result{Verdict: Warn, Reason: desc + ": the mode could not be told (no IOMMU group type of a GPU, NVMe or storage NIC readable)",
			Hint: "check /sys/kernel/iommu_groups/*/type of the GPUs; on Grace the guidance is enabled without passthrough"}
	}
	on := "x86_64"
	if arch != "x86_64" {
		on = orWord(arch, "an unknown architecture") + " (x86_64 guidance applied)"
	}
	switch io.Mode {
	case topology.IOMMUOff:
		return Result{Verdict: Pass, Reason: desc + ": off, NVIDIA's guidance on " + on}
	case topology.IOMMUPassthrough:
		return Result{Verdict: Pass, Reason: desc + ": passthrough, supported on " + on}
	case topology.IOMMUTranslated:
		return Result{Verdict: Fail,
			Reason: desc + ": GDS peer-to-peer DMA through a translating IOMMU is not supported on " + on + " (NVIDIA's guidance is IOMMU off, or iommu=pt)",
			Hint:   "boot with the IOMMU off (intel_iommu=off / amd_iommu=off) or in passthrough (iommu=pt), per the NVIDIA GDS best practices guide, software settings"}
	}
	return Result{Verdict: Warn, Reason: desc + ": the mode could not be told (no IOMMU group type of a GPU, NVMe or storage NIC readable)",
		Hint: "check /sys/kernel/iommu_groups/*/type of the GPUs: NVIDIA's guidance on x86_64 is IOMMU off or iommu=pt"}
}

func iommuUnits(units []string) string {
	switch {
	case len(units) == 0:
		return "no IOMMU unit"
	case len(units) <= 3:
		return "units " + strings.Join(units, ",")
	}
	return fmt.Sprintf("units %s and %d more", strings.Join(units[:3], ","), len(units)-3)
}

// translatedDevice names the first device (by bus id) in a translating
// IOMMU group ("0000:1b:00.0 in a DMA-FQ group"); "" when none.
func translatedDevice(io topology.IOMMU) string {
	var bad []topology.IOMMUGroup
	for _, g := range io.Groups {
		if g.Type == "DMA" || g.Type == "DMA-FQ" {
			bad = append(bad, g)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	// Groups are in bus order.
	s := fmt.Sprintf("%s in a %s group", bad[0].BusID, bad[0].Type)
	if len(bad) > 1 {
		s += fmt.Sprintf(" (and %d more devices)", len(bad)-1)
	}
	return s
}

// checkStoragePorts: every port of every storage NIC passes traffic.
func checkStoragePorts(_ context.Context, in *Input) Result {
	nics := storageNICs(in.Node)
	if len(nics) == 0 {
		return skip("no storage NIC")
	}
	carries := map[string][]string{}
	for _, m := range in.Node.Storage.Mounts {
		for _, c := range m.NICs {
			carries[c] = append(carries[c], m.Target)
		}
	}
	var bad []string
	known := 0
	for _, c := range nics {
		for _, p := range c.Ports {
			if p.Known() {
				known++
			}
		}
		if len(c.Ports) == 0 {
			for _, i := range c.Interfaces {
				if i.OperState != "" {
					known++
				}
			}
		}
		for _, d := range c.DownPorts() {
			s := fmt.Sprintf("storage NIC %s (%s) %s", c.Name, orWord(c.BusID, "no PCI function"), d)
			if m := carries[c.Name]; len(m) > 0 {
				s += " (carries " + strings.Join(m, ", ") + ")"
			}
			bad = append(bad, s)
		}
	}
	if known == 0 {
		return skip("storage NICs report no port state")
	}
	return verdictOf(bad, Fail, "check the cable and switch port of the storage fabric (ibstat, ip link); data loading and checkpoints lose this path",
		fmt.Sprintf("%s of %s up", plural(known, "port"), plural(len(nics), "storage NIC")))
}

// checkNVMeLink: every data NVMe drive (under a data mount; the unmounted
// ones where none is) has its PCIe link at full width and speed.
func checkNVMeLink(_ context.Context, in *Input) Result {
	var drives []topology.NVMe
	for _, want := range []topology.NVMeUse{topology.NVMeData, topology.NVMeUnmounted} {
		for _, d := range in.Node.Storage.NVMe {
			if d.BusID != "" && d.Use == want {
				drives = append(drives, d)
			}
		}
		if len(drives) > 0 {
			break
		}
	}
	if len(drives) == 0 {
		return skip("no PCIe NVMe drive for data")
	}
	var bad []string
	checked, unread := 0, 0
	for _, d := range drives {
		l := d.Link
		sp, msp := linkSpeed(l.Speed), linkSpeed(l.MaxSpeed)
		wOK, sOK := l.Width > 0 && l.MaxWidth > 0, sp > 0 && msp > 0
		if !wOK && !sOK {
			unread++
			continue
		}
		checked++
		if (wOK && l.Width < l.MaxWidth) || (sOK && sp < msp) {
			bad = append(bad, fmt.Sprintf("%s (%s) PCIe link %s, max %s", d.Name, d.BusID,
				fmtLink(l.Width, l.Speed), fmtLink(l.MaxWidth, l.MaxSpeed)))
		}
	}
	if checked == 0 {
		return skip("the data NVMe drives report no PCIe link")
	}
	ok := fmt.Sprintf("%s at full PCIe width and speed", plural(checked, "data NVMe drive"))
	if unread > 0 {
		ok += fmt.Sprintf(" (%d report no link)", unread)
	}
	return verdictOf(bad, Fail, "reseat the drive, check its backplane, cable or riser and slot (lspci -vv: LnkSta against LnkCap); a narrow or slow link caps the drive's bandwidth", ok)
}

// linkSpeed reads "32.0 GT/s PCIe" as 32; 0 when unknown.
func linkSpeed(s string) float64 {
	v, _ := pci.ParseSpeed(s)
	return v
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func fmtLink(width int, speed string) string {
	w := "x?"
	if width > 0 {
		w = fmt.Sprintf("x%d", width)
	}
	return w + " " + orWord(strings.TrimSuffix(speed, " PCIe"), "unknown speed")
}

// checkLocality: each GPU's nearest storage NIC on its own NUMA node or
// nearer; across sockets (SYS) fails.
func checkLocality(_ context.Context, in *Input) Result {
	if len(storageNICs(in.Node)) == 0 {
		return skip("no storage NIC")
	}
	if len(in.gpus) == 0 {
		return skip("no GPU")
	}
	byClass := map[topology.Class][]int{}
	var sys, unknown, details, notes []string
	var noSwitch []int
	for _, g := range in.gpus {
		i := slices.IndexFunc(in.Node.Storage.Pairs, func(p topology.StoragePair) bool { return p.GPU == g.Index })
		if i < 0 || len(in.Node.Storage.Pairs[i].NICs) == 0 {
			unknown = append(unknown, gpuName(g)+" has no storage NIC pair")
			byClass[topology.ClassUnknown] = append(byClass[topology.ClassUnknown], g.Index)
			continue
		}
		p := in.Node.Storage.Pairs[i]
		nic := strings.Join(p.NICs, ",")
		byClass[p.NICClass] = append(byClass[p.NICClass], g.Index)
		details = append(details, fmt.Sprintf("%s: %s %s", gpuName(g), nic, p.NICClass))
		if p.Note != "" && !slices.Contains(notes, p.Note) {
			notes = append(notes, p.Note)
		}
		switch p.NICClass {
		case topology.ClassPIX, topology.ClassPXB:
		case topology.ClassPHB, topology.ClassNODE:
			noSwitch = append(noSwitch, g.Index)
		case topology.ClassSYS:
			noSwitch = append(noSwitch, g.Index)
			sys = append(sys, fmt.Sprintf("%s's nearest storage NIC %s is across sockets (SYS): its checkpoint traffic crosses the CPU interconnect", gpuName(g), nic))
		default:
			unknown = append(unknown, fmt.Sprintf("%s's path to storage NIC %s is unknown", gpuName(g), nic))
		}
	}
	var classes []string
	for c := topology.ClassUnknown; c <= topology.ClassSYS; c++ {
		if gs := byClass[c]; len(gs) > 0 {
			classes = append(classes, fmt.Sprintf("%s GPU %s", c, joinInts(gs)))
		}
	}
	summary := "classes: " + strings.Join(classes, "; ")
	if len(noSwitch) > 0 {
		summary += fmt.Sprintf("; note: GPU %s share no PCIe switch with a storage NIC, so cuFile with rdma_dynamic_routing bounces their I/O through another GPU's memory or system memory", joinInts(noSwitch))
	}
	for _, note := range notes {
		summary += "; " + note
	}
	result := func(bad []string, v Verdict, hint string) Result {
		r := Result{Verdict: v, Reason: bad[0], Hint: hint, Details: append(slices.Clone(bad), details...)}
		if len(bad) > 1 {
			r.Reason += fmt.Sprintf(" (and %d more)", len(bad)-1)
		}
		r.Reason += "; " + summary
		return r
	}
	if len(sys) > 0 {
		return result(append(sys, unknown...), Fail, "put a storage NIC on each CPU socket (each GPU's NUMA node), or move the cards; cuFile picks the nearest NIC of rdma_dev_addr_list by PCIe distance")
	}
	if len(unknown) > 0 {
		return result(unknown, Warn, "the PCI tree does not place these GPUs and storage NICs: check the storage NIC roles (--storage-nics) and numa_node")
	}
	return Result{Verdict: Pass, Reason: fmt.Sprintf("%s with a storage NIC at NODE or better; %s", plural(len(in.gpus), "GPU"), summary)}
}
