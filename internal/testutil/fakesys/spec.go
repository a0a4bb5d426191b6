package fakesys

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// Kernel describes the running kernel of a machine.
type Kernel struct {
	Release string   `yaml:"release"` // "5.15.0-1042-nvidia"; "" writes no osrelease
	Modules []string `yaml:"modules"` // loaded modules, e.g. nvidia_peermem
	// NVIDIAVersion is the nvidia module's version (/proc/driver/nvidia/version,
	// /sys/module/nvidia/version); default nvml.driver_version. Written, with
	// each GPU's /proc/driver/nvidia/gpus/<bdf>/information, when modules
	// has nvidia.
	NVIDIAVersion string `yaml:"nvidia_version"`
	// Cmdline is /proc/cmdline (written with a newline); "" writes none.
	Cmdline string `yaml:"cmdline"`
	// NVMeMultipath is nvme_core's multipath parameter
	// (sys/module/nvme_core/parameters/multipath, Y or N); it picks the
	// layout of NVMe namespaces. nil writes no parameter (and the
	// namespaces are laid out as without multipath).
	NVMeMultipath *bool `yaml:"nvme_multipath"`
	// NVIDIAOpen makes the nvidia module the open kernel module (its
	// NVRM version line says "Open Kernel Module").
	NVIDIAOpen bool `yaml:"nvidia_open"`
	// AMDPeerMemory is the version amdkfd's peer-memory client shows
	// under sys/kernel/mm/memory_peers/amdkfd/version (amdgpu.go);
	// default "1.0" where modules has amdgpu and the machine has an
	// amdgpu block; "" writes none (no PeerDirect path for GPUDirect).
	AMDPeerMemory *string `yaml:"amd_peer_memory"`
}

// Spec is one machine, as FORMAT.md describes it.
type Spec struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Sources     []string `yaml:"sources"`
	Hostname    string   `yaml:"hostname"`
	DMI         DMI      `yaml:"dmi"`
	CPU         CPU      `yaml:"cpu"`
	NUMA        NUMA     `yaml:"numa"`
	// PCI holds one entry per PCI root bus (sys/devices/pciDDDD:BB).
	PCI []HostBridge `yaml:"pci"`
	// VirtualNetdevs are written under sys/devices/virtual/net.
	VirtualNetdevs []string `yaml:"virtual_netdevs"`
	// Bonds are bonding netdevs (sys/devices/virtual/net/<name>/bonding);
	// their slaves are the netdevs whose master names them. Each is a
	// name, or {name, ipv4, mode}.
	Bonds []Bond `yaml:"bonds"`
	// Files are copied into the root: a vendor's installed files (NCCL
	// topology files), from testdata/files.
	Files []File `yaml:"files"`
	// DefaultRoute is the interface holding the IPv4 default route,
	// written to proc/net/route; "" writes no route table.
	DefaultRoute string `yaml:"default_route"`
	// Kernel is the running kernel: proc/sys/kernel/osrelease and the
	// loaded modules (sys/module/<name>/initstate "live").
	Kernel Kernel `yaml:"kernel"`
	// NVML is the system part of nvml.json; nil means no nvml.json.
	NVML *NVML `yaml:"nvml"`
	// IOMMU is the DMA remapping hardware (sys/class/iommu) and one IOMMU
	// group per PCI function; nil is an IOMMU-off machine.
	IOMMU *IOMMU `yaml:"iommu"`
	// Mounts is /proc/mounts, exactly as listed; nil writes the default
	// three (/dev/root on /, sysfs, proc).
	Mounts []Mount `yaml:"mounts"`
	// RAID are md arrays of NVMe namespaces (sys/devices/virtual/block).
	RAID []RAID `yaml:"raid"`
	// IMEX is the IMEX channel device and daemon; nil writes none.
	IMEX   *IMEX  `yaml:"imex"`
	Expect Expect `yaml:"expect"`
	// Extends is the base machine of a spec written with `extends`
	// (extends.go); "" for a full spec. Parse resolves it.
	Extends string `yaml:"-"`
}

// File is one file copied into the root.
type File struct {
	Path   string `yaml:"path"`   // relative to the root, "opt/amazon/.../p4d-24xl-topo.xml"
	Source string `yaml:"source"` // a file of testdata/files
}

// DMI is sys/class/dmi/id.
type DMI struct {
	SysVendor       string `yaml:"sys_vendor"`
	ProductName     string `yaml:"product_name"`
	ChassisAssetTag string `yaml:"chassis_asset_tag"`
	BoardVendor     string `yaml:"board_vendor"`
	// BIOSVersion is bios_version ("Hyper-V UEFI Release v4.1" on an
	// Azure VM, where RCCL skips its iommu=pt warning); "" writes no file.
	BIOSVersion string `yaml:"bios_version"`
}

// CPU describes the logical CPUs. CPUs are numbered socket-major, core
// next, and SMT siblings of CPU N are N + k*(sockets*cores_per_socket), as
// on Intel and AMD servers.
type CPU struct {
	// Arch is "x86_64" (default) or "aarch64"; it picks the /proc/cpuinfo
	// layout.
	Arch           string `yaml:"arch"`
	Vendor         string `yaml:"vendor"`     // vendor_id (x86) ; CPU implementer (arm, e.g. "0x41")
	ModelName      string `yaml:"model_name"` // model name (x86)
	Family         int    `yaml:"family"`
	Model          int    `yaml:"model"` // x86 model; arm CPU part
	Sockets        int    `yaml:"sockets"`
	CoresPerSocket int    `yaml:"cores_per_socket"`
	ThreadsPerCore int    `yaml:"threads_per_core"`
	Offline        string `yaml:"offline"` // cpulist of offline CPUs
	Allowed        string `yaml:"allowed"` // Cpus_allowed_list; default = online
	// Hypervisor adds the "hypervisor" flag to /proc/cpuinfo (x86 VMs).
	Hypervisor bool `yaml:"hypervisor"`
	// MaxMHz is CPU 0's cpufreq maximum, which the KFD topology reports
	// as max_engine_clk_ccompute; 0 (default): no cpufreq.
	MaxMHz int `yaml:"max_mhz"`
}

// NUMA describes devices/system/node.
type NUMA struct {
	Nodes []NUMANode `yaml:"nodes"`
	// Distances is the SLIT matrix in node order; default 10 on the
	// diagonal and 21 elsewhere.
	Distances [][]int `yaml:"distances"`
}

// NUMANode is one node. A node without socket and cpus has no CPUs
// (Grace-Hopper GPU memory, CXL).
type NUMANode struct {
	ID     int    `yaml:"id"`
	Socket *int   `yaml:"socket"`
	CPUs   string `yaml:"cpus"` // explicit cpulist (SNC/NPS); default: an even share of the socket's cores
	// MemoryGiB is MemTotal; 0 is allowed (a node without memory).
	MemoryGiB float64 `yaml:"memory_gib"`
	// Hugepages2M is nr_hugepages of hugepages-2048kB.
	Hugepages2M int `yaml:"hugepages_2m"`
}

// HostBridge is one PCI root bus.
type HostBridge struct {
	HostBridge string `yaml:"host_bridge"` // "0000:15"
	// NUMA is the numa_node of every device below; nil means -1.
	NUMA    *int     `yaml:"numa"`
	Devices []Device `yaml:"devices"`
}

// Kind values of Device.Kind.
const (
	KindBridge = "bridge"
	KindGPU    = "gpu"
	KindNIC    = "nic"
	KindOther  = "other"
	KindNVMe   = "nvme" // an NVMe controller (class 0x010802)
)

// Device is one PCI function. Empty fields take the defaults of its kind.
type Device struct {
	BDF             string `yaml:"bdf"`
	Kind            string `yaml:"kind"`
	Vendor          string `yaml:"vendor"`
	Device          string `yaml:"device"`
	Class           string `yaml:"class"`
	SubsystemVendor string `yaml:"subsystem_vendor"`
	SubsystemDevice string `yaml:"subsystem_device"`
	Revision        string `yaml:"revision"`
	// Driver is the driver link's name; "none" writes no driver link.
	Driver string `yaml:"driver"`
	Link   *Link  `yaml:"link"`
	// NUMA overrides the host bridge's numa_node for this function (and
	// its children).
	NUMA *int `yaml:"numa"`
	// Virtual marks an SR-IOV VF; PhysFn is its PF's bdf (physfn link).
	Virtual bool     `yaml:"virtual"`
	PhysFn  string   `yaml:"physfn"`
	Netdevs []Netdev `yaml:"netdevs"`
	RDMA    *RDMA    `yaml:"rdma"`
	GPU     *GPU     `yaml:"gpu"`
	// NVMe is the controller of an nvme function (<fn>/nvme/nvmeN).
	NVMe *NVMe `yaml:"nvme"`
	// ACS is a bridge's Access Control Services extended capability
	// (config space 0x100); nil: the bridge has none.
	ACS *ACS `yaml:"acs"`
	// AMDGPU is an AMD Instinct function's KFD node and DRM entries
	// (amdgpu.go); only on kind other with vendor 0x1002.
	AMDGPU *AMDGPU `yaml:"amdgpu"`
	// VPD writes the function's vpd file (binary, as the kernel serves
	// it): an Identifier String and a VPD-R section (SN, V3, RV).
	VPD      *VPD     `yaml:"vpd"`
	Children []Device `yaml:"children"`
}

// VPD is a function's Vital Product Data: what ties a ConnectX-8 PF to
// its Data Direct function (the same V3 on both).
type VPD struct {
	Name   string `yaml:"name"`   // the Identifier String
	Serial string `yaml:"serial"` // keyword SN
	V3     string `yaml:"v3"`     // keyword V3, the adapter UUID
}

// Link is a PCIe link; max_* default to the current values.
type Link struct {
	Speed    string `yaml:"speed"` // "32.0 GT/s PCIe"
	Width    int    `yaml:"width"`
	MaxSpeed string `yaml:"max_speed"`
	MaxWidth int    `yaml:"max_width"`
}

// Netdev is one network interface of a function (<fn>/net/<name>).
type Netdev struct {
	Name      string `yaml:"name"`
	Address   string `yaml:"address"`   // default derived from the bdf
	Operstate string `yaml:"operstate"` // default "up"
	MTU       int    `yaml:"mtu"`       // default 1500 (4092 for type 32)
	Speed     *int   `yaml:"speed"`     // Mb/s; default -1 (unknown)
	Type      int    `yaml:"type"`      // ARPHRD: 1 Ethernet (default), 32 InfiniBand
	Carrier   *int   `yaml:"carrier"`   // default 1 when up, else 0
	// Master is the netdev this one is enslaved to: a bond of the spec or
	// a virtual netdev (Azure's netvsc eth0 for its VF).
	Master string `yaml:"master"`
	// IPv4 are the interface's addresses in CIDR form ("10.10.1.5/16"),
	// written to addresses.json (what netlink answers on a live host).
	IPv4 []string `yaml:"ipv4"`
}

// RDMA is one RDMA device of a function (<fn>/infiniband/<name>).
type RDMA struct {
	Name         string `yaml:"name"`
	FwVer        string `yaml:"fw_ver"`
	NodeGUID     string `yaml:"node_guid"`
	SysImageGUID string `yaml:"sys_image_guid"`
	NodeType     string `yaml:"node_type"` // default "1: CA"
	HCAType      string `yaml:"hca_type"`  // default per driver (rdmaDefaults): "MT4129", ionic's node description
	BoardID      string `yaml:"board_id"`  // default per driver; ionic has no board_id file
	Ports        []Port `yaml:"ports"`
}

// Port is one RDMA port.
type Port struct {
	Port      int    `yaml:"port"`
	State     string `yaml:"state"`      // default "4: ACTIVE"
	PhysState string `yaml:"phys_state"` // default "5: LinkUp"
	Rate      string `yaml:"rate"`       // "400 Gb/sec (4X NDR)"
	LinkLayer string `yaml:"link_layer"` // InfiniBand (default), Ethernet, Unknown
	LID       string `yaml:"lid"`
	SMLID     string `yaml:"sm_lid"`
	// Netdev is the port's netdev (RoCE); default the function's
	// netdev number port-1.
	Netdev string `yaml:"netdev"`
	// GIDs are the populated GID entries; default for Ethernet: link-local
	// v1 and v2 at 0 and 1; for InfiniBand: the port GID at 0.
	GIDs []GID `yaml:"gids"`
	// Counters overrides counters/<name> (all others read 0).
	Counters map[string]uint64 `yaml:"counters"`
	// HwCounters overrides hw_counters/<name>. An mlx5 port (driver
	// mlx5_core) has the names procfs reads (mlx5HwCounters), 0 and
	// lifespan 10 unless set here; another driver's port has only the ones
	// set here.
	HwCounters map[string]uint64 `yaml:"hw_counters"`
}

// GID is one GID table entry.
type GID struct {
	Index int    `yaml:"index"`
	GID   string `yaml:"gid"`
	Type  string `yaml:"type"` // "RoCE v2", "IB/RoCE v1"
	Ndev  string `yaml:"ndev"`
}

// GPU is the NVML side of a GPU function.
type GPU struct {
	Index int    `yaml:"index"`
	UUID  string `yaml:"uuid"`
	Name  string `yaml:"name"`
	Minor *int   `yaml:"minor"` // default index
	// NVLinks is the number of active links, or "not-supported".
	NVLinks NVLinkCount `yaml:"nvlinks"`
	// NVLinkRemote is "nvswitch" (default when nvlinks > 0) or "gpu".
	NVLinkRemote string `yaml:"nvlink_remote"`
	// NVLinkPeers gives, for nvlink_remote gpu, the peer GPU index of
	// each link 0..nvlinks-1.
	NVLinkPeers []int `yaml:"nvlink_peers"`
	// NVLinkVersion is GetNvLinkVersion (default 4, Hopper).
	NVLinkVersion int `yaml:"nvlink_version"`
	// MaxLinks is how many links NVML lists (default 18).
	MaxLinks int `yaml:"max_links"`
	// MemoryNUMANode is the NUMA node holding the GPU's memory on coherent
	// platforms (Grace-Hopper): written to
	// /proc/driver/nvidia/gpus/<bdf>/numa_status and answered by
	// GetNumaNodeId.
	MemoryNUMANode *int `yaml:"memory_numa_node"`
	// CPUAffinity is NVML's GetCpuAffinity answer as a CPU list
	// ("0-55,112-167"); "" answers the function's local CPUs. Where the
	// two differ the sources disagree, as on a root complex without _PXM
	// whose driver still knows the GPU's socket.
	CPUAffinity string `yaml:"cpu_affinity"`
	// Health overrides the GPU's healthy NVML health answers.
	Health *GPUHealth `yaml:"health"`
	// Fabric is the GPU's GetGpuFabricInfo_v4 beyond health's
	// fabric_state and fabric_status: the NVLink domain and health mask.
	Fabric *GPUFabric `yaml:"fabric"`
	// Platform is GetPlatformInfo's answer; nil answers NOT_SUPPORTED.
	Platform *GPUPlatform `yaml:"platform"`
	// Lost makes DeviceGetHandleByIndex answer ERROR_GPU_IS_LOST: the GPU
	// is still on the PCI bus, but NVML tells nothing more of it.
	Lost bool `yaml:"lost"`
	// NVLinksDown lists links (of 0..nvlinks-1) whose GetNvLinkState
	// answers 0, disabled.
	NVLinksDown []int `yaml:"nvlinks_down"`
	// NVLinkErrors sets GetNvLinkErrorCounter per link (of
	// 0..nvlinks-1); every other such link answers 0 for all four.
	NVLinkErrors map[int]NVLinkErrors `yaml:"nvlink_errors"`
	// XIDs are the XID events the replay delivers after the GPU is
	// registered for them (nvml.json xids); every GPU that is not lost
	// answers the registration with success.
	XIDs []uint64 `yaml:"xids"`
}

// NVLinkErrors are one link's GetNvLinkErrorCounter answers.
type NVLinkErrors struct {
	CRCFlit  uint64 `yaml:"crc_flit"` // NVLINK_ERROR_DL_CRC_FLIT
	CRCData  uint64 `yaml:"crc_data"` // NVLINK_ERROR_DL_CRC_DATA
	Replay   uint64 `yaml:"replay"`   // NVLINK_ERROR_DL_REPLAY
	Recovery uint64 `yaml:"recovery"` // NVLINK_ERROR_DL_RECOVERY
}

// GPUHealth overrides NVML health answers of a GPU; an unset field keeps
// its healthy default (persistence on, every count 0, nothing pending,
// fabric registration completed with status 0 on NVSwitch GPUs and fabric
// state NOT_SUPPORTED on others, recovery action 0 none).
type GPUHealth struct {
	Persistence            *bool   `yaml:"persistence"`              // GetPersistenceMode
	ECCUncorrectedVolatile *uint64 `yaml:"ecc_uncorrected_volatile"` // also the aggregate count
	RemapPending           *bool   `yaml:"remap_pending"`            // GetRemappedRows isPending
	RemapFailure           *bool   `yaml:"remap_failure"`            // GetRemappedRows failureOccurred
	// Remapped row counts of GetRemappedRows (corrRows, uncRows).
	RemappedRowsCorrectable   *int `yaml:"remapped_rows_correctable"`
	RemappedRowsUncorrectable *int `yaml:"remapped_rows_uncorrectable"`
	// RetiredPages is the number of pages retired for double-bit ECC
	// errors (GetRetiredPages).
	RetiredPages        *int  `yaml:"retired_pages"`
	RetiredPagesPending *bool `yaml:"retired_pages_pending"` // GetRetiredPagesPendingStatus
	// FabricState (0 NOT_SUPPORTED, 1 not started, 2 in progress, 3
	// completed) and FabricStatus (an nvml.Return code) of GetGpuFabricInfo.
	FabricState    *int `yaml:"fabric_state"`
	FabricStatus   *int `yaml:"fabric_status"`
	RecoveryAction *int `yaml:"recovery_action"` // FI_DEV_GET_GPU_RECOVERY_ACTION
	PCIeReplay     *int `yaml:"pcie_replay"`     // GetPcieReplayCounter
}

// GPUFabric is a GPU's NVLink domain and fabric health (nvml.h
// nvmlGpuFabricInfo_v4_t). State and status stay in GPUHealth.
type GPUFabric struct {
	ClusterUUID string `yaml:"cluster_uuid"` // canonical UUID form; "" all zeroes
	CliqueID    uint32 `yaml:"clique_id"`
	// HealthMask is healthMask as a number (NVML_GPU_FABRIC_HEALTH_MASK_*:
	// 2-bit fields, 0 not supported, 1 true, 2 false).
	HealthMask    uint32 `yaml:"health_mask"`
	HealthSummary int    `yaml:"health_summary"` // 0 not supported, 1 healthy, 2 unhealthy, 3 limited capacity
}

// GPUPlatform is a GPU's rack position (nvmlPlatformInfo_v2_t).
type GPUPlatform struct {
	IBGUID        string `yaml:"ib_guid"` // hex, up to 16 bytes
	ChassisSerial string `yaml:"chassis_serial"`
	Slot          int    `yaml:"slot"`
	Tray          int    `yaml:"tray"`
	Host          int    `yaml:"host"`
	PeerType      int    `yaml:"peer_type"`
	Module        int    `yaml:"module"`
}

// IMEX is a machine's IMEX state: the driver's nvidia-caps-imex-channels
// major in /proc/devices, the channel nodes and the IMEX daemon's config.
type IMEX struct {
	// Major is the driver's registered major; 0 registers none.
	Major int `yaml:"major"`
	// Channels are the channel numbers with a node, written as replayed
	// nodes ("c MAJOR:N", docs/snapshot.md).
	Channels []int `yaml:"channels"`
	// NodeMajor is the nodes' major where it differs from Major (nodes
	// left from an earlier boot); 0 is Major.
	NodeMajor int `yaml:"node_major"`
	// Peers are the IMEX node list's addresses; nil writes no IMEX config.
	Peers []string `yaml:"peers"`
}

// validate checks the overrides' ranges.
func (h *GPUHealth) validate(gpu int) error {
	if h == nil {
		return nil
	}
	for _, f := range []struct {
		name     string
		v        *int
		min, max int
	}{
		{"retired_pages", h.RetiredPages, 0, 1 << 20},
		{"remapped_rows_correctable", h.RemappedRowsCorrectable, 0, 1 << 20},
		{"remapped_rows_uncorrectable", h.RemappedRowsUncorrectable, 0, 1 << 20},
		{"fabric_state", h.FabricState, 0, 3},
		{"fabric_status", h.FabricStatus, 0, 1 << 30},
		{"recovery_action", h.RecoveryAction, 0, 255},
		{"pcie_replay", h.PCIeReplay, 0, 1 << 30},
	} {
		if f.v != nil && (*f.v < f.min || *f.v > f.max) {
			return specErr("gpu %d: health.%s %d: want %d..%d", gpu, f.name, *f.v, f.min, f.max)
		}
	}
	return nil
}

// validateFaults checks nvlinks_down, nvlink_errors and xids: links
// among the GPU's 0..nvlinks-1, each listed once, XID codes above 0.
func (g *GPU) validateFaults() error {
	link := func(field string, n int) error {
		if g.NVLinks.NotSupported || n < 0 || n >= g.NVLinks.N {
			return specErr("gpu %d: %s: link %d is not one of its NVLinks (0..nvlinks-1, nvlinks %s)", g.Index, field, n, g.NVLinks)
		}
		return nil
	}
	if g.CPUAffinity != "" {
		if _, err := cpuset.Parse(g.CPUAffinity); err != nil {
			return specErr("gpu %d: cpu_affinity %q: %v", g.Index, g.CPUAffinity, err)
		}
	}
	down := map[int]bool{}
	for _, n := range g.NVLinksDown {
		if err := link("nvlinks_down", n); err != nil {
			return err
		}
		if down[n] {
			return specErr("gpu %d: nvlinks_down lists link %d twice", g.Index, n)
		}
		down[n] = true
	}
	for n := range g.NVLinkErrors {
		if err := link("nvlink_errors", n); err != nil {
			return err
		}
	}
	for _, x := range g.XIDs {
		if x == 0 {
			return specErr("gpu %d: xids: 0 is not an XID", g.Index)
		}
	}
	return nil
}

// String is the count as the spec writes it.
func (c NVLinkCount) String() string {
	if c.NotSupported {
		return "not-supported"
	}
	return strconv.Itoa(c.N)
}

// Bond is a bonding netdev of the spec.
type Bond struct {
	Name string
	// IPv4 are the bond's addresses in CIDR form (addresses.json): a RoCE
	// LAG's addresses are on the bond, never on its members.
	IPv4 []string `yaml:"ipv4"`
	// Mode is bonding/mode; "802.3ad 4" when empty.
	Mode string `yaml:"mode"`
}

// UnmarshalYAML reads a bond's name, or a mapping {name, ipv4, mode}.
func (b *Bond) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*b = Bond{Name: n.Value}
		return nil
	}
	var v struct {
		Name string   `yaml:"name"`
		IPv4 []string `yaml:"ipv4"`
		Mode string   `yaml:"mode"`
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: bonds: want a name or {name, ipv4, mode}", n.Line)
	}
	// Strict, as the rest of the spec: an unknown key is an error.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "name" && k != "ipv4" && k != "mode" {
			return fmt.Errorf("line %d: bonds: field %s not found", n.Content[i].Line, k)
		}
	}
	if err := n.Decode(&v); err != nil {
		return err
	}
	*b = Bond{Name: v.Name, IPv4: v.IPv4, Mode: v.Mode}
	return nil
}

// NVLinkCount is a number of NVLinks, or NotSupported.
type NVLinkCount struct {
	N            int
	NotSupported bool
}

// UnmarshalYAML reads an integer or the word "not-supported".
func (c *NVLinkCount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: nvlinks: want a number or not-supported", n.Line)
	}
	if n.Value == "not-supported" {
		*c = NVLinkCount{NotSupported: true}
		return nil
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: nvlinks: %q is neither a count nor not-supported", n.Line, n.Value)
	}
	*c = NVLinkCount{N: v}
	return nil
}

// NVML is the system part of nvml.json.
type NVML struct {
	DriverVersion string `yaml:"driver_version"`
	NVMLVersion   string `yaml:"nvml_version"`
	CUDA          int    `yaml:"cuda"`
	// Init replays nvmlInit's failure, e.g. ERROR_LIBRARY_NOT_FOUND.
	Init string `yaml:"init"`
}

// Expect is the hand-written expected result for a machine.
type Expect struct {
	Pairs []ExpectPair `yaml:"pairs"`
	// GPUGPU is the class between every GPU pair ("NV18", "SYS", ...).
	GPUGPU string `yaml:"gpu_gpu"`
	// GPUGPUExcept are the pairs ("A-B", A < B) whose cell is not
	// GPUGPU: a missing XGMI link, say.
	GPUGPUExcept map[string]string `yaml:"gpu_gpu_except"`
	// Roles is the role of every NIC, by NIC name (compute, storage,
	// frontend, management, other).
	Roles map[string]string `yaml:"roles"`
	// Unsupported is how many accelerators gpuaffinity finds on the bus
	// but does not drive (AMD Instinct, ...); a machine with some and no
	// GPU has no pairs to expect.
	Unsupported int `yaml:"unsupported"`
	// DownNICs are, per GPU index, the compute NICs the layout gives it
	// whose ports are down (Pair.DownNICs); GPUs not named have none.
	DownNICs map[int][]string `yaml:"down_nics"`
	// Storage is the expected storage layer, where the spec writes one.
	Storage *ExpectStorage `yaml:"storage"`
}

// ExpectStorage is the hand-written expected storage layer of a machine.
type ExpectStorage struct {
	// Pairs are each GPU's nearest NVMe and storage NICs (topology.StoragePair).
	Pairs []ExpectStoragePair `yaml:"pairs"`
	// Mounts are the GDS-served mounts by mount point, each with the NICs
	// that carry it ([] for a local one); mounts not listed must not be
	// reported.
	Mounts map[string][]string `yaml:"mounts"`
	// P2PDMA is whether GDS's P2PDMA mode is supported.
	P2PDMA *bool `yaml:"p2pdma"`
	// Checks are the storage.* checks' verdicts under the pretrain profile.
	Checks map[string]string `yaml:"checks"`
	// ACSBridges are the bridges storage.acs names, in bus order.
	ACSBridges []string `yaml:"acs_bridges"`
	// CuFile names the expected `gpuaffinity cufile -o -` output, a file
	// under testdata/machines-expect.
	CuFile string `yaml:"cufile"`
}

// ExpectStoragePair is one GPU's expected nearest storage.
type ExpectStoragePair struct {
	GPU       int      `yaml:"gpu"`
	NVMe      []string `yaml:"nvme"`
	NVMeClass string   `yaml:"nvme_class"`
	NICs      []string `yaml:"nics"`
	NICClass  string   `yaml:"nic_class"`
}

// ExpectPair is one GPU's expected NICs.
type ExpectPair struct {
	GPU   int      `yaml:"gpu"`
	NICs  []string `yaml:"nics"`
	Class string   `yaml:"class"`
	// Decided, when set, is the expected Pair.Decided.
	Decided *bool  `yaml:"decided"`
	Note    string `yaml:"note"`
}

// ErrSpec is wrapped by every spec validation error.
var ErrSpec = errors.New("invalid machine spec")

// Parse decodes one spec strictly (unknown fields are errors) and
// validates it. name is used in errors only (a file name).
//
// A file with a top-level `extends: <machine>` is a fault machine: the
// embedded machine of that name with the file's `faults` applied
// (FORMAT.md, "Extending a machine").
func Parse(name string, data []byte) (Spec, error) {
	if extendsOf(data) != "" {
		return parseExtending(name, data)
	}
	var s Spec
	if err := decodeStrict(data, &s); err != nil {
		return Spec{}, fmt.Errorf("parse %s: %w", name, err)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// ParseExpect decodes a stand-alone expectation file ({expect: ...}).
func ParseExpect(name string, data []byte) (Expect, error) {
	var f struct {
		Expect Expect `yaml:"expect"`
	}
	if err := decodeStrict(data, &f); err != nil {
		return Expect{}, fmt.Errorf("parse %s: %w", name, err)
	}
	return f.Expect, nil
}

func decodeStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: empty document", ErrSpec)
		}
		return err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: more than one YAML document", ErrSpec)
	}
	return nil
}

// specErr builds a validation error.
func specErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSpec, fmt.Sprintf(format, args...))
}

// Validate checks what Build relies on: PCI addresses, unique bus ids,
// bus numbering under bridges, kinds, NUMA references, GPU indexes and
// NVLink peers. It does no I/O.
func (s *Spec) Validate() error {
	if s.Name == "" {
		return specErr("name is empty")
	}
	c := s.CPU
	if c.Sockets <= 0 || c.CoresPerSocket <= 0 || c.ThreadsPerCore <= 0 {
		return specErr("cpu: sockets, cores_per_socket and threads_per_core must be positive")
	}
	if c.Arch != "" && c.Arch != "x86_64" && c.Arch != "aarch64" {
		return specErr("cpu.arch %q: want x86_64 or aarch64", c.Arch)
	}
	if _, err := s.layout(); err != nil {
		return err
	}
	seen := map[string]bool{}
	usedBuses := map[int]*[256]bool{}
	gpus := map[int]string{}
	var gpuList []*GPU
	for i := range s.PCI {
		hb := &s.PCI[i]
		dom, bus, err := parseRootBus(hb.HostBridge)
		if err != nil {
			return specErr("pci[%d]: %v", i, err)
		}
		if seen["root:"+hb.HostBridge] {
			return specErr("host bridge %s listed twice", hb.HostBridge)
		}
		seen["root:"+hb.HostBridge] = true
		if hb.NUMA != nil {
			if err := s.checkNUMA(*hb.NUMA); err != nil {
				return specErr("host bridge %s: %v", hb.HostBridge, err)
			}
		}
		used := usedBuses[dom]
		if used == nil {
			used = new([256]bool)
			usedBuses[dom] = used
		}
		if used[bus] {
			return specErr("host bridge %s: bus %02x is already used in domain %04x", hb.HostBridge, bus, dom)
		}
		used[bus] = true
		if err := s.validateLevel(hb.Devices, dom, bus, seen, gpus, &gpuList, used); err != nil {
			return err
		}
	}
	for _, g := range gpuList {
		if err := g.Health.validate(g.Index); err != nil {
			return err
		}
		if err := g.validateFaults(); err != nil {
			return err
		}
		if g.NVLinks.NotSupported {
			continue
		}
		switch g.NVLinkRemote {
		case "", "nvswitch":
		case "gpu":
			if len(g.NVLinkPeers) != g.NVLinks.N {
				return specErr("gpu %d: nvlink_peers has %d entries, nvlinks is %d", g.Index, len(g.NVLinkPeers), g.NVLinks.N)
			}
			for _, p := range g.NVLinkPeers {
				if _, ok := gpus[p]; !ok || p == g.Index {
					return specErr("gpu %d: nvlink peer %d is not another GPU of the spec", g.Index, p)
				}
			}
		default:
			return specErr("gpu %d: nvlink_remote %q: want nvswitch or gpu", g.Index, g.NVLinkRemote)
		}
		if g.NVLinks.N > max(g.MaxLinks, 18) {
			return specErr("gpu %d: %d nvlinks exceed max_links", g.Index, g.NVLinks.N)
		}
	}
	for i := range len(gpuList) {
		if _, ok := gpus[i]; !ok {
			return specErr("gpu indexes must be 0..%d; %d is missing", len(gpuList)-1, i)
		}
	}
	virtual := map[string]bool{}
	names := slices.Clone(s.VirtualNetdevs)
	for _, b := range s.Bonds {
		names = append(names, b.Name)
		for _, p := range b.IPv4 {
			if err := checkIPv4(p); err != nil {
				return specErr("bond %s: %v", b.Name, err)
			}
		}
	}
	for _, v := range names {
		if v == "" || strings.ContainsAny(v, "/ ") || seen["net:"+v] || virtual[v] {
			return specErr("virtual netdev or bond %q: bad or used twice", v)
		}
		virtual[v] = true
	}
	for _, fn := range s.Functions() {
		for _, nd := range fn.Device.Netdevs {
			if nd.Master != "" && !virtual[nd.Master] {
				return specErr("netdev %s: master %q is not a bond or virtual netdev of the spec", nd.Name, nd.Master)
			}
		}
	}
	if err := s.checkLAG(); err != nil {
		return err
	}
	for _, f := range s.Files {
		if !fs.ValidPath(f.Path) || f.Path == "." || strings.HasPrefix(f.Path, "sys/") || strings.HasPrefix(f.Path, "proc/") {
			return specErr("files: path %q: want a relative path outside sys/ and proc/", f.Path)
		}
		if _, err := filesFS.ReadFile(path.Join("testdata/files", f.Source)); err != nil || strings.Contains(f.Source, "/") {
			return specErr("files: source %q is not a file of testdata/files", f.Source)
		}
	}
	if err := s.validateAMDGPU(); err != nil {
		return err
	}
	return s.validateStorage()
}

func (s *Spec) checkNUMA(n int) error {
	if n == -1 {
		return nil
	}
	for _, nd := range s.NUMA.Nodes {
		if nd.ID == n {
			return nil
		}
	}
	return fmt.Errorf("numa %d is not a node of the spec", n)
}

// validateLevel checks the devices sitting on one bus: all carry bus
// number bus, every bus number is used once in the domain, and each
// bridge's children sit on one bus above its own.
func (s *Spec) validateLevel(devs []Device, dom, bus int, seen map[string]bool, gpus map[int]string, gpuList *[]*GPU, used *[256]bool) error {
	for i := range devs {
		d := &devs[i]
		a, err := parseBDF(d.BDF)
		if err != nil {
			return specErr("device %q: %v", d.BDF, err)
		}
		if seen[a.String()] {
			return specErr("duplicate bdf %s", a)
		}
		seen[a.String()] = true
		if a.Domain != dom || a.Bus != bus {
			return specErr("device %s sits on bus %04x:%02x but its bdf says %04x:%02x", a, dom, bus, a.Domain, a.Bus)
		}
		switch d.Kind {
		case KindBridge, KindGPU, KindNIC, KindOther, KindNVMe:
		case "":
			return specErr("device %s: kind is empty", a)
		default:
			return specErr("device %s: unknown kind %q", a, d.Kind)
		}
		if d.Kind == KindOther && d.Class == "" {
			return specErr("device %s: kind other needs a class", a)
		}
		for _, f := range []struct{ name, v string }{{"vendor", d.Vendor}, {"device", d.Device}, {"class", d.Class}, {"subsystem_vendor", d.SubsystemVendor}, {"subsystem_device", d.SubsystemDevice}, {"revision", d.Revision}} {
			if f.v != "" {
				if _, err := parseHex(f.v); err != nil {
					return specErr("device %s: %s: %v", a, f.name, err)
				}
			}
		}
		if d.Link != nil {
			for _, sp := range []string{d.Link.Speed, d.Link.MaxSpeed} {
				if sp != "" && pci.Gen(sp) == 0 {
					return specErr("device %s: link speed %q: want e.g. \"32.0 GT/s PCIe\"", a, sp)
				}
			}
		}
		if d.NUMA != nil {
			if err := s.checkNUMA(*d.NUMA); err != nil {
				return specErr("device %s: %v", a, err)
			}
		}
		if d.GPU != nil {
			if d.Kind != KindGPU {
				return specErr("device %s: gpu block on kind %s", a, d.Kind)
			}
			if other, ok := gpus[d.GPU.Index]; ok {
				return specErr("gpu index %d used by %s and %s", d.GPU.Index, other, a)
			}
			gpus[d.GPU.Index] = a.String()
			*gpuList = append(*gpuList, d.GPU)
		}
		if err := validateDeviceExtras(a, d, seen); err != nil {
			return err
		}
		if d.Virtual && d.PhysFn == "" {
			return specErr("device %s: virtual needs physfn", a)
		}
		if d.PhysFn != "" {
			if _, err := parseBDF(d.PhysFn); err != nil {
				return specErr("device %s: physfn: %v", a, err)
			}
		}
		if d.RDMA != nil {
			if d.RDMA.Name == "" {
				return specErr("device %s: rdma name is empty", a)
			}
			if seen["rdma:"+d.RDMA.Name] {
				return specErr("rdma device %s listed twice", d.RDMA.Name)
			}
			seen["rdma:"+d.RDMA.Name] = true
			ports := map[int]bool{}
			for _, p := range d.RDMA.Ports {
				if p.Port <= 0 || ports[p.Port] {
					return specErr("rdma %s: bad or duplicate port %d", d.RDMA.Name, p.Port)
				}
				ports[p.Port] = true
				for c := range p.Counters {
					if !slices.Contains(ibCounters, c) {
						return specErr("rdma %s port %d: counters: %q is not a counters/ file (%s)", d.RDMA.Name, p.Port, c, strings.Join(ibCounters, " "))
					}
				}
				for c := range p.HwCounters {
					if c == "" || strings.ContainsAny(c, "/ ") {
						return specErr("rdma %s port %d: hw_counters: bad file name %q", d.RDMA.Name, p.Port, c)
					}
				}
				for _, g := range p.GIDs {
					if g.Index < 0 || g.Index > 255 {
						return specErr("rdma %s port %d: gid index %d", d.RDMA.Name, p.Port, g.Index)
					}
				}
			}
		}
		for _, n := range d.Netdevs {
			if n.Name == "" || strings.ContainsAny(n.Name, "/ ") {
				return specErr("device %s: bad netdev name %q", a, n.Name)
			}
			if seen["net:"+n.Name] {
				return specErr("netdev %s listed twice", n.Name)
			}
			seen["net:"+n.Name] = true
		}
		if len(d.Children) > 0 {
			if d.Kind == KindNVMe {
				return specErr("device %s: an NVMe controller is an endpoint; it has no children", a)
			}
			if d.Kind != KindBridge {
				return specErr("device %s: only bridges have children", a)
			}
			cbus := -1
			for _, c := range d.Children {
				ca, err := parseBDF(c.BDF)
				if err != nil {
					return specErr("device %q: %v", c.BDF, err)
				}
				if cbus == -1 {
					cbus = ca.Bus
				} else if ca.Bus != cbus {
					return specErr("children of bridge %s sit on buses %02x and %02x; a bridge has one secondary bus", a, cbus, ca.Bus)
				}
			}
			if cbus <= bus {
				return specErr("bridge %s: child bus %02x must be above the bridge's bus %02x", a, cbus, bus)
			}
			if used[cbus] {
				return specErr("bridge %s: bus %02x is already used in domain %04x", a, cbus, dom)
			}
			used[cbus] = true
			if err := s.validateLevel(d.Children, dom, cbus, seen, gpus, gpuList, used); err != nil {
				return err
			}
		}
	}
	// Sibling bridges route disjoint bus ranges [secondary, subordinate].
	type span struct {
		lo, hi int
		who    string
	}
	var spans []span
	for i := range devs {
		if lo, hi, ok := busSpan(&devs[i]); ok {
			for _, o := range spans {
				if lo <= o.hi && o.lo <= hi {
					return specErr("bridges %s and %s route overlapping buses %02x-%02x and %02x-%02x", o.who, devs[i].BDF, o.lo, o.hi, lo, hi)
				}
			}
			spans = append(spans, span{lo, hi, devs[i].BDF})
		}
	}
	return nil
}

// busSpan is a bridge's [secondary, subordinate] from its children; ok is
// false for a bridge without children.
func busSpan(d *Device) (lo, hi int, ok bool) {
	if len(d.Children) == 0 {
		return 0, 0, false
	}
	a, _ := parseBDF(d.Children[0].BDF)
	lo, hi = a.Bus, a.Bus
	for i := range d.Children {
		if _, h, ok := busSpan(&d.Children[i]); ok {
			hi = max(hi, h)
		}
	}
	return lo, hi, true
}

// parseHex reads "0x10de".
func parseHex(s string) (uint32, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if t == s || t == "" {
		return 0, fmt.Errorf("%q: want 0x-prefixed hex", s)
	}
	v, err := strconv.ParseUint(t, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return uint32(v), nil
}

// bdf is a parsed PCI address.
type bdf struct{ Domain, Bus, Dev, Fn int }

// address is a as package pci has it: pci prints and parses every PCI
// address (pci.TestPCIParsersOwned), the fixture builder's included.
func (a bdf) address() pci.Address {
	return pci.Address{Domain: uint32(a.Domain), Bus: uint8(a.Bus), Device: uint8(a.Dev), Function: uint8(a.Fn)}
}

func (a bdf) String() string { return a.address().String() }

// nvmlBusID is NVML's form, "00000000:1B:00.0".
func (a bdf) nvmlBusID() string { return a.address().NVMLString() }

// parseBDF reads a spec's PCI address, which must be written in sysfs's
// canonical form (pci.ParseAddress also reads NVML's and short forms).
func parseBDF(s string) (bdf, error) {
	p, err := pci.ParseAddress(s)
	if err != nil {
		return bdf{}, fmt.Errorf("bdf %q: want dddd:bb:dd.f: %w", s, err)
	}
	a := bdf{Domain: int(p.Domain), Bus: int(p.Bus), Dev: int(p.Device), Fn: int(p.Function)}
	if a.Domain > 0xffff || a.String() != strings.ToLower(s) {
		return a, fmt.Errorf("bdf %q: want the canonical form %s", s, a)
	}
	return a, nil
}

func parseRootBus(s string) (dom, bus int, err error) {
	d, b, ok := strings.Cut(s, ":")
	if !ok || len(d) != 4 || len(b) != 2 {
		return 0, 0, fmt.Errorf("host_bridge %q: want dddd:bb", s)
	}
	dv, err1 := strconv.ParseUint(d, 16, 16)
	bv, err2 := strconv.ParseUint(b, 16, 8)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("host_bridge %q: want dddd:bb", s)
	}
	return int(dv), int(bv), nil
}

// Function is one PCI function of a spec, flattened out of the tree.
type Function struct {
	BDF    string  // canonical lower-case bus id
	Kind   string  // KindBridge, KindGPU, ...
	NUMA   int     // the numa_node Build writes: the device's, else its host bridge's; -1 if none
	Parent string  // the parent bridge's bus id; "" on a root bus
	Device *Device // the spec entry
}

// Functions lists every PCI function of the spec in tree order (parents
// before children). It does no I/O.
func (s *Spec) Functions() []Function {
	var out []Function
	var walk func(devs []Device, numa int, parent string)
	walk = func(devs []Device, numa int, parent string) {
		for i := range devs {
			d := &devs[i]
			n := numa
			if d.NUMA != nil {
				n = *d.NUMA
			}
			a, err := parseBDF(d.BDF)
			id := d.BDF
			if err == nil {
				id = a.String()
			}
			out = append(out, Function{BDF: id, Kind: d.Kind, NUMA: n, Parent: parent, Device: d})
			walk(d.Children, n, id)
		}
	}
	for _, hb := range s.PCI {
		n := -1
		if hb.NUMA != nil {
			n = *hb.NUMA
		}
		walk(hb.Devices, n, "")
	}
	return out
}
