package kfd

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Properties is a node's properties file, the keys gpuaffinity uses.
// kfd_topology.c node_show writes one "key value" line per property,
// every value a decimal ("%u", or "%llu" for hive_id and unique_id); keys
// not named here are read past and not kept. A key a kernel does not
// write leaves its field 0: none of these is 0 on a GPU the kernel
// describes, except the counts.
type Properties struct {
	CPUCoresCount uint32 // cpu_cores_count: logical CPUs of a CPU node; 0 on a GPU
	SIMDCount     uint32 // simd_count: 0 on a CPU node
	SIMDPerCU     uint32 // simd_per_cu: 4 on CDNA; simd_count / simd_per_cu is the CU count
	MemBanksCount uint32 // mem_banks_count
	CachesCount   uint32 // caches_count
	IOLinksCount  uint32 // io_links_count: the entries of io_links/
	P2PLinksCount uint32 // p2p_links_count: the entries of p2p_links/ (newer kernels)
	// GFXTargetVersion is gfx_target_version: major*10000 + minor*100 +
	// stepping (90402 is gfx942); see GFXTarget.
	GFXTargetVersion uint32
	VendorID         uint32 // vendor_id: the PCI vendor (0x1002 for AMD)
	DeviceID         uint32 // device_id: the PCI device (0x74a1 for MI300X)
	// LocationID is location_id: PCI_DEVID(bus, devfn) = bus<<8 | devfn,
	// with the partition of a partitioned GPU ORed in (see PCIAddress).
	LocationID         uint32
	Domain             uint32 // domain: the PCI domain (segment)
	DRMRenderMinor     uint32 // drm_render_minor: N of /dev/dri/renderDN; 0 on a CPU node
	HiveID             uint64 // hive_id: the XGMI hive; 0 outside a hive
	NumSDMAEngines     uint32 // num_sdma_engines
	NumSDMAXGMIEngines uint32 // num_sdma_xgmi_engines
	UniqueID           uint64 // unique_id: amdgpu's per-board serial; GPU nodes only
	NumXCC             uint32 // num_xcc: the XCCs this node drives (GPU nodes of newer kernels)
}

// GFXTarget names the node's ISA as the ROCm runtime and RCCL's XML do:
// "gfx" then the major version in decimal and the minor version and
// stepping in one hex digit each (90402 is "gfx942", 90010 "gfx90a",
// 110000 "gfx1100"). It is "" where gfx_target_version is 0 (a CPU
// node) or does not decode.
func (p Properties) GFXTarget() string {
	v := p.GFXTargetVersion
	major, minor, step := v/10000, v/100%100, v%100
	if v == 0 || minor > 15 || step > 15 {
		return ""
	}
	return fmt.Sprintf("gfx%d%x%x", major, minor, step)
}

// LinkType is an io_link's type: the CRAT IO interface type
// (kfd_crat.h CRAT_IOLINK_TYPE_*).
type LinkType uint32

// The CRAT IO interface types (kfd_crat.h). KFD writes PCIExpress for a
// GPU's link to its CPU node and XGMI between GPUs of one hive (and for
// a GPU joined to its CPU by XGMI); CPU-to-CPU links are HyperTransport
// on AMD CPUs and QPI on others (kfd_crat.c kfd_fill_iolink_info_for_cpu).
// RCCL's own sysfs reader decodes only 11 (XGMI) and 2 (PCIe)
// (ROCm/rccl src/misc/alt_rsmi.cc).
const (
	LinkUndefined      LinkType = 0
	LinkHyperTransport LinkType = 1
	LinkPCIExpress     LinkType = 2
	LinkAMBA           LinkType = 3
	LinkMIPI           LinkType = 4
	LinkQPI            LinkType = 5 // CRAT_IOLINK_TYPE_QPI_1_1
	LinkRapidIO        LinkType = 8
	LinkInfiniBand     LinkType = 9
	LinkXGMI           LinkType = 11
	LinkXGOP           LinkType = 12
	LinkGZ             LinkType = 13
	LinkEthernetRDMA   LinkType = 14
	LinkRDMAOther      LinkType = 15
	LinkOther          LinkType = 16
)

var linkNames = map[LinkType]string{
	LinkUndefined: "undefined", LinkHyperTransport: "HyperTransport", LinkPCIExpress: "PCIe",
	LinkAMBA: "AMBA", LinkMIPI: "MIPI", LinkQPI: "QPI", LinkRapidIO: "RapidIO",
	LinkInfiniBand: "InfiniBand", LinkXGMI: "XGMI", LinkXGOP: "XGOP", LinkGZ: "GZ",
	LinkEthernetRDMA: "Ethernet RDMA", LinkRDMAOther: "RDMA (other)", LinkOther: "other",
}

// String is the type's name ("XGMI", "PCIe"), or "type N" for a number
// kfd_crat.h does not define.
func (t LinkType) String() string {
	if s, ok := linkNames[t]; ok {
		return s
	}
	return "type " + strconv.FormatUint(uint64(t), 10)
}

// Link flags (kfd_crat.h CRAT_IOLINK_FLAGS_*), as KFD writes them in an
// io_link's flags once the GPU is added (kfd_topology.c
// kfd_fill_iolink_non_crat_info): a GPU's own links are Enabled, a CPU's
// PCIe link to a GPU also NonCoherent, a CPU-to-CPU link 0.
const (
	LinkFlagEnabled         uint32 = 1 << 0
	LinkFlagNonCoherent     uint32 = 1 << 1
	LinkFlagNoAtomics32     uint32 = 1 << 2
	LinkFlagNoAtomics64     uint32 = 1 << 3
	LinkFlagNoPeerToPeerDMA uint32 = 1 << 4
	LinkFlagBiDirectional   uint32 = 1 << 31
)

// Link is one io_links/<M>/properties or p2p_links/<M>/properties file
// (kfd_topology.c iolink_show): a direct link (io_links), or for
// p2p_links an indirect path KFD composed from two or three direct ones
// (kfd_create_indirect_link_prop, kfd_add_peer_prop), whose weight and
// latencies are the sums and bandwidths the minimum of its parts.
type Link struct {
	Type         LinkType // type
	VersionMajor uint32   // version_major
	VersionMinor uint32   // version_minor
	From         int      // node_from: the node whose directory holds the link
	To           int      // node_to
	// Weight is weight: 20 for PCIe and 15 × hops for XGMI
	// (kfd_crat.c kfd_parse_subtype_iolink, KFD_CRAT_XGMI_WEIGHT), the
	// SLIT distance for a CPU-to-CPU link; what rocm-smi --showtopo
	// prints as the weight.
	Weight                  uint32
	MinLatency              uint32 // min_latency
	MaxLatency              uint32 // max_latency
	MinBandwidth            uint32 // min_bandwidth, MB/s
	MaxBandwidth            uint32 // max_bandwidth, MB/s
	RecommendedTransferSize uint32 // recommended_transfer_size
	Flags                   uint32 // flags: LinkFlag*
}

// XGMI reports whether the link is an XGMI (Infinity Fabric) link.
func (l Link) XGMI() bool { return l.Type == LinkXGMI }

// PCIe reports whether the link is a PCI Express link.
func (l Link) PCIe() bool { return l.Type == LinkPCIExpress }

// SystemProperties is topology/system_properties (kfd_topology.c
// sysprops_show), from the ACPI OEM fields of the last CPU node's CRAT.
type SystemProperties struct {
	PlatformOEM uint64 // platform_oem
	PlatformID  uint64 // platform_id
	PlatformRev uint64 // platform_rev
}

// maxLines bounds a properties file: node_show writes 40 lines, a page
// at most; more is not KFD's.
const maxLines = 256

// errSyntax is wrapped by every parse error of a properties file.
var errSyntax = errors.New("not KFD properties")

// parseKV reads "key value" lines, each value a decimal that fits in 64
// bits, and hands each pair to set. It stops at the first line that is
// not one (a key twice, a key that is not [a-z0-9_], a value that is
// not a number) and says which line. An empty file is an error: KFD
// never writes one.
func parseKV(b []byte, set func(key string, v uint64) error) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return fmt.Errorf("empty: %w", errSyntax)
	}
	seen := make(map[string]bool, 48)
	for n := 1; len(b) > 0; n++ {
		if n > maxLines {
			return fmt.Errorf("more than %d lines: %w", maxLines, errSyntax)
		}
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(line, []byte{' '})
		if !ok || !validKey(k) || !validNumber(v) {
			return fmt.Errorf("line %d %q is not \"key value\": %w", n, clip(line), errSyntax)
		}
		val, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("line %d: %s %q out of range: %w", n, k, v, errSyntax)
		}
		key := string(k)
		if seen[key] {
			return fmt.Errorf("line %d: %s twice: %w", n, key, errSyntax)
		}
		seen[key] = true
		if err := set(key, val); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return nil
}

func validKey(k []byte) bool {
	if len(k) == 0 || len(k) > 64 {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validNumber accepts what "%u" and "%llu" print: decimal digits, no
// sign, no leading zero but for 0 itself.
func validNumber(v []byte) bool {
	if len(v) == 0 || len(v) > 20 || len(v) > 1 && v[0] == '0' {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// clip keeps an error's quote of a bad line short.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// u32 stores v in *dst, refusing a value %u cannot have printed.
func u32(dst *uint32, key string, v uint64) error {
	if v > math.MaxUint32 {
		return fmt.Errorf("%s %d does not fit in 32 bits: %w", key, v, errSyntax)
	}
	*dst = uint32(v)
	return nil
}

// parseProperties reads a node's properties file.
func parseProperties(b []byte) (Properties, error) {
	var p Properties
	err := parseKV(b, func(key string, v uint64) error {
		var f *uint32
		switch key {
		case "hive_id":
			p.HiveID = v
			return nil
		case "unique_id":
			p.UniqueID = v
			return nil
		case "cpu_cores_count":
			f = &p.CPUCoresCount
		case "simd_count":
			f = &p.SIMDCount
		case "simd_per_cu":
			f = &p.SIMDPerCU
		case "mem_banks_count":
			f = &p.MemBanksCount
		case "caches_count":
			f = &p.CachesCount
		case "io_links_count":
			f = &p.IOLinksCount
		case "p2p_links_count":
			f = &p.P2PLinksCount
		case "gfx_target_version":
			f = &p.GFXTargetVersion
		case "vendor_id":
			f = &p.VendorID
		case "device_id":
			f = &p.DeviceID
		case "location_id":
			f = &p.LocationID
		case "domain":
			f = &p.Domain
		case "drm_render_minor":
			f = &p.DRMRenderMinor
		case "num_sdma_engines":
			f = &p.NumSDMAEngines
		case "num_sdma_xgmi_engines":
			f = &p.NumSDMAXGMIEngines
		case "num_xcc":
			f = &p.NumXCC
		default:
			return nil // a property gpuaffinity does not use
		}
		return u32(f, key, v)
	})
	return p, err
}

// maxNodeID bounds node_from and node_to: a node number is a directory
// name under nodes/, and MaxNodes of them are read.
const maxNodeID = 1 << 20

// parseLink reads an io_link's or p2p_link's properties file.
func parseLink(b []byte) (Link, error) {
	var l Link
	var has [3]bool // type, node_from, node_to
	err := parseKV(b, func(key string, v uint64) error {
		var f *uint32
		switch key {
		case "type":
			has[0] = true
			var t uint32
			err := u32(&t, key, v)
			l.Type = LinkType(t)
			return err
		case "node_from", "node_to":
			if v >= maxNodeID {
				return fmt.Errorf("%s %d is not a node number: %w", key, v, errSyntax)
			}
			if key == "node_from" {
				l.From, has[1] = int(v), true
			} else {
				l.To, has[2] = int(v), true
			}
			return nil
		case "version_major":
			f = &l.VersionMajor
		case "version_minor":
			f = &l.VersionMinor
		case "weight":
			f = &l.Weight
		case "min_latency":
			f = &l.MinLatency
		case "max_latency":
			f = &l.MaxLatency
		case "min_bandwidth":
			f = &l.MinBandwidth
		case "max_bandwidth":
			f = &l.MaxBandwidth
		case "recommended_transfer_size":
			f = &l.RecommendedTransferSize
		case "flags":
			f = &l.Flags
		default:
			return nil // recommended_sdma_engine_id_mask and later additions
		}
		return u32(f, key, v)
	})
	// Without these three a link says nothing.
	for i, k := range []string{"type", "node_from", "node_to"} {
		if err == nil && !has[i] {
			err = fmt.Errorf("no %s: %w", k, errSyntax)
		}
	}
	return l, err
}

// parseSystem reads topology/system_properties.
func parseSystem(b []byte) (SystemProperties, error) {
	var s SystemProperties
	err := parseKV(b, func(key string, v uint64) error {
		switch key {
		case "platform_oem":
			s.PlatformOEM = v
		case "platform_id":
			s.PlatformID = v
		case "platform_rev":
			s.PlatformRev = v
		}
		return nil
	})
	return s, err
}
