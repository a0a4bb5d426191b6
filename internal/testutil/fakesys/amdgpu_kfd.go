// The KFD topology of the amdgpu blocks: CPU and GPU nodes and their
// io_links and p2p_links (kfd_crat.c, kfd_topology.c).

package fakesys

import (
	"fmt"

	"github.com/gpuaffinity/gpuaffinity/pci"
)

// kfd io_link types and flags (kfd_crat.h) and weights (kfd_crat.c).
const (
	kfdLinkHT   = 1  // CRAT_IOLINK_TYPE_HYPERTRANSPORT: AMD CPU to CPU
	kfdLinkPCIe = 2  // CRAT_IOLINK_TYPE_PCIEXPRESS
	kfdLinkQPI  = 5  // CRAT_IOLINK_TYPE_QPI_1_1: Intel CPU to CPU
	kfdLinkXGMI = 11 // CRAT_IOLINK_TYPE_XGMI

	kfdFlagEnabled     = 1 << 0 // CRAT_IOLINK_FLAGS_ENABLED
	kfdFlagNonCoherent = 1 << 1 // CRAT_IOLINK_FLAGS_NON_COHERENT

	kfdWeightPCIe = 20 // kfd_parse_subtype_iolink
	kfdWeightXGMI = 15 // KFD_CRAT_XGMI_WEIGHT, times the hops

	// Between compute partitions (kfd_crat.c): KFD_CRAT_INTRA_SOCKET_WEIGHT
	// inside one GPU, at the "mem_bw" of 819200 MB/s KFD gives that link.
	kfdWeightIntraSocket = 13
	kfdIntraSocketMBytes = 819200
)

// recSDMAEngine is kfd_topology.c rec_sdma_eng_map: the recommended XGMI
// SDMA engine from one physical node of an 8-GPU hive to another.
var recSDMAEngine = [8][8]int{
	{-1, 14, 12, 2, 4, 8, 10, 6},
	{14, -1, 2, 10, 8, 4, 6, 12},
	{10, 2, -1, 12, 14, 6, 4, 8},
	{2, 12, 10, -1, 6, 14, 8, 4},
	{4, 8, 14, 6, -1, 10, 12, 2},
	{8, 4, 6, 14, 12, -1, 2, 10},
	{10, 6, 4, 8, 12, 2, -1, 14},
	{6, 12, 8, 4, 2, 10, 14, -1},
}

// kfdLink is one io_link or p2p_link (kfd_iolink_properties).
type kfdLink struct {
	typ, from, to, weight    int
	minBW, maxBW, rec, flags uint32
}

// kfdNode is one KFD topology node; gpu is nil for a CPU node.
type kfdNode struct {
	numa     int // CPU node: its NUMA node
	gpu      *amdGPUNode
	io, p2p  []*kfdLink
	memBytes uint64
	cpus     int // cpu_cores_count
	cpuBase  int // cpu_core_id_base
}

// amdGPUNode is what the KFD tree needs of one KFD GPU node: an amdgpu
// function in SPX, or one compute partition of it (part of parts).
type amdGPUNode struct {
	amdEntry
	part       int // the compute partition (0 in SPX)
	parts      int // the GPU's partition count (1 in SPX)
	dir        string
	gpuID      int
	hive       uint64
	hivePos    int // position in its hive
	hiveSize   int
	physID     int
	hops       []int // to the hive's members, by position
	devID      uint64
	uniqueID   uint64
	drm        amdDRM
	pcieMaxBW  uint32
	vramBytes  uint64 // the node's memory: the GPU's, or its partition's share
	node       int    // KFD node id
	simdIDBase uint32
}

// amdgpu writes the KFD topology (kfd_topology.c, kfd_crat.c) and the DRM
// and XGMI entries (drm_sysfs.c, amdgpu_xgmi.c, amdgpu_xcp_drv.c) of the
// spec's amdgpu blocks; nothing without one.
func (b *builder) amdgpu() error {
	ents := b.s.amdEntries()
	if len(ents) == 0 {
		return nil
	}
	gpus, err := b.amdGPUNodes(ents)
	if err != nil {
		return err
	}
	nodes := b.kfdTopology(gpus)
	b.writeKFD(nodes)
	b.writeDRM(gpus)
	b.writeAMDHealth(gpus)
	b.writePeerMemory()
	return nil
}

// amdGPUNodes resolves each GPU's ids, DRM minors and hive.
func (b *builder) amdGPUNodes(ents []amdEntry) ([]*amdGPUNode, error) {
	ncpu := len(b.s.NUMA.Nodes)
	var gpus []*amdGPUNode
	hives := map[uint64][]amdEntry{}
	for _, e := range ents {
		if h := e.dev.AMDGPU.XGMIHive; h != "" {
			v, _ := parseU64(h)
			hives[v] = append(hives[v], e)
		}
	}
	used := map[int]bool{} // ids taken: every explicit one, then each made
	for _, e := range ents {
		if id := e.dev.AMDGPU.GPUID; id != nil {
			used[*id] = true
		}
	}
	procID := uint32(kfdGPUProcessorBase) // get_and_inc_gpu_processor_id
	node := ncpu
	for _, e := range ents {
		g := e.dev.AMDGPU
		dir, ok := b.fnDirs[e.addr.String()]
		if !ok {
			return nil, fmt.Errorf("%w: amdgpu %s: no PCI function", ErrSpec, e.addr)
		}
		parts := g.partitionCount()
		// A partition's memory is its memory partition's size over the
		// compute partitions sharing it (amdgpu_amdkfd_xcp_memory_size):
		// an even share of the HBM in every NPS mode, page aligned.
		vram := uint64(g.VRAMGiB * (1 << 30))
		share := vram / uint64(parts) &^ 4095
		for part := range parts {
			n := &amdGPUNode{amdEntry: e, part: part, parts: parts, dir: dir, node: node, drm: amdMinors(ents, g.Index)}
			node++
			n.vramBytes = vram
			if parts > 1 {
				n.vramBytes = share
			}
			// Each node's CRAT takes array_count x cu_per_simd_array
			// processor ids (one XCC's worth: the modelled gfx942
			// value); a partition's as a GPU's (a CPX capture: 40 apart).
			lay := g.layout()
			n.simdIDBase = procID
			procID += uint32(lay.arraysPerXCC * lay.cuPerArray)
			n.uniqueID = fnv64("unique:" + e.addr.String())
			if g.UniqueID != "" {
				n.uniqueID, _ = parseU64(g.UniqueID)
			}
			_, _, _, _, link := b.kindDefaults(e.dev)
			if link != nil {
				n.pcieMaxBW = pcieMBytes(link.MaxWidth, link.MaxSpeed)
			}
			if g.XGMIHive != "" {
				n.hive, _ = parseU64(g.XGMIHive)
				members := hives[n.hive]
				hops, _ := hiveHops(members) // checked by Validate
				for p, m := range members {
					if m.addr == e.addr {
						n.hivePos, n.hops = p, hops[p]
						n.devID, n.physID = xgmiIDs(m, p)
					}
				}
				n.hiveSize = len(members)
			}
			n.gpuID = b.kfdGPUID(n, used)
			used[n.gpuID] = true
			gpus = append(gpus, n)
		}
	}
	return gpus, nil
}

// kfdGPUID is kfd_generate_gpu_id: the CRC16 of the function's devfn,
// subsystem ids, domain, device id, bus, VRAM size and XCC mask, 16 bits,
// moved on past 0 and past the ids of GPUs added before it.
func (b *builder) kfdGPUID(n *amdGPUNode, used map[int]bool) int {
	g := n.dev.AMDGPU
	if g.GPUID != nil {
		return *g.GPUID
	}
	vendor, device, _, _, _ := b.kindDefaults(n.dev)
	v, _ := parseHex(vendor)
	dv, _ := parseHex(device)
	subv, subd := v, dv
	if n.dev.SubsystemVendor != "" {
		subv, _ = parseHex(n.dev.SubsystemVendor)
	}
	if n.dev.SubsystemDevice != "" {
		subd, _ = parseHex(n.dev.SubsystemDevice)
	}
	// The node's XCC mask: its first XCC and how many it has.
	xcc := uint32(max(g.NumXCC, 1) / n.parts)
	words := []uint32{
		uint32(n.addr.Dev<<3 | n.addr.Fn), subv | subd<<16, uint32(n.addr.Domain), dv,
		uint32(n.addr.Bus), uint32(n.vramBytes), uint32(n.vramBytes >> 32), uint32(n.part)*xcc | xcc<<16,
	}
	buf := make([]byte, 0, 32)
	for _, w := range words {
		buf = append(buf, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	id := int(crc16(0, buf))
	for id == 0 || used[id] {
		id = (id + 1) & 0xffff
	}
	return id
}

// pcieMBytes is amdgpu_amdkfd_get_pcie_bandwidth_mbytes for a link of
// that width and speed: lanes x the generation's Mb/s, in MB/s.
func pcieMBytes(width int, speed string) uint32 {
	mbits := map[int]int{1: 2500, 2: 5000, 3: 8000, 4: 16000, 5: 32000}[pci.Gen(speed)]
	return uint32(width * mbits / 8)
}

// kfdTopology builds the KFD node list as the kernel does: the CPU nodes
// of the virtual CRAT (kfd_create_vcrat_image_cpu), then each GPU added in
// order (kfd_topology_add_device): its PCIe link to its NUMA node and XGMI
// links to the hive members added before it, each with the reverse link
// on the far node (kfd_parse_subtype_iolink), the indirect p2p links
// through the other CPU nodes (kfd_create_indirect_link_prop) and to
// GPUs outside its hive (kfd_add_peer_prop), then the links' flags and
// recommended SDMA engines (kfd_fill_iolink_non_crat_info).
func (b *builder) kfdTopology(gpus []*amdGPUNode) []*kfdNode {
	s, l := b.s, b.l
	var nodes []*kfdNode
	cpuType := kfdLinkQPI
	if s.CPU.Vendor == "AuthenticAMD" {
		cpuType = kfdLinkHT
	}
	for i, nd := range s.NUMA.Nodes {
		cpus := l.nodeCPUs[nd.ID].Intersect(l.online).CPUs()
		n := &kfdNode{numa: nd.ID, memBytes: uint64(nd.MemoryGiB * (1 << 30)), cpus: len(cpus)}
		if len(cpus) > 0 {
			n.cpuBase = cpus[0]
		}
		if s.CPU.Arch != "aarch64" { // CPU links are x86_64 only
			for j := range s.NUMA.Nodes {
				if j != i {
					n.io = append(n.io, &kfdLink{typ: cpuType, from: i, to: j, weight: l.distances[i][j]})
				}
			}
		}
		nodes = append(nodes, n)
	}
	ncpu := len(nodes)
	for _, g := range gpus {
		k := g.node
		n := &kfdNode{gpu: g}
		nodes = append(nodes, n)
		cpu := max(g.numa, 0)
		up := &kfdLink{typ: kfdLinkPCIe, from: k, to: cpu, weight: kfdWeightPCIe, minBW: 2500 / 8, maxBW: g.pcieMaxBW}
		n.io = append(n.io, up)
		// Large BAR (all of VRAM visible): the CPU gets the reverse link.
		down := *up
		down.from, down.to = cpu, k
		nodes[cpu].io = append(nodes[cpu].io, &down)
		for _, p := range gpus[:k-ncpu] {
			if g.hive == 0 || p.hive != g.hive {
				continue
			}
			hops := g.hops[p.hivePos]
			x := &kfdLink{typ: kfdLinkXGMI, from: k, to: p.node, weight: kfdWeightXGMI * hops}
			switch {
			case g.parts > 1 && p.addr == g.addr:
				// Two partitions of one GPU (kfd_crat.c
				// kfd_fill_gpu_xgmi_link_to_gpu without the TA's
				// info): KFD_CRAT_INTRA_SOCKET_WEIGHT, memory bandwidth.
				x.weight, x.minBW, x.maxBW = kfdWeightIntraSocket, kfdIntraSocketMBytes, kfdIntraSocketMBytes
			case g.parts > 1:
				// Partitions of two GPUs: two intra-socket legs and
				// one XGMI hop, whatever the TA's hops; no bandwidth.
				x.weight = 2*kfdWeightIntraSocket + kfdWeightXGMI
			case hops == 1:
				bw := g.dev.AMDGPU.layout().xgmiMBytes
				x.minBW, x.maxBW = bw, bw
			}
			n.io = append(n.io, x)
			r := *x
			r.from, r.to = p.node, k
			nodes[p.node].io = append(nodes[p.node].io, &r)
		}
		b.kfdP2P(nodes, n, cpu, ncpu)
		kfdFill(nodes, n)
	}
	return nodes
}

// kfdP2P adds the new GPU node n's p2p links: through every other CPU node
// (weight of its PCIe link plus the CPU-to-CPU link), both ways on a
// large-BAR GPU; and with every GPU added before it outside its hive
// (CONFIG_HSA_AMD_P2P): the two PCIe weights, plus the CPU link when they
// hang off different CPUs. Copies carry the fields of the link they are
// made from at that moment, as kfd_topology.c's memcpy does.
func (b *builder) kfdP2P(nodes []*kfdNode, n *kfdNode, cpu, ncpu int) {
	k := n.gpu.node
	up := n.io[0]
	cpuLink := func(from, to int) *kfdLink {
		for _, l := range nodes[from].io {
			if l.to == to {
				return l
			}
		}
		return nil
	}
	for i := range ncpu {
		if i == cpu {
			continue
		}
		c := cpuLink(i, cpu)
		if c == nil {
			break // no CPU links (not x86_64): the kernel gives up here
		}
		p := *up
		p.weight = up.weight + c.weight
		p.minBW, p.maxBW = min(up.minBW, c.minBW), min(up.maxBW, c.maxBW)
		p.from, p.to = k, i
		n.p2p = append(n.p2p, &p)
		r := p
		r.from, r.to = i, k
		nodes[i].p2p = append(nodes[i].p2p, &r)
	}
	for d, old := range nodes[:k] {
		if old.gpu == nil || (old.gpu.hive != 0 && old.gpu.hive == n.gpu.hive) || old.gpu.addr == n.gpu.addr {
			continue
		}
		peer := func(l1, l2 *kfdLink, from, to int) *kfdLink {
			p := *l1
			p.weight = l1.weight + l2.weight
			p.minBW, p.maxBW = min(l1.minBW, l2.minBW), l2.maxBW
			if l1.to != l2.to {
				if c := cpuLink(l1.to, l2.to); c != nil {
					p.weight += c.weight
					p.minBW, p.maxBW = min(p.minBW, c.minBW), min(p.maxBW, c.maxBW)
				}
			}
			p.from, p.to = from, to
			return &p
		}
		old.p2p = append(old.p2p, peer(up, old.io[0], d, k))
		n.p2p = append(n.p2p, peer(old.io[0], up, k, d))
	}
}

// kfdFill is kfd_fill_iolink_non_crat_info for the new GPU node n: its
// links are enabled (PCIe atomics supported), each link's reverse on the
// far node too; a PCIe link into a CPU node, and PCIe between GPUs, is
// non-coherent; io links get their recommended SDMA engines.
func kfdFill(nodes []*kfdNode, n *kfdNode) {
	fill := func(outs []*kfdLink, far func(*kfdNode) []*kfdLink, rec bool) {
		for _, out := range outs {
			out.flags = kfdFlagEnabled
			peer := nodes[out.to]
			for _, in := range far(peer) {
				if in.to != out.from {
					continue
				}
				in.flags = kfdFlagEnabled
				if in.typ == kfdLinkPCIe {
					in.flags |= kfdFlagNonCoherent
					if peer.gpu != nil {
						out.flags |= kfdFlagNonCoherent
					}
				}
				if rec {
					kfdRecSDMA(n.gpu, peer, out, in)
				}
			}
		}
	}
	fill(n.io, func(x *kfdNode) []*kfdLink { return x.io }, true)
	fill(n.p2p, func(x *kfdNode) []*kfdLink { return x.p2p }, false)
}

// kfdRecSDMA is kfd_set_recommended_sdma_engines: between the GPUs of a
// full 8-GPU hive in SPX, one XGMI SDMA engine from rec_sdma_eng_map;
// otherwise every PCIe SDMA engine, or every XGMI one on an XGMI link to
// a GPU.
func kfdRecSDMA(g *amdGPUNode, to *kfdNode, out, in *kfdLink) {
	if to.gpu != nil && g.parts == 1 && g.hiveSize == 8 && g.physID < 8 && to.gpu.physID < 8 {
		out.rec = 1 << recSDMAEngine[g.physID][to.gpu.physID]
		in.rec = 1 << recSDMAEngine[to.gpu.physID][g.physID]
		return
	}
	pcie, xgmi := g.sdma()
	n, off := pcie, 0
	if out.typ == kfdLinkXGMI && to.gpu != nil && xgmi > 0 {
		n, off = xgmi, pcie
	}
	for i := range n {
		out.rec |= 1 << (i + off)
		in.rec |= 1 << (i + off)
	}
}

// sdma is the node's PCIe and XGMI SDMA engine counts: the GPU's, or
// its partition's even share of them, the first two for PCIe (a CPX
// MI300X partition: 2 and 0, as a CPX capture's KFD nodes read).
func (g *amdGPUNode) sdma() (pcie, xgmi int) {
	lay := g.dev.AMDGPU.layout()
	if g.parts == 1 {
		return lay.sdmaPCIe, lay.sdmaXGMI
	}
	all := (lay.sdmaPCIe + lay.sdmaXGMI) / g.parts
	pcie = min(all, lay.sdmaPCIe)
	return pcie, all - pcie
}
