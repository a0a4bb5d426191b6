package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Storage is the node's storage layer: local NVMe, the mounted file
// systems GPUDirect Storage serves, what the kernel offers GDS, and each
// GPU's nearest NVMe and storage NICs (docs/topology-json.md, "Storage").
type Storage struct {
	// NVMe are the NVMe controllers, sorted by name.
	NVMe []NVMe `json:"nvme"`
	// Mounts are the mounts GDS can serve (GDSMount), in mount table
	// order.
	Mounts []Mount `json:"mounts"`
	GDS    GDS     `json:"gds"`
	// Pairs holds one entry per GPU, in GPU order (Link fills it).
	Pairs []StoragePair `json:"pairs"`
}

// NVMe is one NVMe controller (sys/class/nvme/nvmeN).
type NVMe struct {
	Name string `json:"name"` // "nvme0"
	// BusID is the PCI function of a PCIe controller; "" for NVMe over
	// fabrics.
	BusID     string `json:"bus_id,omitempty"`
	Transport string `json:"transport"` // "pcie", "rdma", "tcp", "fc", "loop"
	Model     string `json:"model,omitempty"`
	Serial    string `json:"serial,omitempty"`
	Firmware  string `json:"firmware,omitempty"`
	State     string `json:"state,omitempty"` // "live", ...
	NUMANode  *int   `json:"numa_node"`
	// Link is the PCI function's link (the same answer as its PCIDevice).
	Link       PCILink         `json:"link"`
	Namespaces []NVMeNamespace `json:"namespaces"`
	// Use says what the drive holds: "data" (under a mount GDS serves),
	// "system" (under /, /boot or swap-like system mounts), "unmounted".
	Use NVMeUse `json:"use"`
}

// NVMeUse is what an NVMe drive holds.
type NVMeUse string

const (
	NVMeData      NVMeUse = "data"      // under a mount GDS serves
	NVMeSystem    NVMeUse = "system"    // under the root file system or /boot
	NVMeUnmounted NVMeUse = "unmounted" // under no mount (instance store before setup)
	NVMeOther     NVMeUse = "other"     // under other mounts only
)

// NVMeNamespace is one namespace, named by its block device.
type NVMeNamespace struct {
	Block     string `json:"block"`          // "nvme0n1"
	Path      string `json:"path,omitempty"` // hidden multipath path "nvme0c0n1"
	SizeBytes uint64 `json:"size_bytes"`
}

// MountKind is how GDS reaches a mounted file system.
type MountKind string

const (
	MountNVMe   MountKind = "nvme"    // a local block file system (XFS, ext4) on NVMe
	MountNFS    MountKind = "nfs"     // NFS over RDMA (proto=rdma)
	MountLustre MountKind = "lustre"  // Lustre (o2ib LNet for RDMA)
	MountWeka   MountKind = "weka"    // WekaFS
	MountGPFS   MountKind = "gpfs"    // IBM Storage Scale (GPFS)
	MountBeeGFS MountKind = "beegfs"  // BeeGFS
	MountNFSTCP MountKind = "nfs-tcp" // NFS over TCP: GDS only in compat mode
)

// CuFileFS is the cufile.json "fs" key of a network mount kind ("" for
// local block file systems and NFS over TCP).
func (k MountKind) CuFileFS() string {
	switch k {
	case MountNFS, MountLustre, MountGPFS, MountBeeGFS, MountWeka:
		return string(k)
	}
	return ""
}

// Network reports whether the kind reaches storage through NICs.
func (k MountKind) Network() bool { return k != MountNVMe }

// Mount is one mounted file system GDS can serve.
type Mount struct {
	Source  string    `json:"source"`
	Target  string    `json:"target"`
	FSType  string    `json:"fstype"`
	Kind    MountKind `json:"kind"`
	Options []string  `json:"options"`
	// Devices are the NVMe controllers under a local mount (through
	// partitions, md and device-mapper), sorted.
	Devices []string `json:"devices,omitempty"`
	// Servers are the server addresses the mount names (NFS addr=,
	// Lustre NIDs' IPv4 parts).
	Servers []string `json:"servers,omitempty"`
	// NICs are the NICs that carry the mount's traffic (Link fills it),
	// and NICsReason says which rule chose them.
	NICs       []string `json:"nics"`
	NICsReason string   `json:"nics_reason,omitempty"`
}

// GDS is what the node offers GPUDirect Storage.
type GDS struct {
	// NvidiaFS is set where the nvidia-fs driver is loaded
	// (proc/driver/nvidia-fs).
	NvidiaFS        bool   `json:"nvidia_fs"`
	NvidiaFSVersion string `json:"nvidia_fs_version,omitempty"`
	// P2PDMA says whether GDS's P2PDMA mode (CUDA 12.8+, no nvidia-fs for
	// NVMe) can run here, and what is missing where it cannot.
	P2PDMA P2PDMA `json:"p2pdma"`
	// NVMeMultipath is nvme_core's multipath parameter; nil where unknown.
	NVMeMultipath *bool `json:"nvme_multipath"`
	// OpenKernelModule is set where the NVIDIA driver is the open kernel
	// module (proc/driver/nvidia/version says "Open Kernel Module"); nil
	// where the file is absent.
	OpenKernelModule *bool `json:"open_kernel_module"`
	IOMMU            IOMMU `json:"iommu"`
}

// Available reports whether some GDS path exists: nvidia-fs, or P2PDMA.
func (g GDS) Available() bool { return g.NvidiaFS || g.P2PDMA.Supported }

// P2PDMA is the verdict on GDS's P2PDMA mode.
type P2PDMA struct {
	Supported bool `json:"supported"`
	// Missing names each unmet requirement ("CUDA driver 12.4 < 12.8").
	Missing []string `json:"missing"`
}

// IOMMUMode is how the IOMMU treats GPU DMA.
type IOMMUMode string

const (
	IOMMUOff         IOMMUMode = "off"         // no IOMMU unit, no groups
	IOMMUPassthrough IOMMUMode = "passthrough" // identity domains (iommu=pt)
	IOMMUTranslated  IOMMUMode = "translated"  // DMA / DMA-FQ domains
	IOMMUUnknown     IOMMUMode = "unknown"
)

// IOMMU is the IOMMU as the kernel reports it.
type IOMMU struct {
	Mode IOMMUMode `json:"mode"`
	// Units are sys/class/iommu's entries.
	Units []string `json:"units"`
	// Groups are the IOMMU group types of the GPUs, NVMe and RDMA NICs
	// (the devices GDS moves data between), in bus order.
	Groups []IOMMUGroup `json:"groups,omitempty"`
	// Cmdline are the kernel command-line options that set the IOMMU
	// (iommu=, intel_iommu=, amd_iommu=).
	Cmdline []string `json:"cmdline"`
}

// IOMMUGroup is the IOMMU group type of one PCI function.
type IOMMUGroup struct {
	BusID string `json:"bus_id"`
	// Type is the group's type file: "identity" (passthrough), "DMA" or
	// "DMA-FQ" (translated), "blocked", or "unknown" (kernels before 5.11).
	Type string `json:"type"`
}

// StoragePair is one GPU's nearest storage: the NVMe drives and storage
// NICs of the best class for it.
type StoragePair struct {
	GPU       int      `json:"gpu"`
	NVMe      []string `json:"nvme"`
	NVMeClass Class    `json:"nvme_class"`
	NICs      []string `json:"nics"`
	NICClass  Class    `json:"nic_class"`
	// Note says how the choice was made where it is not plain.
	Note string `json:"note,omitempty"`
}

// IPv4 lists the NIC's IPv4 addresses (without prefix length) over its
// interfaces, in interface order.
func (n NIC) IPv4() []string {
	var out []string
	for _, i := range n.Interfaces {
		for _, a := range i.IPv4 {
			if p, err := netip.ParsePrefix(a); err == nil {
				out = append(out, p.Addr().String())
			}
		}
	}
	return out
}

// ClassifyMount says which kind of GDS-served mount a mount table entry
// is; ok is false for every other mount. disks says whether the source is
// a block device on NVMe (decided by the caller from sysfs).
func ClassifyMount(fstype string, options []string, onNVMe bool) (MountKind, bool) {
	switch fstype {
	case "xfs", "ext4":
		// GDS's nvidia-fs and P2PDMA paths serve XFS and ext4 (ordered)
		// on NVMe and NVMe-oF.
		return MountNVMe, onNVMe
	case "nfs", "nfs4":
		if p := optionValues(options, "proto"); slices.Contains(p, "rdma") || slices.Contains(p, "rdma6") {
			return MountNFS, true
		}
		return MountNFSTCP, true
	case "lustre":
		return MountLustre, true
	case "wekafs":
		return MountWeka, true
	case "gpfs":
		return MountGPFS, true
	case "beegfs":
		return MountBeeGFS, true
	}
	return "", false
}

// optionValues are the values of every key=value mount option named key,
// in order ("net=" may repeat).
func optionValues(options []string, key string) []string {
	var vs []string
	for _, o := range options {
		if k, v, ok := strings.Cut(o, "="); ok && k == key {
			vs = append(vs, v)
		}
	}
	return vs
}

// MountServers are the server IPv4 addresses a mount names: NFS's addr=
// option, the IPv4 part of each Lustre NID in the source
// ("10.0.0.1@o2ib,10.0.0.2@o2ib:10.0.0.3@o2ib:/fs").
func MountServers(kind MountKind, source string, options []string) []string {
	var out []string
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() && !slices.Contains(out, a.String()) {
			out = append(out, a.String())
		}
	}
	switch kind {
	case MountNFS, MountNFSTCP:
		for _, v := range optionValues(options, "addr") {
			add(v)
		}
	case MountLustre:
		nids, _, _ := strings.Cut(source, ":/")
		for _, group := range strings.Split(nids, ":") {
			for _, nid := range strings.Split(group, ",") {
				ip, _, _ := strings.Cut(nid, "@")
				add(ip)
			}
		}
	}
	return out
}

// linkStorage fills each mount's NICs and the per-GPU storage pairs.
func (c *roleCtx) linkStorage() []string {
	n := c.n
	decideGDS(n)
	var warns []string
	storageNICs := []int{}
	for ni, nic := range n.NICs {
		if nic.HasRole(RoleStorage) {
			storageNICs = append(storageNICs, ni)
		}
	}
	for i := range n.Storage.Mounts {
		warns = append(warns, c.mountNICs(&n.Storage.Mounts[i], storageNICs)...)
	}
	if n.Storage.NVMe == nil {
		n.Storage.NVMe = []NVMe{}
	}
	if n.Storage.Mounts == nil {
		n.Storage.Mounts = []Mount{}
	}
	n.Storage.Pairs = make([]StoragePair, 0, len(n.GPUs))
	pool := nvmePool(n.Storage.NVMe)
	healthy := slices.DeleteFunc(slices.Clone(storageNICs), func(ni int) bool { return !n.NICs[ni].Healthy() })
	cands, note := healthy, ""
	if len(healthy) == 0 && len(storageNICs) > 0 {
		cands, note = storageNICs, "no storage NIC has a port up; nearest down ones listed"
	}
	for gi, g := range n.GPUs {
		p := StoragePair{GPU: g.Index, NICs: []string{}, Note: note}
		var why string
		p.NVMe, p.NVMeClass, why = c.nearestNVMe(gi, pool)
		p.Note = joinNote(p.Note, why)
		set, r := c.nearest(gi, cands)
		if len(set) > 0 {
			p.NICs, p.NICClass = c.names(set), r.class
		}
		n.Storage.Pairs = append(n.Storage.Pairs, p)
	}
	return warns
}

// nvmePool is the drives storage pairs choose from: the PCIe data drives
// (under a mount GDS serves), else those under no mount. The boot drives
// (under a system mount) are no checkpoint target.
func nvmePool(ds []NVMe) []NVMe {
	var pool []NVMe
	for _, want := range []NVMeUse{NVMeData, NVMeUnmounted} {
		for _, d := range ds {
			if d.BusID != "" && d.Use == want {
				pool = append(pool, d)
			}
		}
		if len(pool) > 0 {
			break
		}
	}
	return pool
}

// nearestNVMe is the drives of pool nearest to GPU gi: best class, then
// NUMA distance. Where several tie beyond a PCIe switch, the drives behind
// the switch of the GPU's own ConnectX-8 (the NIC whose Data Direct
// function shares a switch with the GPU: one adapter complex, as
// rdma_topo groups them) are the GPU's; note says so.
func (c *roleCtx) nearestNVMe(gi int, pool []NVMe) (names []string, class Class, note string) {
	g := c.n.GPUs[gi]
	from := c.anchorNUMA(anchor{idx: gi, busID: g.BusID})
	var best rank
	var set []NVMe
	for _, d := range pool {
		cl, _ := c.tree.class(g.BusID, d.BusID)
		r := rank{class: cl, dist: c.dist(from, c.numaOf(d.BusID))}
		switch {
		case cl == ClassUnknown:
		case best.class == ClassUnknown || r.less(best):
			best, set = r, []NVMe{d}
		case r == best:
			set = append(set, d)
		}
	}
	if len(set) > 1 && !best.class.SharesSwitch() {
		for _, nic := range c.n.NICs {
			if nic.DataDirect == nil {
				continue
			}
			if cl, _ := c.tree.class(g.BusID, nic.DataDirect.BusID); !cl.SharesSwitch() {
				continue
			}
			var own []NVMe
			for _, d := range set {
				if cl, _ := c.tree.class(nic.BusID, d.BusID); cl.SharesSwitch() {
					own = append(own, d)
				}
			}
			if len(own) > 0 {
				note = fmt.Sprintf("%d drives tie at %s; %s behind the switch of %s, the ConnectX-8 whose Data Direct function is beside the GPU", len(set), best.class, strings.Join(nvmeNames(own), ","), nic.Name)
				set = own
				break
			}
		}
	}
	return nvmeNames(set), best.class, note
}

func nvmeNames(ds []NVMe) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

// mountNICs decides which NICs carry a network mount: the NIC holding
// NFS's clientaddr=, else the storage NICs on a subnet of a server the
// mount names, else (WekaFS net= names netdevs) those, else every storage
// NIC with an RDMA fabric.
func (c *roleCtx) mountNICs(m *Mount, storage []int) []string {
	n := c.n
	m.NICs = []string{}
	if !m.Kind.Network() {
		return nil
	}
	pick := func(match func(NIC) bool) []int {
		var out []int
		for ni, nic := range n.NICs {
			if match(nic) {
				out = append(out, ni)
			}
		}
		return out
	}
	var chosen []int
	opt := func(key string) []string { return optionValues(m.Options, key) }
	if ca := opt("clientaddr"); len(ca) > 0 {
		chosen = pick(func(nic NIC) bool { return slices.Contains(nic.IPv4(), ca[0]) })
		m.NICsReason = "holds clientaddr=" + ca[0]
	}
	if len(chosen) == 0 && len(opt("net")) > 0 {
		nets := opt("net")
		chosen = pick(func(nic NIC) bool {
			return slices.ContainsFunc(nets, func(s string) bool { return nic.matches([]string{s}) })
		})
		m.NICsReason = "named by net=" + strings.Join(nets, ",")
	}
	if len(chosen) == 0 && len(m.Servers) > 0 {
		chosen = pick(func(nic NIC) bool { return nic.HasRole(RoleStorage) && onSubnet(nic, m.Servers) })
		m.NICsReason = "storage NICs on the subnet of " + strings.Join(m.Servers, ",")
		if len(chosen) == 0 {
			chosen = pick(func(nic NIC) bool { return onSubnet(nic, m.Servers) })
			m.NICsReason = "on the subnet of " + strings.Join(m.Servers, ",") + " (no storage NIC is)"
		}
	}
	if len(chosen) == 0 {
		for _, ni := range storage {
			if n.NICs[ni].Fabric.RDMA() {
				chosen = append(chosen, ni)
			}
		}
		m.NICsReason = "every RDMA storage NIC (the mount names no client address, netdev or server on a local subnet)"
	}
	if len(chosen) == 0 {
		m.NICsReason = ""
		return []string{fmt.Sprintf("mount %s (%s): no NIC of this node reaches it over RDMA; cuFile gets no client address for it", m.Target, m.FSType)}
	}
	m.NICs = c.names(chosen)
	var warns []string
	for _, ni := range chosen {
		nic := n.NICs[ni]
		if !nic.HasRole(RoleStorage) {
			warns = append(warns, fmt.Sprintf("mount %s (%s) is reached through %s, a %s NIC: its traffic shares that NIC", m.Target, m.FSType, nic.Name, nic.Role))
		}
	}
	return warns
}

// onSubnet reports whether one of the NIC's IPv4 prefixes holds one of
// the addresses.
func onSubnet(nic NIC, addrs []string) bool {
	for _, i := range nic.Interfaces {
		for _, s := range i.IPv4 {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				continue
			}
			for _, a := range addrs {
				if ip, err := netip.ParseAddr(a); err == nil && p.Masked().Contains(ip) {
					return true
				}
			}
		}
	}
	return false
}

// P2PDMA's requirements (NVIDIA GDS Troubleshooting Guide, "NVMe P2PDMA
// support"; docs/health.md, storage.gds): a CUDA 12.8 driver, the open
// kernel module, a kernel with PCI P2PDMA for GPU memory (6.2), an Ampere
// or newer GPU, and NVMe native multipath off.
const (
	p2pdmaCUDA       = 12080
	p2pdmaDriver     = "565.47"
	p2pdmaKernel     = "6.2"
	firstAmpereDevID = 0x2000 // GA100 is 0x20b0; Turing and Volta are below
)

// decideGDS fills the verdicts of n.Storage.GDS that follow from other
// facts: P2PDMA support and the IOMMU mode.
func decideGDS(n *Node) {
	g := &n.Storage.GDS
	g.P2PDMA = decideP2PDMA(n)
	g.IOMMU.Mode = iommuMode(g.IOMMU)
}

func decideP2PDMA(n *Node) P2PDMA {
	miss := []string{}
	switch c := n.NVML.CUDAVersion; {
	case c == 0:
		miss = append(miss, "CUDA driver version unknown (no NVML)")
	case c < p2pdmaCUDA:
		miss = append(miss, fmt.Sprintf("CUDA driver %d.%d < 12.8", c/1000, c%1000/10))
	}
	switch o := n.Storage.GDS.OpenKernelModule; {
	case o == nil:
		miss = append(miss, "NVIDIA kernel module kind unknown (no /proc/driver/nvidia/version)")
	case !*o:
		miss = append(miss, "the proprietary NVIDIA kernel module is loaded (P2PDMA needs the open one)")
	}
	if v := n.Driver.Version; v != "" && versionLess(v, p2pdmaDriver) {
		miss = append(miss, fmt.Sprintf("NVIDIA driver %s < %s", v, p2pdmaDriver))
	}
	switch r := n.Kernel.Release; {
	case r == "":
		miss = append(miss, "kernel release unknown")
	case versionLess(r, p2pdmaKernel):
		miss = append(miss, fmt.Sprintf("kernel %s < %s", r, p2pdmaKernel))
	}
	for _, gpu := range n.GPUs {
		var id uint64
		if _, err := fmt.Sscanf(gpu.Device, "0x%x", &id); err == nil && id < firstAmpereDevID {
			miss = append(miss, fmt.Sprintf("GPU %d (device %s) is older than Ampere", gpu.Index, gpu.Device))
		}
	}
	if m := n.Storage.GDS.NVMeMultipath; m != nil && *m {
		miss = append(miss, "NVMe native multipath is on (nvme_core multipath=Y)")
	}
	return P2PDMA{Supported: len(miss) == 0 && len(n.GPUs) > 0, Missing: miss}
}

// versionLess compares dotted version prefixes numerically ("5.15.0-1042"
// < "6.2"); text after the numeric prefix of each part is ignored.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		x, y := leadingInt(pa, i), leadingInt(pb, i)
		if x != y {
			return x < y
		}
	}
	return false
}

func leadingInt(parts []string, i int) int {
	if i >= len(parts) {
		return 0
	}
	v := 0
	for _, c := range parts[i] {
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + int(c-'0')
	}
	return v
}

// iommuMode reads the mode from the GPU-side devices' group types, else
// from whether the kernel drives an IOMMU at all.
func iommuMode(m IOMMU) IOMMUMode {
	ident, trans := 0, 0
	for _, g := range m.Groups {
		switch g.Type {
		case "identity":
			ident++
		case "DMA", "DMA-FQ":
			trans++
		}
	}
	switch {
	case trans > 0:
		return IOMMUTranslated
	case ident > 0:
		return IOMMUPassthrough
	case len(m.Units) == 0 && len(m.Groups) == 0:
		return IOMMUOff
	}
	return IOMMUUnknown
}
