package discover

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"slices"
	"strings"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
	"github.com/gpuaffinity/gpuaffinity/kfd"
	"github.com/gpuaffinity/gpuaffinity/numa"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/pci"
	"github.com/gpuaffinity/gpuaffinity/platform"
	"github.com/gpuaffinity/gpuaffinity/rdma"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Options are the inputs of Discover.
type Options struct {
	// Root is the filesystem root: "/" on a live host, a snapshot or
	// fixture directory otherwise.
	Root string
	// NVML overrides the NVML source. Nil means nvml.Open(Root): live NVML
	// under "/", Root/nvml.json elsewhere, none when neither.
	NVML gonvml.Interface
	// NVMLSource names the override's kind in the output ("live", "replay").
	NVMLSource string
	// Netlink cross-checks netdev state. Nil means the live netlink source
	// under "/" and none elsewhere.
	Netlink rdma.Netlink
	// Roles pins NIC roles (--compute-nics, --exclude-nics).
	Roles topology.RoleOptions
	// FS is the root, already open (an in-memory example machine); it
	// takes Root's place.
	FS *rootfs.Root
	// TopoFile is a vendor NCCL topology file (--topo-file) taken as the
	// authority for the PCIe placement of the devices it names.
	TopoFile string
}

// Discover reads the node under opts.Root.
func Discover(opts Options) (topology.Node, error) {
	dir := rootfs.Clean(opts.Root)
	n := topology.Node{Schema: topology.Schema}
	// Every file under the root is read through one reader, which stays
	// inside it (links out are refused) and never blocks.
	root := opts.FS
	if root == nil {
		var err error
		if root, err = rootfs.Open(dir); err != nil {
			return n, fmt.Errorf("discover %s: %w", dir, err)
		}
		defer root.Close()
	} else {
		dir = root.Dir()
	}
	warn := func(errs ...error) {
		for _, err := range errs {
			if err != nil {
				n.Warnings = append(n.Warnings, err.Error())
			}
		}
	}

	// The sources are read concurrently; their warnings are added below
	// in this fixed order, whatever finished first.
	src := readSources(root, opts.NVML, opts.NVMLSource)
	if err := addPCIBus(&n, root, src, warn); err != nil {
		return n, fmt.Errorf("discover %s: %w", dir, err)
	}
	warn(src.numaErrs...)
	fillCPU(&n, src.topo)
	fillPlatform(&n, src, warn)
	n.PCIDevices = pciDevices(src.devs)
	addNICs(&n, root, opts.Netlink, src, warn)
	fillNVMLInfo(&n, src, warn)
	n.GPUs = gpus(src.devs, src.nvml, warn)
	n.Driver = driverInfo(root, src.nvml, warn)
	n.Kernel = kernelInfo(root, warn)
	n.NetPlugins = netPlugins(root)
	fillFromProcfs(root, n.GPUs, warn)
	fillGPUMemoryNodes(root, n.GPUs, n.NUMANodes, warn)
	addAMDGPUs(&n, root, src, warn)
	n.Unsupported = unsupported(src.devs)
	fillStorage(&n, root, src.store, src.devs, warn)
	n.NVLinkFabric.IMEX = readIMEX(root, warn)
	if w := topology.UnsupportedWarning(n.Unsupported, len(n.GPUs)); w != "" {
		n.Warnings = append(n.Warnings, w)
	}
	if err := applyVendorTopoFile(&n, root, opts.TopoFile); err != nil {
		return n, err
	}
	topology.Link(&n, opts.Roles)
	return n, nil
}

// sources is what Discover's independent sources read, kept apart so that
// their warnings are added in one fixed order, whatever finished first.
type sources struct {
	devs    []pci.Device
	pciErrs []error // bad files under the PCI bus: warnings
	pciErr  error   // the PCI bus unreadable

	topo     numa.Topology
	numaErrs []error
	plat     platform.Info
	platErr  error
	host     hostInfo

	rdevs    []rdma.Device
	nds      []rdma.Netdev
	rdmaErrs []error

	lib        gonvml.Interface // nil when there is no NVML
	nvmlSource string
	openErr    error
	nvml       nvml.Result

	store storageSource

	kfd     kfd.Topology
	kfdErrs []error
}

// readSources reads every source under root. The sources are independent:
// NUMA and CPUs, platform and route, RDMA devices and netdevs, storage,
// KFD and NVML are read while the PCI bus is, on the other cores (most of
// discovery is waiting on small reads). lib overrides NVML (source names
// its kind); nil opens the root's.
func readSources(root *rootfs.Root, lib gonvml.Interface, source string) *sources {
	s := &sources{lib: lib, nvmlSource: source}
	var wg sync.WaitGroup
	wg.Go(func() {
		s.topo, s.numaErrs = numa.Read(root)
		s.plat, s.platErr = platform.Read(root)
		s.host = readHost(root)
	})
	wg.Go(func() {
		var rerrs, nderrs []error
		s.rdevs, rerrs = rdma.Devices(root)
		s.nds, nderrs = rdma.Netdevs(root)
		s.rdmaErrs = append(rerrs, nderrs...)
	})
	wg.Go(func() { s.store = readStorage(root) })
	wg.Go(func() { s.kfd, s.kfdErrs = kfd.ReadTopology(root) })
	wg.Go(func() {
		if s.lib == nil {
			s.lib, s.nvmlSource, s.openErr = nvml.OpenRoot(root)
		}
		if s.lib != nil {
			s.nvml = nvml.Read(s.lib)
		}
	})
	s.devs, s.pciErrs, s.pciErr = pci.NewFS(root).Devices()
	wg.Wait()
	return s
}

// addPCIBus adds the PCI bus's warnings; it fails only when the bus
// cannot be read and the root still has one.
func addPCIBus(n *topology.Node, root *rootfs.Root, s *sources, warn func(...error)) error {
	switch err := s.pciErr; {
	case errors.Is(err, fs.ErrNotExist) && hasSysfs(root):
		// A partial mount of /sys, or a kernel built without PCI (most of
		// hwloc's own test captures): the CPUs and NUMA nodes are still
		// worth having, and the node says what it could not see. A root
		// with no sys/ at all is not a node's root: that stays an error.
		n.NoPCIBus = true
		warn(fmt.Errorf("%s: no PCI bus in sysfs (a partial mount of /sys, or a kernel without PCI): GPUs and NICs are not placed: %w",
			root.Path(pci.BusDir), err))
	case err != nil:
		return err
	}
	warn(s.pciErrs...)
	return nil
}

// fillPlatform sets the platform (DMI, and the hypervisor from CPUID),
// the hostname and the default route's interface.
func fillPlatform(n *topology.Node, s *sources, warn func(...error)) {
	warn(s.platErr)
	n.Platform = topology.Platform{
		Cloud: topology.Cloud(s.plat.Cloud), InstanceType: s.plat.InstanceType,
		SysVendor: s.plat.SysVendor, ProductName: s.plat.ProductName, Virtual: s.topo.Hypervisor,
	}
	n.Hostname = s.host.name
	warn(s.host.nameErr)
	n.DefaultRouteInterface = s.host.route
	warn(s.host.routeErr)
}

// addNICs builds the NICs from the PCI functions, RDMA devices and
// netdevs, cross-checks the netdevs against netlink (nl, else the live
// one on a live root) and adds their IPv4 addresses.
func addNICs(n *topology.Node, root *rootfs.Root, nl rdma.Netlink, s *sources, warn func(...error)) {
	warn(s.rdmaErrs...)
	if nl == nil && root.Live() {
		live, closeFn, err := rdma.NewNetlink()
		if err != nil {
			warn(err)
		} else {
			defer closeFn()
			nl = live
		}
	}
	if nl != nil {
		warn(rdma.CrossCheck(s.nds, nl)...)
	}
	n.NICs = nics(s.devs, s.rdevs, s.nds, warn)
	fillIPv4(n, root, nl, warn)
}

// fillNVMLInfo says where the NVML facts came from, and whether NVML
// failed.
func fillNVMLInfo(n *topology.Node, s *sources, warn func(...error)) {
	warn(s.openErr)
	res := s.nvml
	switch {
	case s.lib != nil:
		n.NVML = topology.NVMLInfo{Source: s.nvmlSource, DriverVersion: res.DriverVersion,
			NVMLVersion: res.NVMLVersion, CUDAVersion: res.CUDADriverVersion}
		if !res.Available {
			// NVML is there and failed: the health gate must not pass
			// the GPUs it could not see.
			n.NVML.Source, n.NVML.Failed = "none", true
			if res.Err != nil {
				n.NVML.Error = res.Err.Error()
			}
		}
		n.Warnings = append(n.Warnings, res.Warnings...)
	case s.openErr != nil:
		n.NVML = topology.NVMLInfo{Source: "none", Failed: true, Error: s.openErr.Error()}
	default:
		n.NVML = topology.NVMLInfo{Source: "none", Error: "no NVML: not a live root and no nvml.json"}
	}
}

// addAMDGPUs adds the AMD GPUs after the NVIDIA ones, numbered on from
// the last, and ROCm's facts.
func addAMDGPUs(n *topology.Node, root *rootfs.Root, s *sources, warn func(...error)) {
	warn(s.kfdErrs...)
	first := 0
	if len(n.GPUs) > 0 {
		first = n.GPUs[len(n.GPUs)-1].Index + 1
	}
	n.GPUs = append(n.GPUs, amdGPUs(s.devs, s.kfd, first, warn)...)
	n.ROCm = readROCm(root, n.GPUs, warn)
}

// applyVendorTopoFile applies a vendor topology file: the one named
// (--topo-file, a path on this host, not under the root) must fit this
// node and is an error otherwise; one the platform installed (Azure,
// AWS) that does not fit is a warning and is not used.
func applyVendorTopoFile(n *topology.Node, root *rootfs.Root, named string) error {
	hostPath := named
	found := hostPath == ""
	var data []byte
	var err error
	switch {
	case !found:
		// Named by the user: a path on this host, not under the root.
		data, err = sysattr.ReadFileLimit(hostPath, maxTopoFileSize)
	case n.Platform.Cloud == topology.CloudAzure:
		hostPath = installedAzureTopoFile(root)
	case n.Platform.Cloud == topology.CloudAWS:
		hostPath = installedAWSTopoFile(root, n.Platform.InstanceType)
	}
	if found && hostPath != "" {
		data, err = root.ReadFile(strings.TrimPrefix(hostPath, "/"), maxTopoFileSize)
	}
	if hostPath == "" {
		return nil
	}
	ws, err := applyTopoFile(n, data, err, hostPath, found)
	switch {
	case err != nil && !found:
		return err
	case err != nil:
		n.Warnings = append(n.Warnings, err.Error()+"; not used")
	default:
		n.TopoFile = hostPath
		n.Warnings = append(n.Warnings, ws...)
	}
	return nil
}

// hasSysfs reports whether the root holds a sysfs: sys/devices, which
// every kernel's has.
func hasSysfs(root *rootfs.Root) bool {
	fi, err := root.Stat("sys/devices")
	return err == nil && fi.IsDir()
}

// fillCPU copies the NUMA and CPU topology into the model.
func fillCPU(n *topology.Node, t numa.Topology) {
	n.CPU = topology.CPUInfo{
		Online: t.Online, Offline: t.Offline, Allowed: t.Allowed,
		Arch: t.Arch, Vendor: t.Vendor, ModelName: t.Model, Family: t.FamilyID, Model: t.ModelID,
	}
	socketCPUs := map[int][]int{}
	socketNodes := map[int][]int{}
	type coreKey struct{ socket, core int }
	cores := map[coreKey]*topology.Core{}
	for _, c := range t.CPUs {
		socketCPUs[c.Socket] = append(socketCPUs[c.Socket], c.ID)
		if c.Node >= 0 && !slices.Contains(socketNodes[c.Socket], c.Node) {
			socketNodes[c.Socket] = append(socketNodes[c.Socket], c.Node)
		}
		k := coreKey{c.Socket, c.CoreID}
		if cores[k] == nil {
			cores[k] = &topology.Core{Socket: c.Socket, ID: c.CoreID, NUMANode: c.Node}
		}
		cores[k].CPUs = cores[k].CPUs.Union(cpuset.Of(c.ID))
	}
	for id, cpus := range socketCPUs {
		nodes := socketNodes[id]
		slices.Sort(nodes)
		if nodes == nil {
			nodes = []int{}
		}
		n.CPU.Sockets = append(n.CPU.Sockets, topology.Socket{ID: id, CPUs: cpuset.Of(cpus...), NUMANodes: nodes})
	}
	sortfn.Sort(n.CPU.Sockets, func(a, b topology.Socket) int { return a.ID - b.ID })
	for _, c := range cores {
		n.CPU.Cores = append(n.CPU.Cores, *c)
	}
	sortfn.Sort(n.CPU.Cores, func(a, b topology.Core) int { return a.CPUs.CPUs()[0] - b.CPUs.CPUs()[0] })

	for _, nd := range t.Nodes {
		m := topology.NUMANode{ID: nd.ID, CPUs: nd.CPUs, MemoryBytes: nd.MemoryBytes, Distances: nd.Distances}
		if m.Distances == nil {
			m.Distances = []int{}
		}
		for _, s := range n.CPU.Sockets {
			if slices.Contains(s.NUMANodes, nd.ID) {
				id := s.ID
				m.Socket = &id
				break
			}
		}
		n.NUMANodes = append(n.NUMANodes, m)
	}
}

// pciDevices converts the PCI functions and names each one's kind.
func pciDevices(devs []pci.Device) []topology.PCIDevice {
	byAddr := map[pci.Address]*pci.Device{}
	for i := range devs {
		byAddr[devs[i].Address] = &devs[i]
	}
	kinds := map[pci.Address]topology.Kind{}
	// Parents come before children in depth order; depth is the length of
	// the parent chain.
	depth := func(d *pci.Device) int {
		n := 0
		for p := d.Parent; p != nil && n <= len(devs); n++ {
			pd := byAddr[*p]
			if pd == nil {
				break
			}
			p = pd.Parent
		}
		return n
	}
	hasBridgeChild := map[pci.Address]bool{}
	for _, d := range devs {
		if d.Parent != nil && d.IsBridge() {
			hasBridgeChild[*d.Parent] = true
		}
	}
	order := make([]*pci.Device, len(devs))
	for i := range devs {
		order[i] = &devs[i]
	}
	sortfn.SortStable(order, func(a, b *pci.Device) int { return depth(a) - depth(b) })
	for _, d := range order {
		kinds[d.Address] = kindOf(d, kinds, hasBridgeChild)
	}
	out := make([]topology.PCIDevice, 0, len(devs))
	for _, d := range devs {
		td := topology.PCIDevice{
			BusID: d.Address.String(), HostBridge: d.RootBus, Kind: kinds[d.Address],
			Class: fmt.Sprintf("0x%06x", d.Class), Vendor: fmt.Sprintf("0x%04x", d.Vendor),
			Device: fmt.Sprintf("0x%04x", d.DeviceID), SubsystemVendor: fmt.Sprintf("0x%04x", d.SubsystemVendor),
			SubsystemDevice: fmt.Sprintf("0x%04x", d.SubsystemDevice), NUMANode: d.NUMANode,
			LocalCPUs: d.LocalCPUs, Driver: d.Driver,
			Link: topology.PCILink{Speed: d.CurrentLinkSpeed, Width: d.CurrentLinkWidth,
				MaxSpeed: d.MaxLinkSpeed, MaxWidth: d.MaxLinkWidth},
		}
		if d.Parent != nil {
			td.Parent = d.Parent.String()
		}
		if d.VPD != nil {
			td.VPD = &topology.VPD{Name: d.VPD.Name, V3: d.VPD.V3, Unreadable: d.VPD.Unreadable}
		}
		if d.IsBridge() {
			td.NICSwitch = pci.NICSwitch(d.Vendor, d.DeviceID)
		}
		out = append(out, td)
	}
	return out
}

func kindOf(d *pci.Device, kinds map[pci.Address]topology.Kind, hasBridgeChild map[pci.Address]bool) topology.Kind {
	switch {
	case d.Class>>8 == 0x0600:
		return topology.KindHostBridge
	case isGPU(d), isAMDGPU(d):
		return topology.KindGPU
	case d.Class>>16 == 0x02:
		return topology.KindNIC
	case !d.IsBridge():
		return topology.KindOther
	case d.Parent == nil:
		return topology.KindRootPort
	case kinds[*d.Parent] == topology.KindSwitchUpstream:
		return topology.KindSwitchDownstream
	case hasBridgeChild[d.Address]:
		return topology.KindSwitchUpstream
	}
	return topology.KindBridge
}

// isGPU: NVIDIA VGA (0x0300) or 3D (0x0302) controller.
func isGPU(d *pci.Device) bool {
	sub := d.Class >> 8
	return d.Vendor == 0x10de && (sub == 0x0300 || sub == 0x0302)
}

// gpus builds the GPU list: PCI GPUs matched to NVML by bus id, in NVML
// index order; GPUs NVML does not list follow in bus order.
func gpus(devs []pci.Device, res nvml.Result, warn func(...error)) []topology.GPU {
	byBus := map[string]nvml.GPU{}
	for _, g := range res.GPUs {
		byBus[strings.ToLower(g.BusID)] = g
	}
	// A GPU NVML lost before it answered GetPciInfo has no bus id. NVML
	// enumerates in PCI bus order, so such GPUs are matched, in index
	// order, to the PCI GPUs no other NVML entry claims, in bus order.
	var anonymous []nvml.GPU
	for _, g := range res.GPUs {
		if g.BusID == "" {
			anonymous = append(anonymous, g)
		}
	}
	seen := map[string]bool{}
	var out []topology.GPU
	for i := range devs {
		d := &devs[i]
		if !isGPU(d) {
			continue
		}
		bus := d.Address.String()
		g := topology.GPU{
			BusID: bus, Vendor: fmt.Sprintf("0x%04x", d.Vendor), Device: fmt.Sprintf("0x%04x", d.DeviceID),
			NUMANode: d.NUMANode, LocalCPUs: d.LocalCPUs, NVLinks: []topology.NVLink{},
			PCIe: topology.PCIe{Gen: pci.Gen(d.CurrentLinkSpeed), Width: d.CurrentLinkWidth,
				MaxGen: pci.Gen(d.MaxLinkSpeed), MaxWidth: d.MaxLinkWidth},
		}
		ng, listed := byBus[bus]
		switch {
		case !res.Available:
			g.State = topology.GPUNoNVML
		case !listed && len(anonymous) > 0:
			ng, anonymous = anonymous[0], anonymous[1:]
			warn(fmt.Errorf("GPU %s: NVML GPU %d (%s) gave no PCI address; matched by bus order", bus, ng.Index, ng.State))
			fillNVML(&g, ng)
		case !listed:
			g.State = topology.GPUNotInNVML
			warn(fmt.Errorf("GPU %s is on the PCI bus but NVML does not list it", bus))
		default:
			seen[bus] = true
			fillNVML(&g, ng)
		}
		out = append(out, g)
	}
	for _, ng := range append(res.GPUs[:0:0], anonymous...) {
		warn(fmt.Errorf("NVML lists GPU %d (%s) without a PCI address and no PCI GPU is left to match it", ng.Index, ng.State))
	}
	for _, ng := range res.GPUs {
		if ng.BusID != "" && !seen[strings.ToLower(ng.BusID)] {
			warn(fmt.Errorf("NVML lists GPU %d (%s) that the PCI bus does not show", ng.Index, ng.BusID))
		}
	}
	// NVML-listed GPUs by NVML index, then the rest in bus order.
	sortfn.SortStable(out, func(a, b topology.GPU) int {
		switch {
		case a.NVMLIndex != nil && b.NVMLIndex != nil:
			return *a.NVMLIndex - *b.NVMLIndex
		case a.NVMLIndex != nil:
			return -1
		case b.NVMLIndex != nil:
			return 1
		}
		return 0
	})
	next := 0
	for i := range out {
		if out[i].NVMLIndex != nil {
			out[i].Index = *out[i].NVMLIndex
		} else {
			out[i].Index = next
		}
		next = out[i].Index + 1
	}
	return out
}

func fillNVML(g *topology.GPU, ng nvml.GPU) {
	idx := ng.Index
	g.NVMLIndex = &idx
	switch ng.State {
	case "ok":
		g.State = topology.GPUOK
	case "lost":
		g.State = topology.GPULost
	default:
		g.State = topology.GPUNVMLError
	}
	g.Model, g.UUID, g.Minor = ng.Name, ng.UUID, ng.Minor
	g.NVMLCPUAffinity = cpuset.Of(ng.CPUAffinity...)
	g.GPUNUMAID = ng.NUMANode
	if ng.PCIeGen > 0 {
		g.PCIe.Gen = ng.PCIeGen
	}
	if ng.PCIeMaxGen > 0 {
		g.PCIe.MaxGen = ng.PCIeMaxGen
	}
	if ng.PCIeWidth > 0 {
		g.PCIe.Width = ng.PCIeWidth
	}
	if ng.PCIeMaxWidth > 0 {
		g.PCIe.MaxWidth = ng.PCIeMaxWidth
	}
	// nvml.Health and topology.GPUHealth have the same fields: the
	// conversion stops compiling if they drift apart.
	g.Health = topology.GPUHealth(ng.Health)
	g.Fabric = (*topology.GPUFabric)(ng.Fabric)
	g.Platform = (*topology.GPUPlatform)(ng.Platform)
	g.NVLinkVisible = ng.NVLinkVisible
	for _, l := range ng.NVLinks {
		g.NVLinks = append(g.NVLinks, topology.NVLink{Link: l.Link, Active: l.Active, Version: l.Version,
			RemoteBusID: l.RemoteBusID, RemoteType: topology.NVLinkRemote(l.RemoteType)})
	}
}

// nics builds one NIC per RDMA device of a network PCI function, or one per
// netdev where the function has no RDMA device. A RoCE LAG device (lag)
// is one NIC whose netdev is the bond; the bond's members are listed
// under it and make no NIC of their own.
func nics(devs []pci.Device, rdevs []rdma.Device, nds []rdma.Netdev, warn func(...error)) []topology.NIC {
	fnByAddr := map[pci.Address]*pci.Device{}
	for i := range devs {
		fnByAddr[devs[i].Address] = &devs[i]
	}
	rdmaByFn := map[pci.Address][]rdma.Device{}
	for _, r := range rdevs {
		if r.PCI == nil {
			warn(fmt.Errorf("RDMA device %s has no PCI function (software RDMA?); not used", r.Name))
			continue
		}
		if fn := fnByAddr[*r.PCI]; fn == nil {
			warn(fmt.Errorf("RDMA device %s: PCI function %s is not on the PCI bus", r.Name, r.PCI))
			continue
		}
		rdmaByFn[*r.PCI] = append(rdmaByFn[*r.PCI], r)
	}
	ndByFn := map[pci.Address][]rdma.Netdev{}
	for _, nd := range nds {
		if nd.PCI != nil {
			ndByFn[*nd.PCI] = append(ndByFn[*nd.PCI], nd)
		}
	}
	bonds, member := lagBonds(rdevs, nds, rdmaByFn)
	var out []topology.NIC
	for i := range devs {
		d := &devs[i]
		if d.Class>>16 != 0x02 {
			continue
		}
		base := topology.NIC{
			BusID: d.Address.String(), Vendor: fmt.Sprintf("0x%04x", d.Vendor), Device: fmt.Sprintf("0x%04x", d.DeviceID),
			Driver: d.Driver, NUMANode: d.NUMANode, LocalCPUs: d.LocalCPUs, Virtual: d.Virtual,
			Ports: []topology.Port{}, Interfaces: []topology.Interface{}, Netdevs: []string{},
		}
		var fnNetdevs []rdma.Netdev
		absorbed := false
		for _, nd := range ndByFn[d.Address] {
			if member[nd.Name] {
				absorbed = true
				continue
			}
			fnNetdevs = append(fnNetdevs, nd)
		}
		if rs := rdmaByFn[d.Address]; len(rs) > 0 {
			for _, r := range rs {
				nic := base
				nic.Name, nic.RDMADevice = r.Name, r.Name
				nic.FirmwareVersion, nic.NodeGUID = r.FirmwareVersion, r.NodeGUID
				names := map[string]bool{}
				for _, p := range r.Ports {
					nic.Ports = append(nic.Ports, port(p))
					if p.Netdev != "" {
						names[p.Netdev] = true
					}
				}
				if b := bonds[r.Name]; b != nil {
					nic.Bond = b.bond
					nic.Netdevs = []string{b.nd.Name}
					nic.Interfaces = []topology.Interface{iface(b.nd)}
					nic.Fabric = fabric(d.Driver, nic.Ports)
					out = append(out, nic)
					continue
				}
				if len(rs) == 1 {
					for _, nd := range fnNetdevs {
						names[nd.Name] = true
					}
				}
				for _, nd := range fnNetdevs {
					if names[nd.Name] {
						nic.Netdevs = append(nic.Netdevs, nd.Name)
						nic.Interfaces = append(nic.Interfaces, iface(nd))
					}
				}
				nic.Fabric = fabric(d.Driver, nic.Ports)
				out = append(out, nic)
			}
			continue
		}
		if len(fnNetdevs) == 0 {
			if absorbed {
				continue // a RoCE LAG member's function: listed under its bond
			}
			warn(fmt.Errorf("network function %s (driver %q) has no netdev and no RDMA device", d.Address, d.Driver))
			nic := base
			nic.Name, nic.Fabric = d.Address.String(), topology.FabricEthernet
			out = append(out, nic)
			continue
		}
		for _, nd := range fnNetdevs {
			nic := base
			nic.Name, nic.Netdevs = nd.Name, []string{nd.Name}
			nic.Interfaces = []topology.Interface{iface(nd)}
			nic.Fabric = topology.FabricEthernet
			out = append(out, nic)
		}
	}
	sortfn.Sort(out, func(a, b topology.NIC) int {
		return cmp.Or(strings.Compare(a.BusID, b.BusID), strings.Compare(a.Name, b.Name))
	})
	return out
}

// lagBond is a RoCE LAG device's bond: its netdev and the model's view.
type lagBond struct {
	nd   rdma.Netdev
	bond *topology.Bond
}

// lagBonds finds the RoCE LAG devices among the RDMA devices: mlx5 with
// LAG active registers one RDMA device (mlx5_bond_N) on the adapter's
// first PF (drivers/net/ethernet/mellanox/mlx5/core/lag/lag.c re-adds
// only that PF's IB device) and associates its GIDs with the bond
// (drivers/infiniband/core/roce_gid_mgmt.c gives a bond slave's GIDs to
// its master). So: a device whose port's netdev is a bond of two or more
// slaves, every slave a function of this device's adapter (same domain,
// bus and device), and no slave's function but its own with an RDMA
// device. A bond of ports of different adapters, each with its RDMA
// device, is no LAG: those stay NICs of their own. It returns the bonds
// by RDMA device and the member netdevs.
func lagBonds(rdevs []rdma.Device, nds []rdma.Netdev, rdmaByFn map[pci.Address][]rdma.Device) (map[string]*lagBond, map[string]bool) {
	byName := make(map[string]rdma.Netdev, len(nds))
	for _, nd := range nds {
		byName[nd.Name] = nd
	}
	bonds := map[string]*lagBond{}
	member := map[string]bool{}
	for _, r := range rdevs {
		if r.PCI == nil || len(rdmaByFn[*r.PCI]) != 1 {
			continue
		}
		var bond rdma.Netdev
		for _, p := range r.Ports {
			if nd, ok := byName[p.Netdev]; ok && len(nd.BondSlaves) >= 2 {
				bond = nd
				break
			}
		}
		if bond.Name == "" {
			continue
		}
		b := &topology.Bond{Name: bond.Name, Mode: bond.BondMode, Members: []topology.BondMember{}}
		lag := true
		for _, s := range bond.BondSlaves {
			nd, ok := byName[s]
			if !ok || nd.PCI == nil {
				lag = false
				break
			}
			a := *nd.PCI
			same := a.Domain == r.PCI.Domain && a.Bus == r.PCI.Bus && a.Device == r.PCI.Device
			if !same || (a != *r.PCI && len(rdmaByFn[a]) > 0) {
				lag = false
				break
			}
			b.Members = append(b.Members, topology.BondMember{BusID: a.String(), Interface: iface(nd)})
		}
		if !lag {
			continue
		}
		bonds[r.Name] = &lagBond{nd: bond, bond: b}
		for _, s := range bond.BondSlaves {
			member[s] = true
		}
	}
	return bonds, member
}

func fabric(driver string, ports []topology.Port) topology.Fabric {
	if driver == "efa" {
		return topology.FabricEFA
	}
	for _, p := range ports {
		switch p.LinkLayer {
		case "InfiniBand":
			return topology.FabricInfiniBand
		case "Ethernet":
			return topology.FabricRoCE
		}
	}
	// An RDMA device whose link layer is unknown and is not EFA: RDMA of
	// some kind; RoCE is the only Ethernet RDMA NCCL's IB transport uses.
	return topology.FabricRoCE
}

func port(p rdma.Port) topology.Port {
	tp := topology.Port{Port: p.Port, State: p.State, StateID: p.StateID, PhysState: p.PhysState,
		PhysStateID: p.PhysStateID, RateGbps: p.RateGbps, LinkLayer: p.LinkLayer, Netdev: p.Netdev}
	for _, g := range p.GIDs {
		tp.GIDs = append(tp.GIDs, topology.GID{Index: g.Index, GID: g.GID, Type: g.Type, Netdev: g.Netdev})
	}
	return tp
}

func iface(nd rdma.Netdev) topology.Interface {
	return topology.Interface{Name: nd.Name, OperState: nd.OperState, MTU: nd.MTU, SpeedMbps: nd.SpeedMbps, Address: nd.Address,
		Master: nd.Master, MasterKind: nd.MasterKind}
}

// hostInfo is the node's hostname and default route interface, with the
// reasons either could not be read.
type hostInfo struct {
	name, route       string
	nameErr, routeErr error
}

func readHost(root *rootfs.Root) hostInfo {
	var h hostInfo
	if s, err := root.String("proc/sys/kernel/hostname"); err == nil {
		h.name = s
	} else if !errors.Is(err, fs.ErrNotExist) {
		h.nameErr = err
	}
	h.route, h.routeErr = rdma.DefaultRouteInterface(root)
	return h
}
