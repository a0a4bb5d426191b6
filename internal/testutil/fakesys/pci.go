package fakesys

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/pci"
)

// PCIe device/port types (PCIe capability register bits 7:4).
const (
	pcieEndpoint   = 0
	pcieRootPort   = 4
	pcieUpstream   = 5
	pcieDownstream = 6
)

// fnCtx is what a function inherits from its place in the tree.
type fnCtx struct {
	parentDir string // root-relative directory of the parent
	numa      int
	portType  int // PCIe type a bridge at this level gets
	multi     map[[3]int]int
	used      *[256]bool
}

func (b *builder) pci() error {
	t := b.t
	t.dir("sys/bus/pci/devices")
	t.dir("sys/bus/pci/drivers")
	t.dir("sys/class/net")
	t.dir("sys/class/infiniband")
	// Paths first: physfn links need their PF's path.
	paths := map[string]string{}
	multi := map[[3]int]int{}
	used := map[int]*[256]bool{}
	var walk func(devs []Device, parent string)
	walk = func(devs []Device, parent string) {
		for i := range devs {
			a, _ := parseBDF(devs[i].BDF)
			p := parent + "/" + a.String()
			paths[a.String()] = p
			multi[[3]int{a.Domain, a.Bus, a.Dev}]++
			if used[a.Domain] == nil {
				used[a.Domain] = new([256]bool)
			}
			used[a.Domain][a.Bus] = true
			walk(devs[i].Children, p)
		}
	}
	for _, hb := range b.s.PCI {
		dom, bus, _ := parseRootBus(hb.HostBridge)
		if used[dom] == nil {
			used[dom] = new([256]bool)
		}
		used[dom][bus] = true
		walk(hb.Devices, fmt.Sprintf("sys/devices/pci%04x:%02x", dom, bus))
	}
	for _, hb := range b.s.PCI {
		dom, bus, _ := parseRootBus(hb.HostBridge)
		root := fmt.Sprintf("sys/devices/pci%04x:%02x", dom, bus)
		t.attr(root+"/uevent", "")
		numa := -1
		if hb.NUMA != nil {
			numa = *hb.NUMA
		}
		ctx := fnCtx{parentDir: root, numa: numa, portType: pcieRootPort, multi: multi, used: used[dom]}
		for i := range hb.Devices {
			if err := b.function(&hb.Devices[i], ctx, paths); err != nil {
				return err
			}
		}
	}
	return nil
}

// kindDefaults fills the defaults of a function's kind.
func (b *builder) kindDefaults(d *Device) (vendor, device, class, driver string, link *Link) {
	vendor, device, class, driver = d.Vendor, d.Device, d.Class, d.Driver
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	gen5 := &Link{Speed: "32.0 GT/s PCIe", Width: 16}
	switch d.Kind {
	case KindGPU:
		def(&vendor, "0x10de")
		def(&device, "0x2330")
		def(&class, "0x030200")
		def(&driver, "nvidia")
		link = gen5
	case KindNIC:
		def(&vendor, "0x15b3")
		if vendor == vendorPensando {
			def(&device, "0x1002") // PCI_DEVICE_ID_PENSANDO_IONIC_ETH_PF
		}
		def(&device, "0x1021")
		ib := d.RDMA != nil
		if d.RDMA != nil {
			for _, p := range d.RDMA.Ports {
				if p.LinkLayer != "" && p.LinkLayer != "InfiniBand" {
					ib = false
				}
			}
		}
		if ib {
			def(&class, "0x020700")
		} else {
			def(&class, "0x020000")
		}
		switch vendor {
		case "0x15b3":
			def(&driver, "mlx5_core")
		case vendorPensando:
			def(&driver, "ionic")
		}
		link = gen5
	case KindBridge:
		def(&vendor, "0x1000")
		def(&device, "0xc030")
		def(&class, "0x060400")
		def(&driver, "pcieport")
		link = gen5
	case KindNVMe:
		def(&vendor, "0x144d") // Samsung PM1733
		def(&device, "0xa824")
		def(&class, "0x010802")
		def(&driver, "nvme")
		link = &Link{Speed: "16.0 GT/s PCIe", Width: 4}
	case KindOther:
		def(&vendor, "0x8086")
		def(&device, "0x0000")
	}
	if d.Link != nil {
		l := *d.Link
		if l.Speed == "" && link != nil {
			l.Speed = link.Speed
		}
		if l.Width == 0 && link != nil {
			l.Width = link.Width
		}
		link = &l
	}
	if link != nil {
		l := *link
		if l.MaxSpeed == "" {
			l.MaxSpeed = l.Speed
		}
		if l.MaxWidth == 0 {
			l.MaxWidth = l.Width
		}
		link = &l
	}
	if driver == "none" {
		driver = ""
	}
	return
}

func (b *builder) function(d *Device, ctx fnCtx, paths map[string]string) error {
	t, l := b.t, b.l
	a, _ := parseBDF(d.BDF)
	addr := a.String()
	dir := ctx.parentDir + "/" + addr
	b.fnDirs[addr] = dir
	numa := ctx.numa
	if d.NUMA != nil {
		numa = *d.NUMA
	}
	local := l.nodeCPUSet(numa)
	vendor, device, class, driver, link := b.kindDefaults(d)
	v, _ := parseHex(vendor)
	dv, _ := parseHex(device)
	cl, _ := parseHex(class)
	subv, subd := v, dv
	if d.SubsystemVendor != "" {
		subv, _ = parseHex(d.SubsystemVendor)
	}
	if d.SubsystemDevice != "" {
		subd, _ = parseHex(d.SubsystemDevice)
	}
	rev := uint32(0)
	if d.Revision != "" {
		rev, _ = parseHex(d.Revision)
	}
	hex4 := func(x uint32) string { return fmt.Sprintf("0x%04x", x) }
	t.attr(dir+"/vendor", hex4(v))
	t.attr(dir+"/device", hex4(dv))
	t.attr(dir+"/subsystem_vendor", hex4(subv))
	t.attr(dir+"/subsystem_device", hex4(subd))
	t.attr(dir+"/class", fmt.Sprintf("0x%06x", cl))
	t.attr(dir+"/revision", fmt.Sprintf("0x%02x", rev))
	t.attr(dir+"/numa_node", itoa(numa))
	t.attr(dir+"/local_cpulist", local.String())
	t.attr(dir+"/local_cpus", local.Mask(l.ncpu))
	t.attr(dir+"/enable", "1")
	b.irq++
	t.attr(dir+"/irq", itoa(b.irq+15))
	t.attr(dir+"/modalias", fmt.Sprintf("pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X", v, dv, subv, subd, cl>>16, (cl>>8)&0xff, cl&0xff))
	t.attr(dir+"/uevent", fmt.Sprintf("DRIVER=%s\nPCI_CLASS=%X\nPCI_ID=%04X:%04X\nPCI_SUBSYS_ID=%04X:%04X\nPCI_SLOT_NAME=%s\nMODALIAS=pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X",
		driver, cl, v, dv, subv, subd, addr, v, dv, subv, subd, cl>>16, (cl>>8)&0xff, cl&0xff))
	if link != nil {
		t.attr(dir+"/current_link_speed", link.Speed)
		t.attr(dir+"/current_link_width", itoa(link.Width))
		t.attr(dir+"/max_link_speed", link.MaxSpeed)
		t.attr(dir+"/max_link_width", itoa(link.MaxWidth))
	}
	isBridge := d.Kind == KindBridge
	var sec, sub int
	portType := pcieEndpoint
	if isBridge {
		portType = ctx.portType
		if lo, hi, ok := busSpan(d); ok {
			sec, sub = lo, hi
		} else {
			// An empty port still needs a bus range of its own for
			// hwloc to see a bridge: take the next free bus number.
			for n := a.Bus + 1; n < 256; n++ {
				if !ctx.used[n] {
					ctx.used[n] = true
					sec, sub = n, n
					break
				}
			}
			if sec == 0 {
				return fmt.Errorf("%w: bridge %s: no free bus number for an empty port", ErrSpec, addr)
			}
		}
	}
	multi := ctx.multi[[3]int{a.Domain, a.Bus, a.Dev}] > 1
	cfg := configSpace(cfgFields{
		vendor: v, device: dv, class: cl, rev: rev, subv: subv, subd: subd,
		bridge: isBridge, multi: multi && a.Fn == 0,
		pri: a.Bus, sec: sec, sub: sub, portType: portType, link: link, acs: d.ACS,
	})
	t.raw(dir+"/config", cfg)
	if d.VPD != nil {
		t.raw(dir+"/vpd", pci.VPD{Name: d.VPD.Name, Serial: d.VPD.Serial, V3: d.VPD.V3}.Bytes())
	}
	if driver != "" {
		drv := "sys/bus/pci/drivers/" + driver
		t.link(dir+"/driver", drv)
		t.link(drv+"/"+addr, dir)
	}
	t.link(dir+"/subsystem", "sys/bus/pci")
	t.link("sys/bus/pci/devices/"+addr, dir)
	if d.PhysFn != "" {
		pf, _ := parseBDF(d.PhysFn)
		if p, ok := paths[pf.String()]; ok {
			t.link(dir+"/physfn", p)
		} else {
			return fmt.Errorf("%w: device %s: physfn %s is not in the spec", ErrSpec, addr, pf)
		}
	}
	for i, nd := range d.Netdevs {
		nd = netdevDefaults(nd, a, i, macOUI(vendor))
		nd2 := dir + "/net/" + nd.Name
		b.netdevFiles(nd2, nd, dir)
		t.link("sys/class/net/"+nd.Name, nd2)
	}
	if d.RDMA != nil {
		b.rdma(d, dir, a)
	}
	if d.GPU != nil {
		g := gpuFn{addr: a, gpu: d.GPU, numa: numa, local: local, pciID: dv<<16 | v, subID: subd<<16 | subv}
		if link != nil {
			g.link, g.hasLnk = *link, true
		}
		b.gpus = append(b.gpus, g)
		if d.GPU.MemoryNUMANode != nil {
			// The Node and Status lines as nv_procfs_read_numa_status
			// prints them (open-gpu-kernel-modules nv-procfs.c, padding
			// included); the Address and Size lines an initialised GPU
			// adds are left out: no reader here or in hwloc uses them.
			t.raw("proc/driver/nvidia/gpus/"+addr+"/numa_status", fmt.Appendf(nil, "Node:      %d\nStatus:    online\n", *d.GPU.MemoryNUMANode))
		}
	}
	if len(d.Children) > 0 {
		next := pcieUpstream
		if portType == pcieUpstream {
			next = pcieDownstream
		}
		cctx := ctx
		cctx.parentDir = dir
		cctx.numa = numa
		cctx.portType = next
		for i := range d.Children {
			if err := b.function(&d.Children[i], cctx, paths); err != nil {
				return err
			}
		}
	}
	return nil
}

// vendorPensando is AMD Pensando's PCI vendor id (PCI_VENDOR_ID_PENSANDO,
// drivers/net/ethernet/pensando/ionic/ionic.h): Pollara 400 AI NICs.
const vendorPensando = "0x1dd8"

// macOUI is the first three bytes of a function's default Ethernet
// addresses: Pensando's OUI for its NICs, Mellanox's for every other
// vendor (as before vendors were told apart).
func macOUI(vendor string) string {
	if vendor == vendorPensando {
		return "00:ae:cd"
	}
	return "0c:42:a1"
}

// netdevDefaults fills a netdev's defaults; oui starts a derived Ethernet
// address.
func netdevDefaults(nd Netdev, a bdf, i int, oui string) Netdev {
	if nd.Type == 0 {
		nd.Type = 1
	}
	if nd.Operstate == "" {
		nd.Operstate = "up"
	}
	if nd.MTU == 0 {
		nd.MTU = 1500
		if nd.Type == 32 {
			nd.MTU = 4092
		}
	}
	if nd.Address == "" {
		if nd.Type == 32 {
			nd.Address = fmt.Sprintf("00:00:10:29:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:%02x:%02x:%02x", a.Bus, a.Dev, a.Fn<<4|i)
		} else {
			nd.Address = fmt.Sprintf("%s:%02x:%02x:%02x", oui, a.Bus, a.Dev<<3|a.Fn, i)
		}
	}
	return nd
}

// netdevFiles writes one netdev directory; fnDir is its PCI function ("" for
// virtual devices).
func (b *builder) netdevFiles(dir string, nd Netdev, fnDir string) {
	t := b.t
	b.ifindex++
	idx := b.ifindex
	if nd.Name == "lo" {
		idx = 1
		b.ifindex--
	}
	speed := -1
	if nd.Speed != nil {
		speed = *nd.Speed
	}
	carrier := 0
	if nd.Operstate == "up" || nd.Operstate == "unknown" {
		carrier = 1
	}
	if nd.Carrier != nil {
		carrier = *nd.Carrier
	}
	addrLen := strings.Count(nd.Address, ":") + 1
	t.attr(dir+"/address", nd.Address)
	t.attr(dir+"/addr_len", itoa(addrLen))
	t.attr(dir+"/operstate", nd.Operstate)
	t.attr(dir+"/mtu", itoa(nd.MTU))
	t.attr(dir+"/speed", itoa(speed))
	t.attr(dir+"/type", itoa(nd.Type))
	t.attr(dir+"/carrier", itoa(carrier))
	t.attr(dir+"/ifindex", itoa(idx))
	t.attr(dir+"/iflink", itoa(idx))
	t.attr(dir+"/uevent", fmt.Sprintf("INTERFACE=%s\nIFINDEX=%d", nd.Name, idx))
	t.link(dir+"/subsystem", "sys/class/net")
	if fnDir != "" {
		t.link(dir+"/device", fnDir)
	}
	if nd.Master != "" {
		// The kernel links a slave to its master and the master's
		// upper_<name> (net/core/dev.c netdev_upper_dev_link).
		t.link(dir+"/master", "sys/devices/virtual/net/"+nd.Master)
		t.link(dir+"/upper_"+nd.Master, "sys/devices/virtual/net/"+nd.Master)
	}
}

// ibCounters are the port counters procfs (and node_exporter) read.
var ibCounters = []string{
	"VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
	"local_link_integrity_errors", "multicast_rcv_packets", "multicast_xmit_packets",
	"port_rcv_constraint_errors", "port_rcv_data", "port_rcv_discards", "port_rcv_errors",
	"port_rcv_packets", "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
	"port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards", "port_xmit_packets",
	"port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets",
}

// mlx5HwCounters are the hw_counters files of an mlx5 port that procfs
// (InfiniBandHwCounters) and node_exporter's infiniband collector read:
// the queue counters, the RoCE congestion and retransmission counters and
// lifespan (ms), as drivers/infiniband/hw/mlx5/counters.c names them.
var mlx5HwCounters = []string{
	"duplicate_request", "implied_nak_seq_err", "lifespan", "local_ack_timeout_err",
	"np_cnp_sent", "np_ecn_marked_roce_packets", "out_of_buffer", "out_of_sequence",
	"packet_seq_err", "req_cqe_error", "req_cqe_flush_error", "req_remote_access_errors",
	"req_remote_invalid_request", "resp_cqe_error", "resp_cqe_flush_error",
	"resp_local_length_error", "resp_remote_access_errors", "rnr_nak_retry_err",
	"roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart", "roce_slow_restart_cnps",
	"roce_slow_restart_trans", "rp_cnp_handled", "rp_cnp_ignored", "rx_atomic_requests",
	"rx_dct_connect", "rx_icrc_encapsulated", "rx_read_requests", "rx_write_requests",
}

// hwCounters is a port's hw_counters: the mlx5 set (0, lifespan 10 ms, the
// kernel's default) for an mlx5 function, then the port's overrides.
func hwCounters(mlx5 bool, p Port) map[string]uint64 {
	out := map[string]uint64{}
	if mlx5 {
		for _, c := range mlx5HwCounters {
			out[c] = 0
		}
		out["lifespan"] = 10
	}
	for c, v := range p.HwCounters {
		out[c] = v
	}
	return out
}

// rdmaDriver is what an RDMA driver writes that the spec may leave out.
type rdmaDriver struct {
	fwVer, hcaType string
	// boardID is board_id's default; noBoardID: the driver has no such
	// file, so none is written unless the spec gives one.
	boardID   string
	noBoardID bool
	// eui48 derives node_guid (and sys_image_guid) from the first
	// netdev's address, as addrconf_ifid_eui48 does.
	eui48 bool
}

// rdmaDefaults is the RDMA defaults of a function's driver: ionic's from
// drivers/infiniband/hw/ionic/ionic_ibdev.c (hca_type prints the node
// description "AMD Pensando RoCE HCA", there is no board_id, the GUIDs are
// the netdev's EUI-64, the firmware string is the card's, so no default);
// every other driver keeps the mlx5 ConnectX-7 values fakesys always
// wrote.
func rdmaDefaults(driver string) rdmaDriver {
	if driver == "ionic" {
		return rdmaDriver{hcaType: "AMD Pensando RoCE HCA", noBoardID: true, eui48: true}
	}
	return rdmaDriver{fwVer: "28.39.1002", hcaType: "MT4129", boardID: "MT_0000000838"}
}

// eui64 is the modified EUI-64 of a 48-bit MAC, in GUID form
// ("02ae:cdff:fe09:0000" for 00:ae:cd:09:00:00); ok is false for
// another address length.
func eui64(mac string) (string, bool) {
	var m [6]byte
	if n, err := fmt.Sscanf(mac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]); err != nil || n != 6 || strings.Count(mac, ":") != 5 {
		return "", false
	}
	return fmt.Sprintf("%02x%02x:%02xff:fe%02x:%02x%02x", m[0]^2, m[1], m[2], m[3], m[4], m[5]), true
}

func (b *builder) rdma(d *Device, fnDir string, a bdf) {
	t := b.t
	r := d.RDMA
	vendor, _, _, driver, _ := b.kindDefaults(d)
	def := rdmaDefaults(driver)
	dir := fnDir + "/infiniband/" + r.Name
	guid := fmt.Sprintf("0c42:a103:00%02x:%02x%02x", a.Bus, a.Dev, a.Fn)
	if def.eui48 && len(d.Netdevs) > 0 {
		if g, ok := eui64(netdevDefaults(d.Netdevs[0], a, 0, macOUI(vendor)).Address); ok {
			guid = g
		}
	}
	guid = cmpOr(r.NodeGUID, guid)
	t.attr(dir+"/fw_ver", cmpOr(r.FwVer, def.fwVer))
	t.attr(dir+"/node_guid", guid)
	t.attr(dir+"/sys_image_guid", cmpOr(r.SysImageGUID, guid))
	t.attr(dir+"/node_type", cmpOr(r.NodeType, "1: CA"))
	t.attr(dir+"/hca_type", cmpOr(r.HCAType, def.hcaType))
	if r.BoardID != "" || !def.noBoardID {
		t.attr(dir+"/board_id", cmpOr(r.BoardID, def.boardID))
	}
	t.link(dir+"/device", fnDir)
	t.link(dir+"/subsystem", "sys/class/infiniband")
	t.link("sys/class/infiniband/"+r.Name, dir)
	for _, p := range r.Ports {
		pd := dir + "/ports/" + itoa(p.Port)
		ll := cmpOr(p.LinkLayer, "InfiniBand")
		t.attr(pd+"/state", cmpOr(p.State, "4: ACTIVE"))
		t.attr(pd+"/phys_state", cmpOr(p.PhysState, "5: LinkUp"))
		t.attr(pd+"/rate", cmpOr(p.Rate, "400 Gb/sec (4X NDR)"))
		t.attr(pd+"/link_layer", ll)
		lid, smlid := "0x0", "0x0"
		if ll == "InfiniBand" {
			lid, smlid = fmt.Sprintf("0x%x", a.Bus<<4|a.Fn<<2|p.Port), "0x1"
		}
		t.attr(pd+"/lid", cmpOr(p.LID, lid))
		t.attr(pd+"/sm_lid", cmpOr(p.SMLID, smlid))
		t.attr(pd+"/lid_mask_count", "0")
		t.attr(pd+"/sm_sl", "0")
		t.attr(pd+"/cap_mask", "0x00010000")
		ndev := p.Netdev
		if ndev == "" && p.Port-1 < len(d.Netdevs) {
			ndev = d.Netdevs[p.Port-1].Name
		}
		ndev = b.s.gidNetdev(d, ndev)
		gids := p.GIDs
		if len(gids) == 0 {
			g0 := "fe80:0000:0000:0000:" + guid
			if ll == "Ethernet" {
				gids = []GID{{Index: 0, GID: g0, Type: "IB/RoCE v1", Ndev: ndev}, {Index: 1, GID: g0, Type: "RoCE v2", Ndev: ndev}}
			} else {
				gids = []GID{{Index: 0, GID: g0, Type: "IB/RoCE v1"}}
			}
		}
		n := 8
		byIdx := map[int]GID{}
		for _, g := range gids {
			byIdx[g.Index] = g
			n = max(n, g.Index+1)
		}
		for i := range n {
			g, ok := byIdx[i]
			if !ok {
				t.attr(pd+"/gids/"+itoa(i), "0000:0000:0000:0000:0000:0000:0000:0000")
				continue
			}
			t.attr(pd+"/gids/"+itoa(i), g.GID)
			t.attr(pd+"/gid_attrs/types/"+itoa(i), cmpOr(g.Type, "IB/RoCE v1"))
			nd := g.Ndev
			if nd == "" && ll == "Ethernet" {
				nd = ndev
			}
			if nd != "" {
				t.attr(pd+"/gid_attrs/ndevs/"+itoa(i), nd)
			}
		}
		for _, c := range ibCounters {
			t.attr(pd+"/counters/"+c, fmt.Sprint(p.Counters[c]))
		}
		hw := hwCounters(driver == "mlx5_core", p)
		for _, c := range slices.Sorted(maps.Keys(hw)) {
			t.attr(pd+"/hw_counters/"+c, fmt.Sprint(hw[c]))
		}
	}
}

type cfgFields struct {
	vendor, device, class, rev, subv, subd uint32
	bridge, multi                          bool
	pri, sec, sub                          int
	portType                               int
	link                                   *Link
	acs                                    *ACS // a bridge's; nil: none
}

// configSpace is PCI configuration space: the type 0 or type 1 header and
// a PCIe capability at 0x40 with the link capability and status registers
// (PCIe base spec 7.5.3). An endpoint's is the first 256 bytes; a
// bridge's is the whole 4096, its extended capabilities from 0x100: the
// ACS capability (7.7.8) when it has one, else none (0 at 0x100).
func configSpace(f cfgFields) []byte {
	size := 256
	if f.bridge {
		size = 4096
	}
	c := make([]byte, size)
	le := binary.LittleEndian
	le.PutUint16(c[0x00:], uint16(f.vendor))
	le.PutUint16(c[0x02:], uint16(f.device))
	le.PutUint16(c[0x04:], 0x0406) // memory space, bus master, INTx disable
	le.PutUint16(c[0x06:], 0x0010) // capabilities list
	c[0x08] = byte(f.rev)
	c[0x09] = byte(f.class)
	c[0x0a] = byte(f.class >> 8)
	c[0x0b] = byte(f.class >> 16)
	c[0x0c] = 0x10 // cache line size
	var hdr byte
	if f.bridge {
		hdr = 1
		c[0x18] = byte(f.pri)
		c[0x19] = byte(f.sec)
		c[0x1a] = byte(f.sub)
	} else {
		le.PutUint16(c[0x2c:], uint16(f.subv))
		le.PutUint16(c[0x2e:], uint16(f.subd))
	}
	if f.multi {
		hdr |= 0x80
	}
	c[0x0e] = hdr
	c[0x34] = 0x40
	// PCI Express capability.
	c[0x40] = 0x10 // capability id
	c[0x41] = 0x00 // next
	caps := uint16(2) | uint16(f.portType)<<4
	if f.portType == pcieRootPort || f.portType == pcieDownstream {
		caps |= 1 << 8 // slot implemented
	}
	le.PutUint16(c[0x42:], caps)
	if f.link != nil {
		mg, cg := pci.Gen(f.link.MaxSpeed), pci.Gen(f.link.Speed)
		le.PutUint32(c[0x4c:], uint32(mg)|uint32(f.link.MaxWidth)<<4) // link capabilities
		le.PutUint16(c[0x52:], uint16(cg)|uint16(f.link.Width)<<4)    // link status
		le.PutUint32(c[0x6c:], uint32(1<<mg-1)<<1)                    // link capabilities 2: supported speeds
	}
	if f.bridge && f.acs != nil {
		capability, control := f.acs.registers()
		le.PutUint32(c[0x100:], 0x000d|1<<16|0<<20) // ACS, version 1, last in the list
		le.PutUint16(c[0x104:], capability)
		le.PutUint16(c[0x106:], control)
	}
	return c
}
