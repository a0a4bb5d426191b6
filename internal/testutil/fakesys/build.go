package fakesys

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// Build writes the fake root of spec into dir (created if missing; it
// should be empty): dir/sys, dir/proc and, when the spec has an nvml
// block, dir/nvml.json. It validates the spec first and returns an error
// wrapping ErrSpec for a bad spec, or the *os.PathError of the first file
// that could not be written.
func Build(spec Spec, dir string) error {
	t, rf, err := buildTree(spec)
	if err != nil {
		return err
	}
	if rf != nil {
		data, err := marshalReplay(spec.Name, *rf)
		if err != nil {
			return err
		}
		t.raw("nvml.json", data)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("build %s: %w", spec.Name, err)
	}
	if err := t.write(dir); err != nil {
		return fmt.Errorf("build %s: %w", spec.Name, err)
	}
	return nil
}

// BuildMemory builds spec's root in memory: what Build writes, read
// through rootfs without a file on disk. lib replays the machine's NVML
// (nil for a machine without), as its nvml.json would, without encoding
// and decoding the file; the root has the file too, made when read.
func BuildMemory(spec Spec) (root *rootfs.Root, lib gonvml.Interface, err error) {
	t, rf, err := buildTree(spec)
	if err != nil {
		return nil, nil, err
	}
	m := t.memory("demo:" + spec.Name)
	if rf != nil {
		m.LazyFile("nvml.json", func() []byte {
			data, _ := marshalReplay(spec.Name, *rf) // a ReplayFile always encodes
			return data
		})
		lib = nvml.NewReplay(*rf)
	}
	return m.Root(), lib, nil
}

// marshalReplay is nvml.json as Build writes it.
func marshalReplay(name string, rf nvml.ReplayFile) ([]byte, error) {
	data, err := nvml.EncodeReplay(rf)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", name, err)
	}
	return data, nil
}

// buildTree lays out spec's files, and its NVML answers (nil for a
// machine without NVML).
func buildTree(spec Spec) (*tree, *nvml.ReplayFile, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, fmt.Errorf("build %s: %w", spec.Name, err)
	}
	l, err := spec.layout()
	if err != nil {
		return nil, nil, fmt.Errorf("build %s: %w", spec.Name, err)
	}
	b := &builder{s: &spec, l: l, t: newTree(), ifindex: 1, fnDirs: map[string]string{}}
	b.cpus()
	b.numa()
	b.virtualNet()
	if err := b.pci(); err != nil {
		return nil, nil, fmt.Errorf("build %s: %w", spec.Name, err)
	}
	if err := b.amdgpu(); err != nil {
		return nil, nil, fmt.Errorf("build %s: %w", spec.Name, err)
	}
	if err := b.storage(b.fnDirs); err != nil {
		return nil, nil, fmt.Errorf("build %s: %w", spec.Name, err)
	}
	b.iommu(b.fnDirs)
	b.dmi()
	b.proc()
	b.nvidiaProc()
	b.imex()
	if err := b.files(); err != nil {
		return nil, nil, fmt.Errorf("build %s: %w", spec.Name, err)
	}
	addrs, err := b.addresses()
	if err != nil {
		return nil, nil, fmt.Errorf("build %s: %w", spec.Name, err)
	}
	if addrs != nil {
		b.t.raw(AddressesFile, addrs)
	}
	if spec.NVML == nil {
		return b.t, nil, nil
	}
	rf := b.replay()
	return b.t, &rf, nil
}

type builder struct {
	s       *Spec
	l       *layout
	t       *tree
	ifindex int
	gpus    []gpuFn
	irq     int
	// fnDirs is each PCI function's directory, by bus id (pci fills it).
	fnDirs map[string]string
}

// gpuFn is what nvml.json needs of a GPU function.
type gpuFn struct {
	addr   bdf
	gpu    *GPU
	numa   int
	local  cpuset.Set
	pciID  uint32
	subID  uint32
	link   Link
	hasLnk bool
}

func itoa(i int) string { return strconv.Itoa(i) }

const cpuDir = "sys/devices/system/cpu"

func (b *builder) cpus() {
	l, t, s := b.l, b.t, b.s
	t.attr(cpuDir+"/online", l.online.String())
	t.attr(cpuDir+"/offline", l.offline.String())
	all := cpuset.Range(0, l.ncpu-1).String()
	t.attr(cpuDir+"/possible", all)
	t.attr(cpuDir+"/present", all)
	t.attr(cpuDir+"/kernel_max", itoa(max(l.ncpu, 8192)-1))
	w := l.ncpu
	for n := range l.ncpu {
		d := cpuDir + "/cpu" + itoa(n)
		if l.offline.Contains(n) {
			t.attr(d+"/online", "0")
			continue
		}
		t.attr(d+"/online", "1")
		sock := l.socketOf(s, n)
		core := l.siblings(s, n).Intersect(l.online)
		pkg := l.socketCPUs(s, sock).Intersect(l.online)
		top := d + "/topology/"
		t.attr(top+"core_id", itoa(l.coreOf(s, n)))
		t.attr(top+"physical_package_id", itoa(sock))
		t.attr(top+"die_id", "0")
		t.attr(top+"cluster_id", itoa(l.coreOf(s, n)))
		coreMask, coreList := core.Mask(w), core.String()
		pkgMask, pkgList := pkg.Mask(w), pkg.String()
		for _, f := range []string{"core_cpus", "thread_siblings", "cluster_cpus"} {
			t.attr(top+f, coreMask)
			t.attr(top+f+"_list", coreList)
		}
		for _, f := range []string{"core_siblings", "package_cpus", "die_cpus"} {
			t.attr(top+f, pkgMask)
			t.attr(top+f+"_list", pkgList)
		}
	}
}

const nodeDir = "sys/devices/system/node"

func (b *builder) numa() {
	l, t := b.l, b.t
	ids := cpuset.Of(l.nodeIDs...)
	var withCPU, withMem []int
	for i, id := range l.nodeIDs {
		n := b.s.NUMA.Nodes[i]
		if !l.nodeCPUs[id].IsEmpty() {
			withCPU = append(withCPU, id)
		}
		if n.MemoryGiB > 0 {
			withMem = append(withMem, id)
		}
		d := nodeDir + "/node" + itoa(id)
		t.attr(d+"/cpulist", l.nodeCPUs[id].String())
		t.attr(d+"/cpumap", l.nodeCPUs[id].Mask(l.ncpu))
		dist := make([]string, len(l.nodeIDs))
		for j, v := range l.distances[i] {
			dist[j] = itoa(v)
		}
		t.attr(d+"/distance", strings.Join(dist, " "))
		t.attr(d+"/meminfo", nodeMeminfo(id, n))
		hp := d + "/hugepages/hugepages-2048kB/"
		t.attr(hp+"nr_hugepages", itoa(n.Hugepages2M))
		t.attr(hp+"free_hugepages", itoa(n.Hugepages2M))
		t.attr(hp+"surplus_hugepages", "0")
		hp = d + "/hugepages/hugepages-1048576kB/"
		t.attr(hp+"nr_hugepages", "0")
		t.attr(hp+"free_hugepages", "0")
		t.attr(hp+"surplus_hugepages", "0")
	}
	t.attr(nodeDir+"/online", ids.String())
	t.attr(nodeDir+"/possible", ids.String())
	t.attr(nodeDir+"/has_cpu", cpuset.Of(withCPU...).String())
	t.attr(nodeDir+"/has_memory", cpuset.Of(withMem...).String())
	t.attr(nodeDir+"/has_normal_memory", cpuset.Of(withMem...).String())
}

func kib(gib float64) uint64 { return uint64(gib * 1024 * 1024) }

// nodeMeminfo is nodeN/meminfo in the kernel's layout (drivers/base/node.c).
func nodeMeminfo(id int, n NUMANode) string {
	total := kib(n.MemoryGiB)
	huge := uint64(n.Hugepages2M) * 2048
	free := (total - min(huge, total)) * 9 / 10
	var b strings.Builder
	line := func(k string, v uint64) { fmt.Fprintf(&b, "Node %d %-15s %8d kB\n", id, k+":", v) }
	line("MemTotal", total)
	line("MemFree", free)
	line("MemUsed", total-free)
	line("Active", 0)
	line("Inactive", 0)
	line("FilePages", 0)
	line("Mapped", 0)
	line("AnonPages", 0)
	line("Shmem", 0)
	line("KernelStack", 0)
	line("PageTables", 0)
	line("Slab", 0)
	fmt.Fprintf(&b, "Node %d HugePages_Total: %5d\n", id, n.Hugepages2M)
	fmt.Fprintf(&b, "Node %d HugePages_Free:  %5d\n", id, n.Hugepages2M)
	fmt.Fprintf(&b, "Node %d HugePages_Surp:  %5d", id, 0)
	return b.String()
}

func (b *builder) dmi() {
	d := "sys/devices/virtual/dmi/id/"
	m := b.s.DMI
	b.t.attr(d+"sys_vendor", m.SysVendor)
	b.t.attr(d+"product_name", m.ProductName)
	b.t.attr(d+"chassis_asset_tag", m.ChassisAssetTag)
	b.t.attr(d+"board_vendor", m.BoardVendor)
	if m.BIOSVersion != "" {
		b.t.attr(d+"bios_version", m.BIOSVersion)
	}
	b.t.link("sys/class/dmi/id", "sys/devices/virtual/dmi/id")
}

func (b *builder) virtualNet() {
	for _, name := range b.s.VirtualNetdevs {
		d := "sys/devices/virtual/net/" + name
		nd := Netdev{Name: name, Type: 1, MTU: 1500, Operstate: "down", Address: "02:42:00:00:00:01"}
		if name == "lo" {
			nd = Netdev{Name: name, Type: 772, MTU: 65536, Operstate: "unknown", Address: "00:00:00:00:00:00"}
		}
		if b.hasSlaves(name) {
			nd.Operstate = "up" // netvsc's synthetic NIC of Azure's VF
		}
		b.netdevFiles(d, nd, "")
		b.t.link("sys/class/net/"+name, d)
	}
	// A bond: bonding/slaves lists the netdevs enslaved to it (the kernel's
	// drivers/net/bonding/bond_sysfs.c), in spec order. The bond takes its
	// first slave's MAC and MTU (bond_enslave, fail_over_mac none) and
	// reports the sum of its up slaves' speeds (bond_ethtool_get_link_ksettings).
	for _, bond := range b.s.Bonds {
		name := bond.Name
		d := "sys/devices/virtual/net/" + name
		var slaves []string
		nd := Netdev{Name: name, Type: 1, MTU: 9000, Operstate: "up", Address: "02:42:00:00:00:02"}
		speed := 0
		for _, fn := range b.s.Functions() {
			for i, s := range fn.Device.Netdevs {
				if s.Master != name {
					continue
				}
				a, _ := parseBDF(fn.BDF) // validated
				vendor, _, _, _, _ := b.kindDefaults(fn.Device)
				s = netdevDefaults(s, a, i, macOUI(vendor))
				if len(slaves) == 0 {
					nd.Address, nd.MTU = s.Address, s.MTU
				}
				slaves = append(slaves, s.Name)
				if s.Operstate == "up" && s.Speed != nil && *s.Speed > 0 {
					speed += *s.Speed
				}
			}
		}
		if speed > 0 {
			nd.Speed = &speed
		}
		b.netdevFiles(d, nd, "")
		b.t.attr(d+"/bonding/slaves", strings.Join(slaves, " "))
		b.t.attr(d+"/bonding/mode", cmpOr(bond.Mode, "802.3ad 4"))
		b.t.link("sys/class/net/"+name, d)
	}
}

// hasSlaves reports whether a netdev of the spec names master as its
// master.
func (b *builder) hasSlaves(master string) bool {
	for _, fn := range b.s.Functions() {
		for _, nd := range fn.Device.Netdevs {
			if nd.Master == master {
				return true
			}
		}
	}
	return false
}

// files copies the spec's files (testdata/files) into the root.
func (b *builder) files() error {
	for _, f := range b.s.Files {
		data, err := filesFS.ReadFile("testdata/files/" + f.Source)
		if err != nil {
			return fmt.Errorf("files: %s: %w", f.Source, err)
		}
		b.t.raw(f.Path, data)
	}
	return nil
}

// nvidiaVersion is the nvidia module's version where the spec loads it;
// "" otherwise.
func (b *builder) nvidiaVersion() string {
	s := b.s
	if !slices.Contains(s.Kernel.Modules, "nvidia") {
		return ""
	}
	if s.Kernel.NVIDIAVersion != "" {
		return s.Kernel.NVIDIAVersion
	}
	if s.NVML != nil {
		return s.NVML.DriverVersion
	}
	return ""
}

// nvidiaProc writes the driver's own files (open-gpu-kernel-modules
// kernel-open/nvidia/nv-procfs.c formats): /proc/driver/nvidia/version,
// /sys/module/nvidia/version and each GPU's information file.
func (b *builder) nvidiaProc() {
	if slices.Contains(b.s.Kernel.Modules, "nvidia_fs") {
		// GDS's nvidia-fs: a placeholder of its procfs file, which readers
		// only look for.
		b.t.attr("proc/driver/nvidia-fs/version", "version: 2.17")
	}
	v := b.nvidiaVersion()
	if v == "" {
		return
	}
	nvrm := fmt.Sprintf("NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Tue Mar  5 22:23:56 UTC 2024", v)
	if b.s.Kernel.NVIDIAOpen {
		nvrm = fmt.Sprintf("NVRM version: NVIDIA UNIX Open Kernel Module for %s  %s  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:23:56 UTC 2024",
			cmpOr(b.s.CPU.Arch, "x86_64"), v)
	}
	b.t.raw("proc/driver/nvidia/version", []byte(nvrm+"\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"))
	b.t.attr("sys/module/nvidia/version", v)
	for _, g := range b.gpus {
		minor := g.gpu.Index
		if g.gpu.Minor != nil {
			minor = *g.gpu.Minor
		}
		var w strings.Builder
		fmt.Fprintf(&w, "Model: \t\t %s\n", g.gpu.Name)
		fmt.Fprintf(&w, "IRQ:   \t\t %d\n", 200+g.gpu.Index)
		if g.gpu.UUID != "" {
			fmt.Fprintf(&w, "GPU UUID: \t %s\n", g.gpu.UUID)
		}
		fmt.Fprintf(&w, "Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n")
		fmt.Fprintf(&w, "Bus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n", g.addr, minor)
		b.t.raw("proc/driver/nvidia/gpus/"+g.addr.String()+"/information", []byte(w.String()))
	}
}

// imex writes the IMEX spec: /proc/devices with the driver's character
// devices (the nvidia ones drivers register, nvidia-caps-imex-channels
// among them), replayed channel nodes, and the IMEX daemon's config and
// node list as the IMEX guide ships them.
func (b *builder) imex() {
	im := b.s.IMEX
	if im == nil {
		return
	}
	var devs strings.Builder
	devs.WriteString("Character devices:\n  1 mem\n  4 tty\n195 nvidia\n")
	if im.Major > 0 {
		fmt.Fprintf(&devs, "%3d %s\n", im.Major, "nvidia-caps-imex-channels")
	}
	devs.WriteString("\nBlock devices:\n259 blkext\n")
	b.t.raw("proc/devices", []byte(devs.String()))
	major := cmp.Or(im.NodeMajor, im.Major)
	for _, c := range im.Channels {
		b.t.attr(fmt.Sprintf("dev/nvidia-caps-imex-channels/channel%d", c), fmt.Sprintf("c %d:%d", major, c))
	}
	if im.Peers != nil {
		b.t.raw("etc/nvidia-imex/config.cfg", []byte("# IMEX daemon configuration\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\nSERVER_PORT=50000\nIMEX_WAIT_FOR_QUORUM=RECOVERY\n"))
		b.t.raw("etc/nvidia-imex/nodes_config.cfg", []byte(strings.Join(im.Peers, "\n")+"\n"))
	}
}

func (b *builder) proc() {
	s, l, t := b.s, b.l, b.t
	t.attr("proc/sys/kernel/hostname", cmpOr(s.Hostname, s.Name))
	if s.Kernel.Release != "" {
		t.attr("proc/sys/kernel/osrelease", s.Kernel.Release)
	}
	if s.Kernel.Cmdline != "" {
		t.attr("proc/cmdline", s.Kernel.Cmdline)
	}
	for _, m := range s.Kernel.Modules {
		t.attr("sys/module/"+m+"/initstate", "live")
	}
	if s.DefaultRoute != "" {
		// The kernel's format (net/ipv4/fib_trie.c fib_route_seq_show):
		// a default route via 10.0.0.1 and the interface's own subnet.
		t.raw("proc/net/route", []byte(fmt.Sprintf(
			"%-127s\n%s\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0%-50s\n"+
				"%s\t0000000A\t00000000\t0001\t0\t0\t100\t0000FFFF\t0\t0\t0%-50s\n",
			"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT",
			s.DefaultRoute, "", s.DefaultRoute, "")))
	}
	t.raw("proc/cpuinfo", []byte(b.cpuinfo()))
	var total, hugeKB uint64
	var huge int
	for _, n := range s.NUMA.Nodes {
		total += kib(n.MemoryGiB)
		huge += n.Hugepages2M
		hugeKB += uint64(n.Hugepages2M) * 2048
	}
	free := (total - min(total, hugeKB)) * 9 / 10
	var m strings.Builder
	kv := func(k string, v uint64) { fmt.Fprintf(&m, "%-15s %8d kB\n", k+":", v) }
	kv("MemTotal", total)
	kv("MemFree", free)
	kv("MemAvailable", free)
	kv("Buffers", 0)
	kv("Cached", 0)
	kv("SwapTotal", 0)
	kv("SwapFree", 0)
	fmt.Fprintf(&m, "HugePages_Total: %5d\nHugePages_Free:  %5d\nHugePages_Rsvd:      0\nHugePages_Surp:      0\n", huge, huge)
	kv("Hugepagesize", 2048)
	kv("Hugetlb", hugeKB)
	t.raw("proc/meminfo", []byte(m.String()))

	mems := cpuset.Of(l.nodeIDs...)
	status := fmt.Sprintf("Name:\tgpuaffinity\nState:\tR (running)\nPid:\t1\nCpus_allowed:\t%s\nCpus_allowed_list:\t%s\nMems_allowed:\t%s\nMems_allowed_list:\t%s\n",
		l.allowed.Mask(l.ncpu), l.allowed, mems.Mask(1024), mems)
	t.raw("proc/self/status", []byte(status))
	b.procMounts()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (b *builder) cpuinfo() string {
	s, l := b.s, b.l
	c := s.CPU
	var w strings.Builder
	hv := ""
	if c.Hypervisor {
		hv = " hypervisor"
	}
	for _, n := range l.online.CPUs() {
		if c.Arch == "aarch64" {
			fmt.Fprintf(&w, "processor\t: %d\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti\nCPU implementer\t: %s\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0x%03x\nCPU revision\t: 0\n\n",
				n, cmpOr(c.Vendor, "0x41"), c.Model)
			continue
		}
		fmt.Fprintf(&w, "processor\t: %d\nvendor_id\t: %s\ncpu family\t: %d\nmodel\t\t: %d\nmodel name\t: %s\nstepping\t: 8\nphysical id\t: %d\nsiblings\t: %d\ncore id\t\t: %d\ncpu cores\t: %d\napicid\t\t: %d\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc nonstop_tsc cpuid pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm avx2 avx512f%s\n\n",
			n, cmpOr(c.Vendor, "GenuineIntel"), c.Family, c.Model, c.ModelName,
			l.socketOf(s, n), c.CoresPerSocket*c.ThreadsPerCore, l.coreOf(s, n), c.CoresPerSocket, n, hv)
	}
	return w.String()
}

// health writes the GPU's health answers: healthy defaults, then the gpu
// block's health overrides. An NVSwitch GPU (active links, nvlink_remote
// nvswitch) has completed fabric registration; any other answers fabric
// state 0, GPU_FABRIC_STATE_NOT_SUPPORTED, as the H200 VM capture does.
func health(d *nvml.ReplayDevice, g *GPU) {
	h := g.Health
	if h == nil {
		h = &GPUHealth{}
	}
	persistence := 1
	if h.Persistence != nil && !*h.Persistence {
		persistence = 0
	}
	ecc := deref(h.ECCUncorrectedVolatile)
	rows := nvml.ReplayRemappedRows{
		Correctable: deref(h.RemappedRowsCorrectable), Uncorrectable: deref(h.RemappedRowsUncorrectable),
		Pending: deref(h.RemapPending), Failure: deref(h.RemapFailure),
	}
	var fabric nvml.ReplayFabric
	if !g.NVLinks.NotSupported && g.NVLinks.N > 0 && g.NVLinkRemote != "gpu" {
		fabric.State = 3 // GPU_FABRIC_STATE_COMPLETED
	}
	if h.FabricState != nil {
		fabric.State = *h.FabricState
	}
	fabric.Status = deref(h.FabricStatus)
	if f := g.Fabric; f != nil {
		fabric.ClusterUUID, fabric.CliqueID = f.ClusterUUID, f.CliqueID
		fabric.HealthMask, fabric.HealthSummary = f.HealthMask, f.HealthSummary
	}
	if g.Platform != nil {
		d.Platform = &nvml.Answer[nvml.ReplayPlatform]{Value: nvml.ReplayPlatform(*g.Platform)}
	}
	d.Persistence = &nvml.Answer[int]{Value: persistence}
	d.ECCUncorrectedVolatile = &nvml.Answer[uint64]{Value: ecc}
	d.ECCUncorrectedAggregate = &nvml.Answer[uint64]{Value: ecc}
	d.RemappedRows = &nvml.Answer[nvml.ReplayRemappedRows]{Value: rows}
	d.RetiredPages = &nvml.Answer[nvml.ReplayRetiredPages]{Value: nvml.ReplayRetiredPages{DoubleBit: deref(h.RetiredPages)}}
	d.RetiredPagesPending = &nvml.Answer[int]{Value: b2i(deref(h.RetiredPagesPending))}
	d.Fabric = &nvml.Answer[nvml.ReplayFabric]{Value: fabric}
	d.RecoveryAction = &nvml.Answer[int]{Value: deref(h.RecoveryAction)}
	d.PCIeReplay = &nvml.Answer[int]{Value: deref(h.PCIeReplay)}
}

// linkErrors is a listed link's GetNvLinkErrorCounter answers.
func linkErrors(e NVLinkErrors) *nvml.ReplayNVLinkErrors {
	a := func(v uint64) *nvml.Answer[uint64] { return &nvml.Answer[uint64]{Value: v} }
	return &nvml.ReplayNVLinkErrors{CRCFlit: a(e.CRCFlit), CRCData: a(e.CRCData), Replay: a(e.Replay), Recovery: a(e.Recovery)}
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// replay builds nvml.json from the GPUs' gpu blocks.
func (b *builder) replay() nvml.ReplayFile {
	n := b.s.NVML
	rf := nvml.ReplayFile{
		Version:           nvml.ReplayVersion,
		Init:              n.Init,
		DriverVersion:     nvml.Answer[string]{Value: n.DriverVersion},
		NVMLVersion:       nvml.Answer[string]{Value: n.NVMLVersion},
		CUDADriverVersion: nvml.Answer[int]{Value: n.CUDA},
		DeviceCount:       nvml.Answer[int]{Value: len(b.gpus)},
		Devices:           []nvml.ReplayDevice{},
	}
	gpus := slices.Clone(b.gpus)
	slices.SortFunc(gpus, func(a, c gpuFn) int { return a.gpu.Index - c.gpu.Index })
	busOf := map[int]string{}
	for _, g := range gpus {
		busOf[g.gpu.Index] = g.addr.nvmlBusID()
	}
	ns := nvml.Answer[int]{Return: "ERROR_NOT_SUPPORTED"}
	for _, g := range gpus {
		if g.gpu.Lost {
			rf.Devices = append(rf.Devices, nvml.ReplayDevice{Handle: "ERROR_GPU_IS_LOST"})
			continue
		}
		d := nvml.ReplayDevice{
			PCI:  nvml.Answer[nvml.ReplayPCI]{Value: nvml.ReplayPCI{BusID: g.addr.nvmlBusID(), PCIDeviceID: g.pciID, PCISubsystemID: g.subID}},
			UUID: nvml.Answer[string]{Value: cmpOr(g.gpu.UUID, fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", g.gpu.Index, g.pciID))},
			Name: nvml.Answer[string]{Value: cmpOr(g.gpu.Name, "NVIDIA H100 80GB HBM3")},
		}
		minor := g.gpu.Index
		if g.gpu.Minor != nil {
			minor = *g.gpu.Minor
		}
		d.Minor = nvml.Answer[int]{Value: minor}
		// GetNumaNodeId "only applies to platforms where the GPUs are NUMA
		// nodes" (nvml.h): it answers with the GPU memory's node on
		// coherent platforms and NOT_SUPPORTED on x86, as in the H200
		// capture.
		if g.gpu.MemoryNUMANode != nil {
			d.NUMANode = nvml.Answer[int]{Value: *g.gpu.MemoryNUMANode}
		} else {
			d.NUMANode = ns
		}
		words := make([]uint64, (b.l.ncpu+63)/64)
		aff := g.local
		if g.gpu.CPUAffinity != "" {
			aff, _ = cpuset.Parse(g.gpu.CPUAffinity) // checked by Validate
		}
		for _, c := range aff.CPUs() {
			words[c/64] |= 1 << (c % 64)
		}
		d.CPUAffinity = nvml.Answer[[]uint64]{Value: words}
		if g.hasLnk {
			d.PCIeGen = nvml.Answer[int]{Value: pci.Gen(g.link.Speed)}
			d.PCIeMaxGen = nvml.Answer[int]{Value: pci.Gen(g.link.MaxSpeed)}
			d.PCIeWidth = nvml.Answer[int]{Value: g.link.Width}
			d.PCIeMaxWidth = nvml.Answer[int]{Value: g.link.MaxWidth}
		} else {
			d.PCIeGen, d.PCIeMaxGen, d.PCIeWidth, d.PCIeMaxWidth = ns, ns, ns, ns
		}
		maxLinks := g.gpu.MaxLinks
		if maxLinks == 0 {
			maxLinks = 18
		}
		maxLinks = max(maxLinks, g.gpu.NVLinks.N)
		version := g.gpu.NVLinkVersion
		if version == 0 {
			version = 4
		}
		d.NVLinks = make([]nvml.ReplayNVLink, 0, maxLinks)
		for i := range maxLinks {
			lk := nvml.ReplayNVLink{Link: i}
			switch {
			case g.gpu.NVLinks.NotSupported || i >= g.gpu.NVLinks.N:
				lk.State = ns
				lk.Version = ns
				lk.Remote = nvml.Answer[nvml.ReplayPCI]{Return: "ERROR_NOT_SUPPORTED"}
				lk.RemoteType = ns
			case slices.Contains(g.gpu.NVLinksDown, i):
				// Down: the version and remote end of a link that is not
				// up answer NOT_SUPPORTED.
				lk.State = nvml.Answer[int]{Value: 0}
				lk.Version = ns
				lk.Remote = nvml.Answer[nvml.ReplayPCI]{Return: "ERROR_NOT_SUPPORTED"}
				lk.RemoteType = ns
				lk.Errors = linkErrors(g.gpu.NVLinkErrors[i])
			default:
				lk.Errors = linkErrors(g.gpu.NVLinkErrors[i])
				lk.State = nvml.Answer[int]{Value: 1}
				lk.Version = nvml.Answer[int]{Value: version}
				if g.gpu.NVLinkRemote == "gpu" {
					peer := g.gpu.NVLinkPeers[i]
					lk.Remote = nvml.Answer[nvml.ReplayPCI]{Value: nvml.ReplayPCI{BusID: busOf[peer], PCIDeviceID: g.pciID, PCISubsystemID: g.subID}}
					lk.RemoteType = nvml.Answer[int]{Value: 0}
				} else {
					// A fictitious NVSwitch per link%4 (HGX H100 has four).
					lk.Remote = nvml.Answer[nvml.ReplayPCI]{Value: nvml.ReplayPCI{BusID: fmt.Sprintf("00000000:FF:%02X.0", i%4), PCIDeviceID: 0x22a310de}}
					lk.RemoteType = nvml.Answer[int]{Value: 2}
				}
			}
			d.NVLinks = append(d.NVLinks, lk)
		}
		health(&d, g.gpu)
		d.XIDs = &nvml.Answer[[]uint64]{Value: append([]uint64{}, g.gpu.XIDs...)}
		rf.Devices = append(rf.Devices, d)
	}
	return rf
}
