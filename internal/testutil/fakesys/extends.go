package fakesys

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Faults are the changes an extending spec makes to its base machine
// (FORMAT.md, "Extending a machine"): GPUs addressed by NVML index, RDMA
// ports by device name and port number.
type Faults struct {
	GPUs      []GPUFault    `yaml:"gpus"`
	RDMAPorts []PortFault   `yaml:"rdma_ports"`
	Netdevs   []NetdevFault `yaml:"netdevs"`
	// Absent lists PCI functions of the base that are not there: a card
	// not fitted or fallen off the bus. Each must be a device without
	// children.
	Absent []string `yaml:"absent"`
	// Bridges replace bridges' ACS capability, by bus id.
	Bridges []BridgeFault `yaml:"bridges"`
	// Mounts and RAID, when given (even empty), replace the base's.
	Mounts []Mount `yaml:"mounts"`
	RAID   []RAID  `yaml:"raid"`
	// Kernel's set fields replace the base's.
	Kernel *KernelFault `yaml:"kernel"`
	// IOMMU, when given, replaces the base's.
	IOMMU *IOMMU `yaml:"iommu"`
	// IMEX changes the base's IMEX state (channel nodes gone after a
	// reboot, a stale major).
	IMEX *IMEXFault `yaml:"imex"`
	// AMDGPUs change AMD GPUs of the base, by amdgpu index.
	AMDGPUs []AMDGPUFault `yaml:"amdgpus"`
	// NVMLInit, when given, replaces the base's nvml.init: nvmlInit's
	// failure ("ERROR_LIBRARY_NOT_FOUND": a node without NVML; "" makes
	// it succeed). The base must have nvml.
	NVMLInit *string `yaml:"nvml_init"`
}

// AMDGPUFault changes one AMD GPU of the base (its amdgpu block and its
// function's link). RAS is merged per block; the other set fields
// replace the base's.
type AMDGPUFault struct {
	Index *int `yaml:"index"` // required: the GPU's amdgpu index
	// RAS replaces the named blocks' counts (AMDGPU.RAS).
	RAS             map[string]AMDRASCount `yaml:"ras"`
	PCIeReplayCount *uint64                `yaml:"pcie_replay_count"`
	XGMIError       *uint64                `yaml:"xgmi_error"`
	// XGMILinksDown are hive members, by amdgpu index, whose direct XGMI
	// link to this GPU is gone: each leaves this GPU's xgmi_peers and
	// this GPU leaves theirs ("all" is first spelled out). The XGMI TA
	// then routes the pair through other GPUs (more hops, KFD weight 15
	// per hop, no bandwidth, 0 in xgmi_num_links).
	XGMILinksDown []int `yaml:"xgmi_links_down"`
	// Link's set fields replace the function's PCIe link; an unset max
	// keeps the base's (a GPU trained to x8 of its x16: {width: 8}).
	Link *Link `yaml:"link"`
	// ComputePartition and MemoryPartition, when set, replace the GPU's
	// partition modes (AMDGPU.ComputePartition, MemoryPartition): the
	// same board run in CPX/NPS4.
	ComputePartition *string `yaml:"compute_partition"`
	MemoryPartition  *string `yaml:"memory_partition"`
}

// IMEXFault changes the base's IMEX state: each set field replaces the
// base's (channels and peers when given, even empty). A base without
// imex starts from none.
type IMEXFault struct {
	Major     *int     `yaml:"major"`
	NodeMajor *int     `yaml:"node_major"`
	Channels  []int    `yaml:"channels"`
	Peers     []string `yaml:"peers"`
}

// GPUFabricFault changes a GPU's fabric info (GPU.Fabric): each set field
// replaces the base's; a GPU without fabric info starts from all zeroes.
// ClusterUUID "" is all zeroes, as a failed registration reports it.
type GPUFabricFault struct {
	ClusterUUID   *string `yaml:"cluster_uuid"`
	CliqueID      *uint32 `yaml:"clique_id"`
	HealthMask    *uint32 `yaml:"health_mask"`
	HealthSummary *int    `yaml:"health_summary"`
}

// BridgeFault replaces one bridge's ACS capability.
type BridgeFault struct {
	BDF string `yaml:"bdf"` // required: a bridge of the base
	ACS *ACS   `yaml:"acs"` // required
}

// KernelFault changes the base's kernel: each set field replaces the
// base's (modules, when given, even empty).
type KernelFault struct {
	Cmdline       *string  `yaml:"cmdline"`
	NVMeMultipath *bool    `yaml:"nvme_multipath"`
	NVIDIAOpen    *bool    `yaml:"nvidia_open"`
	Modules       []string `yaml:"modules"`
	// AMDPeerMemory replaces Kernel.AMDPeerMemory ("" removes amdkfd's
	// peer-memory client).
	AMDPeerMemory *string `yaml:"amd_peer_memory"`
}

// NetdevFault changes one netdev of the base, by name: each set field
// replaces the base's. Rename also renames the netdev where the function's
// RDMA ports and GIDs name it.
type NetdevFault struct {
	Name      string `yaml:"name"` // required: the base's netdev
	Rename    string `yaml:"rename"`
	Type      int    `yaml:"type"`
	Operstate string `yaml:"operstate"`
	Speed     *int   `yaml:"speed"`
	MTU       int    `yaml:"mtu"`
	// IPv4, when given (even empty), replaces the netdev's addresses.
	IPv4 []string `yaml:"ipv4"`
}

// GPUFault changes one GPU of the base. A set field replaces the base's
// (nvlinks_down, xids) or is merged into it (nvlink_errors per link,
// health and fabric per field).
type GPUFault struct {
	Index *int  `yaml:"index"` // required: the GPU's NVML index
	Lost  *bool `yaml:"lost"`
	// NUMA replaces the GPU function's numa_node (-1: unknown, so its
	// local_cpulist becomes every CPU, as the kernel answers).
	NUMA *int `yaml:"numa"`
	// CPUAffinity replaces NVML's CPU affinity answer (GPU.CPUAffinity).
	CPUAffinity  *string              `yaml:"cpu_affinity"`
	NVLinksDown  []int                `yaml:"nvlinks_down"`
	NVLinkErrors map[int]NVLinkErrors `yaml:"nvlink_errors"`
	XIDs         []uint64             `yaml:"xids"`
	Health       *GPUHealth           `yaml:"health"`
	Fabric       *GPUFabricFault      `yaml:"fabric"`
}

// PortFault changes one RDMA port of the base: state, phys_state and rate
// replace the base's when set, counters and hw_counters are merged into
// its overrides.
type PortFault struct {
	Device    string `yaml:"device"` // RDMA device name, "mlx5_4"
	Port      int    `yaml:"port"`   // port number, from 1
	State     string `yaml:"state"`
	PhysState string `yaml:"phys_state"`
	Rate      string `yaml:"rate"`
	LinkLayer string `yaml:"link_layer"`
	// GIDs, when given (even empty), replace the port's GID entries.
	GIDs       []GID             `yaml:"gids"`
	Counters   map[string]uint64 `yaml:"counters"`
	HwCounters map[string]uint64 `yaml:"hw_counters"`
}

// extendingSpec is a spec file with `extends`: only these keys.
type extendingSpec struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Sources     []string `yaml:"sources"`
	Extends     string   `yaml:"extends"`
	Faults      Faults   `yaml:"faults"`
	Expect      Expect   `yaml:"expect"`
}

// extendsOf is the top-level extends of a spec file; "" when it has none
// or is not a YAML mapping (the strict decoder then reports what is wrong).
func extendsOf(data []byte) string {
	var probe struct {
		Extends string `yaml:"extends"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&probe); err != nil {
		return ""
	}
	return probe.Extends
}

// parseExtending builds the spec of a file with `extends`: the embedded
// base machine (which may not extend another), its name, description and
// expectations replaced, its sources followed by the file's, and the
// faults applied. Unknown keys, a missing base and faults naming a GPU or
// port the base does not have are errors wrapping ErrSpec.
func parseExtending(name string, data []byte) (Spec, error) {
	var e extendingSpec
	if err := decodeStrict(data, &e); err != nil {
		return Spec{}, fmt.Errorf("parse %s: %w (beside extends a spec has only name, description, sources, faults and expect)", name, err)
	}
	baseData, basePath, err := machineData(e.Extends)
	if err != nil {
		return Spec{}, fmt.Errorf("%s: %w: extends %q: %w", name, ErrSpec, e.Extends, err)
	}
	if up := extendsOf(baseData); up != "" {
		return Spec{}, fmt.Errorf("%s: %w: extends %s, which extends %s; a spec extends a full machine only", name, ErrSpec, e.Extends, up)
	}
	s, err := Parse(basePath, baseData)
	if err != nil {
		return Spec{}, fmt.Errorf("%s: extends %s: %w", name, e.Extends, err)
	}
	s.Name, s.Description, s.Extends, s.Expect = e.Name, e.Description, e.Extends, e.Expect
	s.Sources = append(slices.Clone(s.Sources), e.Sources...)
	if err := s.applyFaults(e.Faults); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// machineData reads the embedded spec file of a machine.
func machineData(name string) ([]byte, string, error) {
	if name == "" || name == H200VM || bytes.ContainsAny([]byte(name), `/\`) {
		return nil, "", fmt.Errorf("machine %q: %w", name, ErrUnknownMachine)
	}
	p := path.Join("testdata/machines", name+".yaml")
	data, err := machineFS.ReadFile(p)
	if err != nil {
		return nil, "", fmt.Errorf("machine %q: %w", name, ErrUnknownMachine)
	}
	return data, p, nil
}

// applyFaults changes s as f says. Each GPU and port may be addressed once.
func (s *Spec) applyFaults(f Faults) error {
	gpus := map[int]*GPU{}
	gpuDevs := map[int]*Device{}
	ports := map[string]*Port{}
	for _, fn := range s.Functions() {
		if g := fn.Device.GPU; g != nil {
			gpus[g.Index], gpuDevs[g.Index] = g, fn.Device
		}
		if r := fn.Device.RDMA; r != nil {
			for i := range r.Ports {
				ports[fmt.Sprintf("%s port %d", r.Name, r.Ports[i].Port)] = &r.Ports[i]
			}
		}
	}
	seen := map[string]bool{}
	for i, gf := range f.GPUs {
		if gf.Index == nil {
			return specErr("faults.gpus[%d]: index is missing", i)
		}
		g := gpus[*gf.Index]
		if g == nil {
			return specErr("faults.gpus[%d]: %s has no GPU %d", i, s.Extends, *gf.Index)
		}
		key := fmt.Sprintf("gpu %d", *gf.Index)
		if seen[key] {
			return specErr("faults.gpus[%d]: GPU %d is addressed twice", i, *gf.Index)
		}
		seen[key] = true
		if gf.Lost != nil {
			g.Lost = *gf.Lost
		}
		if gf.NUMA != nil {
			v := *gf.NUMA
			gpuDevs[*gf.Index].NUMA = &v
		}
		if gf.CPUAffinity != nil {
			g.CPUAffinity = *gf.CPUAffinity
		}
		if gf.NVLinksDown != nil {
			g.NVLinksDown = slices.Clone(gf.NVLinksDown)
		}
		if gf.NVLinkErrors != nil {
			g.NVLinkErrors = merged(g.NVLinkErrors, gf.NVLinkErrors)
		}
		if gf.XIDs != nil {
			g.XIDs = slices.Clone(gf.XIDs)
		}
		if gf.Health != nil {
			h := GPUHealth{}
			if g.Health != nil {
				h = *g.Health
			}
			mergeSet(&h, gf.Health)
			g.Health = &h
		}
		if gf.Fabric != nil {
			g.Fabric = gf.Fabric.apply(g.Fabric)
		}
	}
	for i, pf := range f.RDMAPorts {
		key := fmt.Sprintf("%s port %d", pf.Device, pf.Port)
		p := ports[key]
		if p == nil {
			return specErr("faults.rdma_ports[%d]: %s has no RDMA %s", i, s.Extends, key)
		}
		if seen[key] {
			return specErr("faults.rdma_ports[%d]: %s is addressed twice", i, key)
		}
		seen[key] = true
		for _, f := range []struct {
			dst *string
			v   string
		}{{&p.State, pf.State}, {&p.PhysState, pf.PhysState}, {&p.Rate, pf.Rate}, {&p.LinkLayer, pf.LinkLayer}} {
			if f.v != "" {
				*f.dst = f.v
			}
		}
		if pf.GIDs != nil {
			p.GIDs = slices.Clone(pf.GIDs)
		}
		p.Counters = merged(p.Counters, pf.Counters)
		p.HwCounters = merged(p.HwCounters, pf.HwCounters)
	}
	if err := s.applyNetdevFaults(f.Netdevs, seen); err != nil {
		return err
	}
	if err := s.applyStorageFaults(f, seen); err != nil {
		return err
	}
	if err := s.applyAMDGPUFaults(f.AMDGPUs); err != nil {
		return err
	}
	if f.NVMLInit != nil {
		if s.NVML == nil {
			return specErr("faults.nvml_init: %s has no nvml to fail", s.Extends)
		}
		n := *s.NVML
		n.Init = *f.NVMLInit
		s.NVML = &n
	}
	return s.removeAbsent(f.Absent)
}

// applyAMDGPUFaults changes AMD GPUs by amdgpu index; each once.
func (s *Spec) applyAMDGPUFaults(fs []AMDGPUFault) error {
	devs := map[int]*Device{}
	for _, fn := range s.Functions() {
		if g := fn.Device.AMDGPU; g != nil {
			devs[g.Index] = fn.Device
		}
	}
	seen := map[int]bool{}
	for i, af := range fs {
		if af.Index == nil {
			return specErr("faults.amdgpus[%d]: index is missing", i)
		}
		idx := *af.Index
		d := devs[idx]
		if d == nil {
			return specErr("faults.amdgpus[%d]: %s has no amdgpu %d", i, s.Extends, idx)
		}
		if seen[idx] {
			return specErr("faults.amdgpus[%d]: amdgpu %d is addressed twice", i, idx)
		}
		seen[idx] = true
		g := d.AMDGPU
		if af.RAS != nil {
			g.RAS = merged(g.RAS, af.RAS)
		}
		if af.PCIeReplayCount != nil {
			g.PCIeReplayCount = *af.PCIeReplayCount
		}
		if af.XGMIError != nil {
			g.XGMIError = *af.XGMIError
		}
		if af.ComputePartition != nil {
			g.ComputePartition = *af.ComputePartition
		}
		if af.MemoryPartition != nil {
			g.MemoryPartition = *af.MemoryPartition
		}
		if af.Link != nil {
			var l Link
			if d.Link != nil {
				l = *d.Link
			}
			// The base's effective link: an AMD GPU (kind other) has no
			// default, so an unset speed or width is the base's own.
			l.MaxSpeed, l.MaxWidth = cmpOr(l.MaxSpeed, l.Speed), cmp.Or(l.MaxWidth, l.Width)
			if af.Link.Speed != "" {
				l.Speed = af.Link.Speed
			}
			if af.Link.Width != 0 {
				l.Width = af.Link.Width
			}
			if af.Link.MaxSpeed != "" {
				l.MaxSpeed = af.Link.MaxSpeed
			}
			if af.Link.MaxWidth != 0 {
				l.MaxWidth = af.Link.MaxWidth
			}
			d.Link = &l
		}
		for _, p := range af.XGMILinksDown {
			pd := devs[p]
			if pd == nil || p == idx || !sameHive(g, pd.AMDGPU) {
				return specErr("faults.amdgpus[%d]: xgmi_links_down: %d is not another GPU of amdgpu %d's hive", i, p, idx)
			}
			if !xgmiDrop(devs, g, p) || !xgmiDrop(devs, pd.AMDGPU, idx) {
				return specErr("faults.amdgpus[%d]: xgmi_links_down: amdgpu %d has no direct XGMI link to %d", i, idx, p)
			}
		}
	}
	return nil
}

// sameHive reports whether two AMD GPUs are in one XGMI hive (the ids
// compared as numbers: decimal or 0x hex).
func sameHive(a, b *AMDGPU) bool {
	x, err := parseU64(a.XGMIHive)
	y, err2 := parseU64(b.XGMIHive)
	return a.XGMIHive != "" && err == nil && err2 == nil && x == y
}

// xgmiDrop removes peer from g's xgmi_peers, first spelling "all" out
// as the other members of g's hive; false where peer was not a direct
// peer.
func xgmiDrop(devs map[int]*Device, g *AMDGPU, peer int) bool {
	if !g.XGMIPeers.Set || g.XGMIPeers.All {
		var all []int
		for idx, d := range devs {
			if idx != g.Index && sameHive(g, d.AMDGPU) {
				all = append(all, idx)
			}
		}
		slices.Sort(all)
		g.XGMIPeers = XGMIPeers{Indexes: all, Set: true}
	}
	i := slices.Index(g.XGMIPeers.Indexes, peer)
	if i < 0 {
		return false
	}
	g.XGMIPeers.Indexes = slices.Delete(slices.Clone(g.XGMIPeers.Indexes), i, i+1)
	return true
}

// applyStorageFaults applies the bridges, mounts, raid, kernel, iommu and
// imex faults.
func (s *Spec) applyStorageFaults(f Faults, seen map[string]bool) error {
	bridges := map[string]*Device{}
	for _, fn := range s.Functions() {
		if fn.Kind == KindBridge {
			bridges[fn.BDF] = fn.Device
		}
	}
	for i, bf := range f.Bridges {
		d := bridges[bf.BDF]
		if d == nil {
			return specErr("faults.bridges[%d]: %s has no bridge %q", i, s.Extends, bf.BDF)
		}
		if seen["bridge "+bf.BDF] {
			return specErr("faults.bridges[%d]: bridge %s is addressed twice", i, bf.BDF)
		}
		seen["bridge "+bf.BDF] = true
		if bf.ACS == nil {
			return specErr("faults.bridges[%d]: bridge %s: acs is missing", i, bf.BDF)
		}
		acs := *bf.ACS
		d.ACS = &acs
	}
	if f.Mounts != nil {
		s.Mounts = slices.Clone(f.Mounts)
	}
	if f.RAID != nil {
		s.RAID = slices.Clone(f.RAID)
	}
	if k := f.Kernel; k != nil {
		if k.Cmdline != nil {
			s.Kernel.Cmdline = *k.Cmdline
		}
		if k.NVMeMultipath != nil {
			v := *k.NVMeMultipath
			s.Kernel.NVMeMultipath = &v
		}
		if k.NVIDIAOpen != nil {
			s.Kernel.NVIDIAOpen = *k.NVIDIAOpen
		}
		if k.Modules != nil {
			s.Kernel.Modules = slices.Clone(k.Modules)
		}
		if k.AMDPeerMemory != nil {
			v := *k.AMDPeerMemory
			s.Kernel.AMDPeerMemory = &v
		}
	}
	if f.IOMMU != nil {
		io := *f.IOMMU
		io.Units = slices.Clone(io.Units)
		s.IOMMU = &io
	}
	if f.IMEX != nil {
		s.IMEX = f.IMEX.apply(s.IMEX)
	}
	return nil
}

// apply is base (nil: none) with the fault's set fields, in a new value.
func (f *IMEXFault) apply(base *IMEX) *IMEX {
	var out IMEX
	if base != nil {
		out = *base
		out.Channels, out.Peers = slices.Clone(base.Channels), slices.Clone(base.Peers)
	}
	if f.Major != nil {
		out.Major = *f.Major
	}
	if f.NodeMajor != nil {
		out.NodeMajor = *f.NodeMajor
	}
	if f.Channels != nil {
		out.Channels = slices.Clone(f.Channels)
	}
	if f.Peers != nil {
		out.Peers = slices.Clone(f.Peers)
	}
	return &out
}

// apply is base (nil: all zeroes) with the fault's set fields, in a new
// value.
func (f *GPUFabricFault) apply(base *GPUFabric) *GPUFabric {
	var out GPUFabric
	if base != nil {
		out = *base
	}
	if f.ClusterUUID != nil {
		out.ClusterUUID = *f.ClusterUUID
	}
	if f.CliqueID != nil {
		out.CliqueID = *f.CliqueID
	}
	if f.HealthMask != nil {
		out.HealthMask = *f.HealthMask
	}
	if f.HealthSummary != nil {
		out.HealthSummary = *f.HealthSummary
	}
	return &out
}

// removeAbsent drops the functions named by faults.absent.
func (s *Spec) removeAbsent(absent []string) error {
	for i, bus := range absent {
		found := false
		var drop func(devs []Device) ([]Device, error)
		drop = func(devs []Device) ([]Device, error) {
			out := devs[:0:0]
			for _, d := range devs {
				if d.BDF == bus {
					if len(d.Children) > 0 {
						return nil, specErr("faults.absent[%d]: %s has children; name a device, not a bridge", i, bus)
					}
					if d.GPU != nil {
						return nil, specErr("faults.absent[%d]: %s is a GPU; GPUs are lost, not absent (faults.gpus lost)", i, bus)
					}
					found = true
					continue
				}
				kids, err := drop(d.Children)
				if err != nil {
					return nil, err
				}
				d.Children = kids
				out = append(out, d)
			}
			return out, nil
		}
		for h := range s.PCI {
			devs, err := drop(s.PCI[h].Devices)
			if err != nil {
				return err
			}
			s.PCI[h].Devices = devs
		}
		if !found {
			return specErr("faults.absent[%d]: %s has no PCI function %s", i, s.Extends, bus)
		}
	}
	return nil
}

// applyNetdevFaults changes netdevs by name.
func (s *Spec) applyNetdevFaults(fs []NetdevFault, seen map[string]bool) error {
	for i, nf := range fs {
		var nd *Netdev
		var dev *Device
		for _, fn := range s.Functions() {
			for j := range fn.Device.Netdevs {
				if fn.Device.Netdevs[j].Name == nf.Name {
					nd, dev = &fn.Device.Netdevs[j], fn.Device
				}
			}
		}
		if nd == nil {
			return specErr("faults.netdevs[%d]: %s has no netdev %q", i, s.Extends, nf.Name)
		}
		if seen["net "+nf.Name] {
			return specErr("faults.netdevs[%d]: netdev %s is addressed twice", i, nf.Name)
		}
		seen["net "+nf.Name] = true
		if nf.Type != 0 {
			nd.Type = nf.Type
		}
		if nf.Operstate != "" {
			nd.Operstate = nf.Operstate
		}
		if nf.Speed != nil {
			nd.Speed = nf.Speed
		}
		if nf.MTU != 0 {
			nd.MTU = nf.MTU
		}
		if nf.IPv4 != nil {
			nd.IPv4 = slices.Clone(nf.IPv4)
		}
		if nf.Rename != "" {
			nd.Name = nf.Rename
			if dev.RDMA != nil {
				for k := range dev.RDMA.Ports {
					p := &dev.RDMA.Ports[k]
					if p.Netdev == nf.Name {
						p.Netdev = nf.Rename
					}
					for g := range p.GIDs {
						if p.GIDs[g].Ndev == nf.Name {
							p.GIDs[g].Ndev = nf.Rename
						}
					}
				}
			}
		}
	}
	return nil
}

// mergeSet copies every non-nil pointer field of src into dst (structs of
// pointer fields, such as GPUHealth).
func mergeSet[T any](dst, src *T) {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for i := range s.NumField() {
		if f := s.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			d.Field(i).Set(f)
		}
	}
}

// merged is base with over's entries added or replaced, in a new map; nil
// when both are empty.
func merged[K comparable, V any](base, over map[K]V) map[K]V {
	if len(base) == 0 && len(over) == 0 {
		return base
	}
	out := make(map[K]V, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}
