package fakesys

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// NVMe is the controller of an nvme function: <fn>/nvme/<name>, and its
// namespaces (FORMAT.md, "Storage").
type NVMe struct {
	Name       string      `yaml:"name"`     // required: nvmeN, unique in the spec
	Model      string      `yaml:"model"`    // default "SAMSUNG MZWLJ3T8HBLS-00007"
	Serial     string      `yaml:"serial"`   // default derived from the bus id
	Firmware   string      `yaml:"firmware"` // firmware_rev; default "EPK9GB5Q"
	Subsystem  *int        `yaml:"subsystem"`
	Namespaces []Namespace `yaml:"namespaces"` // default [{id: 1, size_gib: 3576}]
}

// Namespace is one NVMe namespace.
type Namespace struct {
	ID      int     `yaml:"id"`       // nsid, from 1
	SizeGiB float64 `yaml:"size_gib"` // capacity
}

// ACS is a bridge's ACS capability and control registers (PCIe base spec
// 7.7.8), as 0x-prefixed 16-bit hex.
type ACS struct {
	Capability string `yaml:"capability"`
	Control    string `yaml:"control"`
}

// IOMMU is the machine's DMA remapping units and the default domain type
// of its groups.
type IOMMU struct {
	Units []string `yaml:"units"` // dmar0, dmar1 (Intel), ivhd0 (AMD)
	Type  string   `yaml:"type"`  // identity, DMA, DMA-FQ (default), blocked
}

// Mount is one line of /proc/mounts.
type Mount struct {
	Source  string `yaml:"source"`
	Target  string `yaml:"target"`
	FSType  string `yaml:"fstype"`
	Options string `yaml:"options"` // default "rw"
}

// RAID is one md array of NVMe namespaces.
type RAID struct {
	Name    string   `yaml:"name"`    // mdN
	Level   string   `yaml:"level"`   // raid0, raid1, raid5, raid6, raid10, linear
	Members []string `yaml:"members"` // block devices of namespaces: nvme2n1 (or multipath heads)
}

// NVMe defaults: a Samsung PM1733 3.84 TB.
const (
	nvmeModel    = "SAMSUNG MZWLJ3T8HBLS-00007"
	nvmeFirmware = "EPK9GB5Q"
	nvmeSizeGiB  = 3576
	nvmeCharMaj  = 240 // the nvme char devices' (dynamic) major
	blkExtMajor  = 259 // BLOCK_EXT_MAJOR: NVMe namespaces
	mdMajor      = 9   // MD_MAJOR
)

var iommuTypes = []string{"identity", "DMA", "DMA-FQ", "blocked"}

var raidLevels = []string{"raid0", "raid1", "raid5", "raid6", "raid10", "linear"}

// instanceOf is N of a name prefixN ("nvme3", "md0"); ok is false for
// another form.
func instanceOf(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" || len(rest) > 4 || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// validateDeviceExtras checks a function's nvme, acs and netdev ipv4
// fields.
func validateDeviceExtras(a bdf, d *Device, seen map[string]bool) error {
	if d.NVMe != nil {
		if d.Kind != KindNVMe {
			return specErr("device %s: nvme block on kind %s", a, d.Kind)
		}
		c := d.NVMe
		if _, ok := instanceOf(c.Name, "nvme"); !ok {
			return specErr("device %s: nvme name %q: want nvmeN", a, c.Name)
		}
		if seen["nvme:"+c.Name] {
			return specErr("device %s: nvme controller %s listed twice", a, c.Name)
		}
		seen["nvme:"+c.Name] = true
		if c.Subsystem != nil && (*c.Subsystem < 0 || *c.Subsystem > 9999) {
			return specErr("device %s: nvme %s: subsystem %d: want 0..9999", a, c.Name, *c.Subsystem)
		}
		// The identify controller fields' sizes (NVMe base spec 5.15.2.1).
		for _, f := range []struct {
			name, v string
			max     int
		}{{"model", c.Model, 40}, {"serial", c.Serial, 20}, {"firmware", c.Firmware, 8}} {
			if len(f.v) > f.max || strings.ContainsAny(f.v, "\n\x00") {
				return specErr("device %s: nvme %s: %s %q: at most %d characters, one line", a, c.Name, f.name, f.v, f.max)
			}
		}
		ids := map[int]bool{}
		for _, ns := range c.Namespaces {
			if ns.ID < 1 || ns.ID > 9999 || ids[ns.ID] {
				return specErr("device %s: nvme %s: namespace id %d: bad or listed twice", a, c.Name, ns.ID)
			}
			ids[ns.ID] = true
			if ns.SizeGiB <= 0 || ns.SizeGiB > 1<<24 {
				return specErr("device %s: nvme %s: namespace %d: size_gib %v must be positive", a, c.Name, ns.ID, ns.SizeGiB)
			}
		}
	}
	if d.ACS != nil {
		if d.Kind != KindBridge {
			return specErr("device %s: acs on kind %s; only bridges have ACS here", a, d.Kind)
		}
		if err := d.ACS.validate(); err != nil {
			return specErr("device %s: %v", a, err)
		}
	}
	for _, nd := range d.Netdevs {
		for _, p := range nd.IPv4 {
			if err := checkIPv4(p); err != nil {
				return specErr("device %s: netdev %s: %v", a, nd.Name, err)
			}
		}
	}
	return nil
}

func (c *ACS) validate() error {
	for _, f := range []struct{ name, v string }{{"capability", c.Capability}, {"control", c.Control}} {
		if f.v == "" {
			return fmt.Errorf("acs.%s is missing", f.name)
		}
		v, err := parseHex(f.v)
		if err != nil {
			return fmt.Errorf("acs.%s: %v", f.name, err)
		}
		if v > 0xffff {
			return fmt.Errorf("acs.%s %s: a 16-bit register", f.name, f.v)
		}
	}
	return nil
}

// registers is the ACS Capability and Control registers.
func (c *ACS) registers() (capability, control uint16) {
	a, _ := parseHex(c.Capability) // checked by validate
	b, _ := parseHex(c.Control)
	return uint16(a), uint16(b)
}

func checkIPv4(p string) error {
	pr, err := netip.ParsePrefix(p)
	if err != nil || !pr.Addr().Is4() || pr.String() != p {
		return fmt.Errorf("ipv4 %q: want an IPv4 address in CIDR form, 10.10.1.5/16", p)
	}
	return nil
}

// nvmeCtrl is an NVMe controller of the spec, with its defaults filled.
type nvmeCtrl struct {
	addr      bdf
	numa      int
	n, subsys int
	c         NVMe
}

// nvmeCtrls lists the spec's NVMe controllers in tree order, defaults
// filled. It does no I/O.
func (s *Spec) nvmeCtrls() []nvmeCtrl {
	var out []nvmeCtrl
	for _, fn := range s.Functions() {
		c := fn.Device.NVMe
		if c == nil {
			continue
		}
		a, _ := parseBDF(fn.BDF)
		n, _ := instanceOf(c.Name, "nvme")
		ctrl := nvmeCtrl{addr: a, numa: fn.NUMA, n: n, subsys: n, c: *c}
		if c.Subsystem != nil {
			ctrl.subsys = *c.Subsystem
		}
		ctrl.c.Model = cmpOr(c.Model, nvmeModel)
		ctrl.c.Serial = cmpOr(c.Serial, fmt.Sprintf("S4YPNA0T%02X%02X%02X", a.Bus, a.Dev, a.Fn))
		ctrl.c.Firmware = cmpOr(c.Firmware, nvmeFirmware)
		if len(c.Namespaces) == 0 {
			ctrl.c.Namespaces = []Namespace{{ID: 1, SizeGiB: nvmeSizeGiB}}
		}
		out = append(out, ctrl)
	}
	return out
}

// multipath reports whether NVMe namespaces are laid out as nvme_core
// multipath=Y lays them out.
func (s *Spec) multipath() bool { return s.Kernel.NVMeMultipath != nil && *s.Kernel.NVMeMultipath }

// nsDisk is a visible NVMe block device: a namespace of a controller, or
// with multipath the head of a subsystem's namespace.
type nsDisk struct {
	name    string
	sectors uint64
	nsid    int
	subsys  int
	ctrls   []int // indexes in nvmeCtrls: the controllers (paths) it sits on
}

// sectors is a namespace's size in 512-byte sectors, whole 4 KiB blocks.
func (ns Namespace) sectors() uint64 {
	return uint64(ns.SizeGiB*(1<<30)) / 4096 * 8
}

// nsDisks lists the visible namespace block devices in controller order.
// With multipath, controllers sharing a subsystem share its heads; a
// namespace id of one subsystem with two sizes is an error.
func (s *Spec) nsDisks(ctrls []nvmeCtrl) ([]nsDisk, error) {
	var out []nsDisk
	heads := map[string]int{}
	for i, c := range ctrls {
		for _, ns := range c.c.Namespaces {
			if !s.multipath() {
				out = append(out, nsDisk{name: fmt.Sprintf("nvme%dn%d", c.n, ns.ID), sectors: ns.sectors(), nsid: ns.ID, subsys: c.subsys, ctrls: []int{i}})
				continue
			}
			name := fmt.Sprintf("nvme%dn%d", c.subsys, ns.ID)
			if h, ok := heads[name]; ok {
				if out[h].sectors != ns.sectors() {
					return nil, specErr("nvme %s: namespace %d of subsystem %d has another size on %s", c.c.Name, ns.ID, c.subsys, ctrls[out[h].ctrls[0]].c.Name)
				}
				out[h].ctrls = append(out[h].ctrls, i)
				continue
			}
			heads[name] = len(out)
			out = append(out, nsDisk{name: name, sectors: ns.sectors(), nsid: ns.ID, subsys: c.subsys, ctrls: []int{i}})
		}
	}
	return out, nil
}

// validateStorage checks the spec-level storage, IOMMU and mount fields.
func (s *Spec) validateStorage() error {
	ctrls := s.nvmeCtrls()
	disks, err := s.nsDisks(ctrls)
	if err != nil {
		return err
	}
	sizes := map[string]uint64{}
	for _, d := range disks {
		sizes[d.name] = d.sectors
	}
	used := map[string]string{}
	names := map[string]bool{}
	for i, r := range s.RAID {
		if _, ok := instanceOf(r.Name, "md"); !ok {
			return specErr("raid[%d]: name %q: want mdN", i, r.Name)
		}
		if names[r.Name] {
			return specErr("raid %s listed twice", r.Name)
		}
		names[r.Name] = true
		if !slices.Contains(raidLevels, r.Level) {
			return specErr("raid %s: level %q: want one of %s", r.Name, r.Level, strings.Join(raidLevels, ", "))
		}
		min := map[string]int{"raid0": 1, "raid1": 2, "raid5": 3, "raid6": 4, "raid10": 2, "linear": 1}[r.Level]
		if len(r.Members) < min {
			return specErr("raid %s: %s needs at least %d members, has %d", r.Name, r.Level, min, len(r.Members))
		}
		for _, m := range r.Members {
			if _, ok := sizes[m]; !ok {
				return specErr("raid %s: member %q is not an NVMe namespace of the spec (its block devices: %s)", r.Name, m, strings.Join(slices.Sorted(maps.Keys(sizes)), " "))
			}
			if o, ok := used[m]; ok {
				return specErr("raid %s: member %s is already a member of %s", r.Name, m, o)
			}
			used[m] = r.Name
		}
	}
	for i, m := range s.Mounts {
		if m.Source == "" || m.Target == "" || m.FSType == "" {
			return specErr("mounts[%d]: source, target and fstype are required", i)
		}
	}
	if io := s.IOMMU; io != nil {
		if len(io.Units) == 0 {
			return specErr("iommu: units is empty; omit iommu for a machine without an IOMMU")
		}
		seen := map[string]bool{}
		for _, u := range io.Units {
			if u == "" || strings.ContainsAny(u, "/ \n") || seen[u] {
				return specErr("iommu: unit %q: bad or listed twice", u)
			}
			seen[u] = true
		}
		if io.Type != "" && !slices.Contains(iommuTypes, io.Type) {
			return specErr("iommu: type %q: want one of %s", io.Type, strings.Join(iommuTypes, ", "))
		}
	}
	return nil
}

// storage writes the NVMe controllers, namespaces and subsystems, the md
// arrays and nvme_core's multipath parameter (drivers/nvme/host/core.c,
// multipath.c, pci.c; drivers/md/md.c; block/genhd.c), from the function
// directories fnDirs (by bus id) the PCI pass wrote.
func (b *builder) storage(fnDirs map[string]string) error {
	s, t := b.s, b.t
	if mp := s.Kernel.NVMeMultipath; mp != nil {
		t.attr("sys/module/nvme_core/parameters/multipath", map[bool]string{true: "Y", false: "N"}[*mp])
	}
	ctrls := s.nvmeCtrls()
	disks, err := s.nsDisks(ctrls)
	if err != nil {
		return err
	}
	if len(ctrls) == 0 {
		return nil
	}
	ctrlDir := make([]string, len(ctrls))
	subsysDone := map[int]bool{}
	for i, c := range ctrls {
		d := fnDirs[c.addr.String()] + "/nvme/" + c.c.Name
		ctrlDir[i] = d
		nqn := fmt.Sprintf("nqn.2014.08.org.nvmexpress:144d144d%-20s%-40s", c.c.Serial, c.c.Model)
		t.attr(d+"/model", c.c.Model)
		t.attr(d+"/serial", c.c.Serial)
		t.attr(d+"/firmware_rev", c.c.Firmware)
		t.attr(d+"/transport", "pcie")
		t.attr(d+"/address", c.addr.String())
		t.attr(d+"/state", "live")
		t.attr(d+"/numa_node", itoa(c.numa))
		t.attr(d+"/cntlid", itoa(c.n+1))
		t.attr(d+"/subsysnqn", nqn)
		t.attr(d+"/dev", fmt.Sprintf("%d:%d", nvmeCharMaj, c.n))
		t.link(d+"/device", fnDirs[c.addr.String()])
		t.link(d+"/subsystem", "sys/class/nvme")
		t.link("sys/class/nvme/"+c.c.Name, d)
		// The subsystem is registered with or without multipath, and links
		// each of its controllers (nvme_init_subsystem).
		sd := fmt.Sprintf("sys/devices/virtual/nvme-subsystem/nvme-subsys%d", c.subsys)
		if !subsysDone[c.subsys] {
			subsysDone[c.subsys] = true
			t.attr(sd+"/model", c.c.Model)
			t.attr(sd+"/serial", c.c.Serial)
			t.attr(sd+"/firmware_rev", c.c.Firmware)
			t.attr(sd+"/subsysnqn", nqn)
			t.link(sd+"/subsystem", "sys/class/nvme-subsystem")
			t.link(fmt.Sprintf("sys/class/nvme-subsystem/nvme-subsys%d", c.subsys), sd)
		}
		t.link(sd+"/"+c.c.Name, d)
	}
	blockDir := map[string]string{}
	hidden := len(disks)
	for k, dk := range disks {
		var dir string
		if s.multipath() {
			sd := fmt.Sprintf("sys/devices/virtual/nvme-subsystem/nvme-subsys%d", dk.subsys)
			dir = sd + "/" + dk.name
			t.link(dir+"/device", sd)
			// One hidden path disk per controller (nvme_mpath_set_disk_name).
			for _, ci := range dk.ctrls {
				c := ctrls[ci]
				p := fmt.Sprintf("%s/nvme%dc%dn%d", ctrlDir[ci], c.subsys, c.n, dk.nsid)
				t.attr(p+"/size", strconv.FormatUint(dk.sectors, 10))
				t.attr(p+"/nsid", itoa(dk.nsid))
				t.attr(p+"/dev", fmt.Sprintf("%d:%d", blkExtMajor, hidden))
				t.attr(p+"/queue/logical_block_size", "4096")
				t.link(p+"/device", ctrlDir[ci])
				hidden++
			}
		} else {
			dir = ctrlDir[dk.ctrls[0]] + "/" + dk.name
			t.link(dir+"/device", ctrlDir[dk.ctrls[0]])
		}
		blockDir[dk.name] = dir
		t.attr(dir+"/size", strconv.FormatUint(dk.sectors, 10))
		t.attr(dir+"/dev", fmt.Sprintf("%d:%d", blkExtMajor, k))
		t.attr(dir+"/nsid", itoa(dk.nsid))
		t.attr(dir+"/queue/logical_block_size", "4096")
		t.dir(dir + "/holders")
		t.dir(dir + "/slaves")
		t.link(dir+"/subsystem", "sys/class/block")
		t.link("sys/block/"+dk.name, dir)
		t.link("sys/class/block/"+dk.name, dir)
	}
	sizes := map[string]uint64{}
	for _, d := range disks {
		sizes[d.name] = d.sectors
	}
	for _, r := range s.RAID {
		dir := "sys/devices/virtual/block/" + r.Name
		unit, _ := instanceOf(r.Name, "md")
		t.attr(dir+"/dev", fmt.Sprintf("%d:%d", mdMajor, unit))
		t.attr(dir+"/size", strconv.FormatUint(raidSectors(r, sizes), 10))
		t.attr(dir+"/md/level", r.Level)
		t.attr(dir+"/md/raid_disks", itoa(len(r.Members)))
		t.attr(dir+"/md/array_state", "clean")
		t.attr(dir+"/md/metadata_version", "1.2")
		if r.Level != "raid1" && r.Level != "linear" {
			t.attr(dir+"/md/chunk_size", "524288")
		}
		t.attr(dir+"/queue/logical_block_size", "4096")
		t.dir(dir + "/holders")
		for i, m := range r.Members {
			t.link(dir+"/slaves/"+m, blockDir[m])
			t.link(blockDir[m]+"/holders/"+r.Name, dir)
			dev := dir + "/md/dev-" + m
			t.link(dev+"/block", blockDir[m])
			t.attr(dev+"/state", "in_sync")
			t.attr(dev+"/slot", itoa(i))
			t.link(fmt.Sprintf("%s/md/rd%d", dir, i), dev)
		}
		t.link(dir+"/subsystem", "sys/class/block")
		t.link("sys/block/"+r.Name, dir)
		t.link("sys/class/block/"+r.Name, dir)
	}
	return nil
}

// raidSectors is an array's size from its members' (md's superblock
// reservation left out).
func raidSectors(r RAID, sizes map[string]uint64) uint64 {
	var sum, least uint64
	for i, m := range r.Members {
		sum += sizes[m]
		if i == 0 || sizes[m] < least {
			least = sizes[m]
		}
	}
	n := uint64(len(r.Members))
	switch r.Level {
	case "raid1":
		return least
	case "raid5":
		return least * (n - 1)
	case "raid6":
		return least * (n - 2)
	case "raid10":
		return least * n / 2
	case "raid0":
		return least * n
	}
	return sum // linear
}

// iommu writes the IOMMU units and one group per PCI function, in bus
// order (drivers/iommu/iommu.c: sys/kernel/iommu_groups/<k>/{type,devices},
// each device's iommu_group link).
func (b *builder) iommu(fnDirs map[string]string) {
	io := b.s.IOMMU
	if io == nil {
		return
	}
	t := b.t
	for _, u := range io.Units {
		d := "sys/devices/virtual/iommu/" + u
		t.dir(d + "/devices")
		t.link("sys/class/iommu/"+u, d)
	}
	var addrs []bdf
	for _, fn := range b.s.Functions() {
		a, _ := parseBDF(fn.BDF)
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, func(x, y bdf) int {
		return cmpInts(x.Domain, y.Domain, x.Bus, y.Bus, x.Dev, y.Dev, x.Fn, y.Fn)
	})
	typ := cmpOr(io.Type, "DMA-FQ")
	for k, a := range addrs {
		g := "sys/kernel/iommu_groups/" + itoa(k)
		dir := fnDirs[a.String()]
		t.attr(g+"/type", typ)
		t.link(g+"/devices/"+a.String(), dir)
		t.link(dir+"/iommu_group", g)
	}
}

// cmpInts compares pairs (x0, y0), (x1, y1), ... in order.
func cmpInts(v ...int) int {
	for i := 0; i+1 < len(v); i += 2 {
		if v[i] != v[i+1] {
			return v[i] - v[i+1]
		}
	}
	return 0
}

// mangle escapes a /proc/mounts field as the kernel's seq_escape does
// for " \t\n\\" (fs/proc_namespace.c).
func mangle(s string) string {
	var w strings.Builder
	for i := range len(s) {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&w, "\\%03o", c)
		default:
			w.WriteByte(c)
		}
	}
	return w.String()
}

// procMounts is /proc/mounts: the spec's mounts, or the default three.
func (b *builder) procMounts() {
	if b.s.Mounts == nil {
		b.t.raw("proc/mounts", []byte("/dev/root / ext4 rw,relatime 0 0\nsysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\nproc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"))
		return
	}
	var w strings.Builder
	for _, m := range b.s.Mounts {
		fmt.Fprintf(&w, "%s %s %s %s 0 0\n", mangle(m.Source), mangle(m.Target), mangle(m.FSType), mangle(cmpOr(m.Options, "rw")))
	}
	b.t.raw("proc/mounts", []byte(w.String()))
}

// AddressesFile is the name of the interface addresses file beside
// nvml.json.
const AddressesFile = "addresses.json"

// addresses is addresses.json: every netdev's IPv4 addresses, by name,
// standing for what netlink answers on a live host; nil when no netdev
// has one.
func (b *builder) addresses() ([]byte, error) {
	ifs := map[string][]string{}
	for _, fn := range b.s.Functions() {
		for _, nd := range fn.Device.Netdevs {
			if len(nd.IPv4) > 0 {
				ifs[nd.Name] = slices.Clone(nd.IPv4)
			}
		}
	}
	for _, bond := range b.s.Bonds {
		if len(bond.IPv4) > 0 {
			ifs[bond.Name] = slices.Clone(bond.IPv4)
		}
	}
	if len(ifs) == 0 {
		return nil, nil
	}
	data, err := json.MarshalIndent(struct {
		Schema     string              `json:"schema"`
		Interfaces map[string][]string `json:"interfaces"`
	}{"gpuaffinity.addresses/v1", ifs}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", AddressesFile, err)
	}
	return append(data, '\n'), nil
}
