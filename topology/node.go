package topology

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/cloudname"
)

// Schema names the JSON contract of Node.
const Schema = "gpuaffinity.topology/v1"

// Node is everything gpuaffinity knows about one machine.
type Node struct {
	Schema   string   `json:"schema"`
	Hostname string   `json:"hostname,omitempty"` // /proc/sys/kernel/hostname
	Platform Platform `json:"platform"`
	CPU      CPUInfo  `json:"cpu"`
	// NUMANodes are sorted by ID.
	NUMANodes []NUMANode `json:"numa_nodes"`
	// PCIDevices is every PCI function, sorted by bus id.
	PCIDevices []PCIDevice `json:"pci_devices"`
	// NoPCIBus is set where the root has no PCI bus in sysfs
	// (sys/bus/pci/devices: a partial mount of /sys, a kernel built
	// without PCI): no GPU, NIC or NVMe drive could be placed, and the
	// health gate says so.
	NoPCIBus bool `json:"no_pci_bus,omitempty"`
	// GPUs are sorted by NVML index (PCI bus order where NVML is absent).
	GPUs []GPU `json:"gpus"`
	// NICs are sorted by bus id, then name.
	NICs []NIC `json:"nics"`
	// DefaultRouteInterface is the interface holding the IPv4 default
	// route (<root>/proc/net/route); "" when the root has no route table
	// (fixtures, snapshots without one).
	DefaultRouteInterface string `json:"default_route_interface,omitempty"`
	// NetPlugins names the NCCL network plugins installed under the root
	// that env has settings for: "gIB" (Google's, /usr/local/gib).
	NetPlugins []string `json:"net_plugins"`
	// TopoFile is the vendor NCCL topology file applied with --topo-file
	// ("" when none); the devices it placed are in TopoFileDevices.
	TopoFile        string   `json:"topo_file,omitempty"`
	TopoFileDevices []string `json:"topo_file_devices,omitempty"`
	// NVML says what the NVML source answered as a whole.
	NVML NVMLInfo `json:"nvml"`
	// Driver is the NVIDIA kernel driver's version, from NVML or, without
	// NVML, from the driver's own files.
	Driver DriverInfo `json:"driver"`
	// Kernel is the running kernel's release and the loaded modules
	// among those checks and outputs look at.
	Kernel KernelInfo `json:"kernel"`
	// Unsupported lists the accelerators on the PCI bus that gpuaffinity
	// does not drive yet (AMD Instinct, Intel Gaudi, ...): they are not in
	// GPUs, and every command warns about them.
	Unsupported []Accelerator `json:"unsupported_accelerators"`
	// Paths holds one entry per GPU×NIC pair, GPU-major.
	Paths []Path `json:"paths"`
	// GPUPaths holds one entry per unordered GPU pair (a < b).
	GPUPaths []GPUPath `json:"gpu_paths"`
	// Pairs holds one entry per GPU, in GPU order.
	Pairs []Pair `json:"pairs"`
	// Storage is the storage layer: NVMe, GDS-served mounts, GDS's
	// prerequisites and each GPU's nearest storage.
	Storage Storage `json:"storage"`
	// NVLinkFabric is the node's NVLink domains and IMEX.
	NVLinkFabric NVLinkFabric `json:"nvlink_fabric"`
	// ROCm is AMD's stack on the node; nil where it has no AMD GPU.
	ROCm *ROCmInfo `json:"rocm,omitempty"`
	// Warnings name the file or device behind every degraded answer.
	Warnings []string `json:"warnings"`
}

// Cloud names the platform a node runs on: one of internal/cloudname's
// names, which platform.Classify returns and discover converts.
type Cloud string

const (
	CloudAWS       Cloud = cloudname.AWS
	CloudAzure     Cloud = cloudname.Azure
	CloudGCP       Cloud = cloudname.GCP
	CloudOCI       Cloud = cloudname.OCI
	CloudBareMetal Cloud = cloudname.BareMetal // DMI readable, no cloud vendor
	CloudUnknown   Cloud = cloudname.Unknown   // no DMI to read
)

// Platform comes from DMI (/sys/class/dmi/id).
type Platform struct {
	Cloud        Cloud  `json:"cloud"`
	InstanceType string `json:"instance_type,omitempty"` // product_name on AWS/GCP, shape on OCI
	SysVendor    string `json:"sys_vendor,omitempty"`    // sys_vendor
	ProductName  string `json:"product_name,omitempty"`  // product_name
	// Virtual is set where the CPU says it runs under a hypervisor (the
	// "hypervisor" flag of /proc/cpuinfo): a VM, whose PCIe switches the
	// hypervisor may hide.
	Virtual bool `json:"virtual,omitempty"`
}

// DriverInfo is the NVIDIA kernel driver's version and where it was read.
type DriverInfo struct {
	Version string `json:"version,omitempty"` // "550.54.15"
	// Source is "nvml" (SystemGetDriverVersion), "/proc/driver/nvidia/version"
	// or "/sys/module/nvidia/version"; "" when no source knows.
	Source string `json:"source,omitempty"`
}

// KernelInfo is the running kernel as discovery read it.
type KernelInfo struct {
	// Release is /proc/sys/kernel/osrelease ("5.15.0-1042-nvidia"); ""
	// when unreadable.
	Release string `json:"release,omitempty"`
	// Modules are the loaded modules (a /sys/module/<name> directory)
	// among the fixed list discovery looks for (discover.KernelModules:
	// nvidia, nvidia_peermem, nvidia_fs, nvidia_uvm, ib_core, ib_uverbs,
	// mlx5_ib, efa, amdgpu), sorted.
	Modules []string `json:"modules,omitempty"`
}

// Accelerator is a PCI function that is a GPU or accelerator of a kind
// gpuaffinity does not support yet.
type Accelerator struct {
	BusID    string `json:"bus_id"`
	Vendor   string `json:"vendor"`
	Device   string `json:"device"`
	Class    string `json:"class"`
	Driver   string `json:"driver,omitempty"`
	NUMANode *int   `json:"numa_node"`
	// Name is the product where the PCI id is known ("AMD Instinct MI300X").
	Name string `json:"name,omitempty"`
}

// CPUInfo describes the logical CPUs.
type CPUInfo struct {
	Online  cpuset.Set `json:"online"`  // devices/system/cpu/online
	Offline cpuset.Set `json:"offline"` // devices/system/cpu/offline
	// Allowed is the CPUs this process may run on (/proc/self/status
	// Cpus_allowed_list): the cgroup cpuset or taskset limit.
	Allowed cpuset.Set `json:"allowed"`
	Sockets []Socket   `json:"sockets"`
	// Cores are the physical cores, sorted by their first CPU.
	Cores []Core `json:"cores"`
	// Arch is the CPU architecture as NCCL names it: "x86_64", "arm64",
	// "ppc64" (from the fields /proc/cpuinfo has); "" when unknown.
	Arch      string `json:"arch,omitempty"`
	Vendor    string `json:"vendor,omitempty"`     // /proc/cpuinfo vendor_id
	ModelName string `json:"model_name,omitempty"` // /proc/cpuinfo model name
	Family    int    `json:"family,omitempty"`     // /proc/cpuinfo cpu family
	Model     int    `json:"model,omitempty"`      // /proc/cpuinfo model
}

// Socket is one physical package.
type Socket struct {
	ID        int        `json:"id"` // topology/physical_package_id
	CPUs      cpuset.Set `json:"cpus"`
	NUMANodes []int      `json:"numa_nodes"` // NUMA nodes with CPUs in this socket
}

// Core is one physical core and its SMT siblings.
type Core struct {
	Socket   int        `json:"socket"`
	ID       int        `json:"id"`        // topology/core_id (unique within a socket only)
	NUMANode int        `json:"numa_node"` // -1 when no node lists its CPUs
	CPUs     cpuset.Set `json:"cpus"`      // topology/thread_siblings_list
}

// NUMANode is one node of devices/system/node.
type NUMANode struct {
	ID          int        `json:"id"`
	CPUs        cpuset.Set `json:"cpus"`         // nodeN/cpulist; empty for memory-only nodes
	MemoryBytes uint64     `json:"memory_bytes"` // nodeN/meminfo MemTotal
	// Distances is nodeN/distance, indexed like NUMANodes' IDs in the
	// kernel's order (node 0 first).
	Distances []int `json:"distances"`
	// Socket is the socket of its CPUs; nil for a memory-only node.
	Socket *int `json:"socket"`
}

// MemoryOnly reports whether the node has memory but no CPU (Grace-Hopper
// GPU memory, CXL expanders).
func (n NUMANode) MemoryOnly() bool { return n.CPUs.IsEmpty() }

// Kind says what a PCI function is in the tree.
type Kind string

const (
	KindRootPort         Kind = "root-port"         // a bridge whose parent is a host bridge
	KindSwitchUpstream   Kind = "switch-upstream"   // a bridge below a bridge, with bridges below it
	KindSwitchDownstream Kind = "switch-downstream" // a bridge whose parent is a switch upstream port
	KindBridge           Kind = "bridge"            // any other PCI-to-PCI bridge
	KindHostBridge       Kind = "host-bridge"       // class 0x0600 functions (the root complex's own)
	KindGPU              Kind = "gpu"
	KindNIC              Kind = "nic"
	KindOther            Kind = "other"
)

// PCIDevice is one PCI function.
type PCIDevice struct {
	BusID string `json:"bus_id"` // "0000:17:00.0", lower case
	// Parent is the parent bridge's bus id; "" when the function sits on a
	// root bus.
	Parent string `json:"parent,omitempty"`
	// HostBridge is the root bus directory the function hangs off,
	// "pci0000:15".
	HostBridge      string     `json:"host_bridge"`
	Kind            Kind       `json:"kind"`
	Class           string     `json:"class"`            // class, "0x030200"
	Vendor          string     `json:"vendor"`           // vendor, "0x10de"
	Device          string     `json:"device"`           // device
	SubsystemVendor string     `json:"subsystem_vendor"` // subsystem_vendor
	SubsystemDevice string     `json:"subsystem_device"` // subsystem_device
	NUMANode        *int       `json:"numa_node"`        // numa_node; nil when -1 or unreadable
	LocalCPUs       cpuset.Set `json:"local_cpus"`       // local_cpulist
	Driver          string     `json:"driver,omitempty"` // basename of the driver link
	Link            PCILink    `json:"link"`
	// ACS is a bridge's Access Control Services state (nil for other
	// functions).
	ACS *ACS `json:"acs,omitempty"`
	// NICSwitch names the network adapter whose own PCIe switch this
	// bridge is a port of ("ConnectX": the switch inside a ConnectX-8,
	// PCI id 15b3:197c; "BlueField-3"); "" for a discrete switch, a root
	// port or any other function (pci.NICSwitch).
	NICSwitch string `json:"nic_switch,omitempty"`
	// VPD is read of ConnectX functions on a node with a Data Direct
	// function only (nil otherwise): it ties each DMA function to its NIC.
	VPD *VPD `json:"vpd,omitempty"`
}

// VPD is what gpuaffinity keeps of a function's Vital Product Data.
type VPD struct {
	// Name is the Identifier String ("NVIDIA Dual ConnectX-8 SuperNIC ...").
	Name string `json:"name,omitempty"`
	// V3 is the read-only keyword NVIDIA puts the adapter's UUID in: equal
	// on a ConnectX-8 PF and its Data Direct function.
	V3 string `json:"v3,omitempty"`
	// Unreadable says why there is none: the vpd file is readable by root
	// only, absent, or garbage.
	Unreadable string `json:"unreadable,omitempty"`
}

// ACS is a PCIe port's Access Control Services capability, read from its
// configuration space.
type ACS struct {
	// State is "on", "off", "absent" (no ACS capability) or "unknown"
	// (the extended configuration space is not readable without root).
	State string `json:"state"`
	// Enabled names the control bits set ("SV", "RR", "CR", "UF", ...).
	Enabled []string `json:"enabled,omitempty"`
	// Control is the ACS Control Register ("0x001d"); "" unless on or off.
	Control string `json:"control,omitempty"`
	// Reason says why State is unknown.
	Reason string `json:"reason,omitempty"`
}

// PCILink is a function's PCIe link; zero values mean "not reported".
type PCILink struct {
	Speed    string `json:"speed,omitempty"`     // current_link_speed, "32.0 GT/s PCIe"
	Width    int    `json:"width,omitempty"`     // current_link_width
	MaxSpeed string `json:"max_speed,omitempty"` // max_link_speed
	MaxWidth int    `json:"max_width,omitempty"` // max_link_width
}

// PCIe is a GPU's link in generation terms.
type PCIe struct {
	Gen      int `json:"gen"`
	Width    int `json:"width"`
	MaxGen   int `json:"max_gen"`
	MaxWidth int `json:"max_width"`
}

// GPUState is what the sources say about a GPU as a whole.
type GPUState string

const (
	GPUOK        GPUState = "ok"          // on the bus and answered NVML
	GPUNoNVML    GPUState = "no-nvml"     // on the bus; NVML not present on the node
	GPUNotInNVML GPUState = "not-in-nvml" // on the bus; NVML runs but does not list it
	GPULost      GPUState = "lost"        // NVML reports GPU_IS_LOST
	GPUNVMLError GPUState = "nvml-error"  // NVML listed it but a required call failed
)

// Where a GPU's memory node (GPU.GPUNUMAID) came from.
const (
	GPUNUMAFromNVML   = "nvml"        // NVML GetNumaNodeId
	GPUNUMAFromProcfs = "numa_status" // /proc/driver/nvidia/gpus/<bus id>/numa_status
)

// GPUNUMAOnline is the numa_status Status of GPU memory that is in its
// NUMA node (GPU.GPUNUMAStatus).
const GPUNUMAOnline = "online"

// GPU is one GPU found on the PCI bus: an NVIDIA GPU (NVML) or an AMD
// Instinct one (amdgpu, KFD; AMD set).
type GPU struct {
	Index int    `json:"index"`  // NVML index; PCI bus order without NVML
	BusID string `json:"bus_id"` // lower-case "dddd:bb:dd.f"
	// NVMLIndex is NVML's index; nil when NVML does not list the GPU.
	NVMLIndex *int     `json:"nvml_index"`
	State     GPUState `json:"state"`
	Vendor    string   `json:"vendor"`         // PCI vendor, "0x10de"
	Device    string   `json:"device"`         // PCI device id
	Model     string   `json:"model"`          // NVML name, else the driver's; "" when neither
	UUID      string   `json:"uuid,omitempty"` // NVML UUID, else the driver's
	Minor     *int     `json:"minor"`          // minor number (/dev/nvidiaN): NVML's, else the driver's
	// InfoSource says where Model, UUID and Minor came from: "nvml", or
	// "procfs" (/proc/driver/nvidia/gpus/<bus id>/information, where NVML
	// is absent); "" when neither knew.
	InfoSource string `json:"info_source,omitempty"`
	NUMANode   *int   `json:"numa_node"` // PCI numa_node; nil when unknown
	// GPUNUMAID is the NUMA node of the GPU's own memory where the GPU
	// is one (Grace Hopper and Blackwell: `GPU NUMA ID` in nvidia-smi
	// topo -m): NVML's GetNumaNodeId, else the driver's numa_status
	// file; nil where neither names one (x86).
	GPUNUMAID *int `json:"gpu_numa_id"`
	// GPUNUMASource says where GPUNUMAID came from: GPUNUMAFromNVML or
	// GPUNUMAFromProcfs; "" when it is nil.
	GPUNUMASource string `json:"gpu_numa_source,omitempty"`
	// GPUNUMAStatus is the state of the GPU's memory in that node as the
	// driver's numa_status prints it: "online" (the memory is in the
	// node), or "offline", "online_in_progress", "online_failed",
	// "offline_in_progress", "offline_failed" (it is not, or not all of
	// it); "" where the file is absent or unreadable.
	GPUNUMAStatus string `json:"gpu_numa_status,omitempty"`
	// LocalCPUs is the PCI function's local_cpulist.
	LocalCPUs cpuset.Set `json:"local_cpus"`
	// NVMLCPUAffinity is NVML's ideal CPU affinity; empty without NVML.
	NVMLCPUAffinity cpuset.Set `json:"nvml_cpu_affinity"`
	// Locality is the GPU's CPUs and NUMA node as every output gives
	// them, with the source that decided (ResolveLocality).
	Locality Locality `json:"locality"`
	PCIe     PCIe     `json:"pcie"`
	// NVLinkVisible is false where NVML answers NOT_SUPPORTED for every
	// link (VMs, PCIe cards) or is absent.
	NVLinkVisible bool     `json:"nvlink_visible"`
	NVLinks       []NVLink `json:"nvlinks"`
	// Health is what NVML says of the GPU's health; every field is nil
	// where NVML is absent or answers NOT_SUPPORTED.
	Health GPUHealth `json:"health"`
	// Fabric is the GPU's NVLink fabric registration; nil outside a
	// fabric or without NVML.
	Fabric *GPUFabric `json:"fabric"`
	// Platform is the GPU's rack position (Blackwell and newer); nil
	// where NVML does not say.
	Platform *GPUPlatform `json:"platform"`
	// AMD is what amdgpu and KFD say of an AMD GPU; nil for NVIDIA.
	AMD *AMDGPU `json:"amd,omitempty"`
}

// GPUHealth holds NVML's health answers for one GPU (read at discovery).
type GPUHealth struct {
	Persistence *bool `json:"persistence"` // GetPersistenceMode
	// ECC uncorrected error counts (GetTotalEccErrors, uncorrected).
	ECCUncorrectedVolatile  *uint64 `json:"ecc_uncorrected_volatile"`
	ECCUncorrectedAggregate *uint64 `json:"ecc_uncorrected_aggregate"`
	// Row remapping (GetRemappedRows): counts and flags.
	RemappedRowsCorrectable   *int  `json:"remapped_rows_correctable"`
	RemappedRowsUncorrectable *int  `json:"remapped_rows_uncorrectable"`
	RemapPending              *bool `json:"remap_pending"`
	RemapFailure              *bool `json:"remap_failure"`
	// Retired pages (GetRetiredPages for both causes; GetRetiredPagesPendingStatus).
	RetiredPages        *int  `json:"retired_pages"`
	RetiredPagesPending *bool `json:"retired_pages_pending"`
	// Fabric (GetGpuFabricInfo): state 1 not started, 2 in progress,
	// 3 completed; status is the nvml.Return of the registration.
	FabricState  *int `json:"fabric_state"`
	FabricStatus *int `json:"fabric_status"`
	// RecoveryAction is the field value NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
	// (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset).
	RecoveryAction *int    `json:"recovery_action"`
	PCIeReplay     *uint64 `json:"pcie_replay"` // GetPcieReplayCounter
}

// NVLinkRemote says what the far end of a link is.
type NVLinkRemote string

const (
	RemoteGPU      NVLinkRemote = "gpu"
	RemoteNVSwitch NVLinkRemote = "nvswitch"
	RemoteOther    NVLinkRemote = "other" // IBMNPU, unknown
)

// NVLink is one NVLink of a GPU, as NVML reports it.
type NVLink struct {
	Link        int          `json:"link"`
	Active      bool         `json:"active"`                  // GetNvLinkState
	Version     int          `json:"version,omitempty"`       // GetNvLinkVersion
	RemoteBusID string       `json:"remote_bus_id,omitempty"` // GetNvLinkRemotePciInfo, normalized
	RemoteType  NVLinkRemote `json:"remote_type,omitempty"`   // GetNvLinkRemoteDeviceType
}

// NVMLInfo says what the NVML source answered as a whole.
type NVMLInfo struct {
	// Source is "live", "replay" (DIR/nvml.json) or "none".
	Source string `json:"source"`
	Error  string `json:"error,omitempty"` // why Source is "none", e.g. library not found
	// Failed is set where this root has an NVML (the live library under
	// "/", nvml.json elsewhere) that could not be used: Init or
	// DeviceGetCount failed (ERROR_LIB_RM_VERSION_MISMATCH after a driver
	// upgrade without a reboot, ERROR_DRIVER_NOT_LOADED, the library not
	// found on a live root, ...), or nvml.json is unreadable or invalid.
	// Only a replayed root without nvml.json has no NVML and no failure.
	Failed        bool   `json:"failed,omitempty"`
	DriverVersion string `json:"driver_version,omitempty"`
	NVMLVersion   string `json:"nvml_version,omitempty"`
	CUDAVersion   int    `json:"cuda_version,omitempty"`
}

// Fabric is how a NIC carries GPU traffic.
type Fabric string

const (
	FabricInfiniBand Fabric = "infiniband"
	FabricRoCE       Fabric = "roce"
	FabricEFA        Fabric = "efa"
	FabricEthernet   Fabric = "ethernet" // no RDMA device
)

// RDMA reports whether the fabric is an RDMA fabric.
func (f Fabric) RDMA() bool { return f == FabricInfiniBand || f == FabricRoCE || f == FabricEFA }

// Role is what a NIC is for on the node (docs/topology-json.md, "Roles").
// A port's health is never a role: a compute NIC with a port down is a
// compute NIC with a failed port.
type Role string

const (
	// RoleCompute NICs carry GPU traffic between nodes (NCCL_IB_HCA).
	RoleCompute Role = "compute"
	// RoleStorage NICs carry data and checkpoints (storage fabric, in-band
	// data), never collectives.
	RoleStorage Role = "storage"
	// RoleFrontend NICs hold the default route: SSH, the job's bootstrap
	// sockets, management access.
	RoleFrontend Role = "frontend"
	// RoleManagement NICs manage a fabric (NVSwitch-side ports that serve
	// the NVLink subnet manager); no data crosses them.
	RoleManagement Role = "management"
	// RoleOther is everything else (Ethernet without RDMA off the default
	// route, NICs excluded on the command line).
	RoleOther Role = "other"
)

// NIC is one RDMA device, or one netdev of a network PCI function where
// the function has no RDMA device. A RoCE LAG (mlx5: one RDMA device,
// mlx5_bond_N, for a bond of an adapter's ports) is one NIC: its netdev
// is the bond, its members are listed in Bond, never as NICs.
type NIC struct {
	Name       string   `json:"name"`                  // RDMA device, else netdev
	RDMADevice string   `json:"rdma_device,omitempty"` // class/infiniband/<name>
	Netdevs    []string `json:"netdevs"`               // class/net entries of the function (or ports' ndevs); a RoCE LAG's bond
	BusID      string   `json:"bus_id"`
	Vendor     string   `json:"vendor"` // PCI vendor
	Device     string   `json:"device"` // PCI device
	Driver     string   `json:"driver"` // PCI function's driver
	Fabric     Fabric   `json:"fabric"`
	Role       Role     `json:"role"`
	// Roles lists every purpose the NIC serves, Role first; a port with one
	// purpose has Roles == [Role].
	Roles []Role `json:"roles"`
	// RoleReason says which signals or flag decided the role.
	RoleReason string `json:"role_reason"`
	// CapabilityGbps is the most one port of the NIC can carry: the
	// adapter's maximum port rate (by PCI id), or the best ACTIVE port rate
	// or up interface speed where higher, else what its PCIe link can
	// carry; never the rate a down port reports. 0 when nothing tells.
	CapabilityGbps float64    `json:"capability_gbps,omitempty"`
	NUMANode       *int       `json:"numa_node"`
	LocalCPUs      cpuset.Set `json:"local_cpus"`
	// Virtual is set for a VF (physfn link present).
	Virtual         bool        `json:"virtual,omitempty"`
	FirmwareVersion string      `json:"firmware_version,omitempty"` // class/infiniband/<dev>/fw_ver
	NodeGUID        string      `json:"node_guid,omitempty"`        // class/infiniband/<dev>/node_guid
	Ports           []Port      `json:"ports"`
	Interfaces      []Interface `json:"interfaces"`
	// DataDirect is the NIC's ConnectX-8 Data Direct DMA function, where
	// it has one and it could be tied to the NIC: NCCL moves the NIC's
	// data through it (NCCL_IB_DATA_DIRECT, default 1), so path classes,
	// pairs and the NCCL XML place the NIC there (datadirect.go).
	DataDirect *DataDirect `json:"data_direct,omitempty"`
	// Bond is set on a RoCE LAG NIC: the bond its RDMA device serves and
	// the bond's members (the adapter's ports' netdevs). Nil otherwise.
	Bond *Bond `json:"bond,omitempty"`
}

// DataPathBusID is the function the NIC's data moves through: its Data
// Direct function where it has one, else its own.
func (n NIC) DataPathBusID() string {
	if n.DataDirect != nil {
		return n.DataDirect.BusID
	}
	return n.BusID
}

// Bond is the kernel bond of a RoCE LAG NIC (drivers/net/ethernet/
// mellanox/mlx5/core/lag): the RDMA device sits on the adapter's first
// PF, its GIDs and addresses on the bond; the members carry no address
// and, but for the first PF, no RDMA device of their own.
type Bond struct {
	Name    string       `json:"name"`           // the bond netdev (class/net/<name>/bonding)
	Mode    string       `json:"mode,omitempty"` // bonding/mode, "802.3ad 4"
	Members []BondMember `json:"members"`        // bonding/slaves, in the bond's order
}

// BondMember is one netdev enslaved to a RoCE LAG's bond.
type BondMember struct {
	BusID string `json:"bus_id"` // the member's PCI function
	Interface
}

// NCCLBusID is the bus id NCCL names the NIC by. NCCL's IB plugin
// (InfiniBand and RoCE) reports function 0 and, with NCCL_IB_MERGE_VFS=1
// (the default), device 00: every port and VF of one adapter is one NIC at
// dddd:bb:00.0. EFA (aws-ofi-nccl) and socket/gVNIC NICs keep their own
// function (AWS's p4d file places the EFA at 0000:10:1b.0).
//
// A NIC with a Data Direct function is at that function: NCCL exposes the
// device as <name>_dma with the DMA function's sysfs path.
func (n NIC) NCCLBusID() string {
	if n.DataDirect != nil {
		return n.DataDirect.BusID
	}
	i := strings.LastIndexByte(n.BusID, ':')
	if (n.Fabric != FabricInfiniBand && n.Fabric != FabricRoCE) || i < 0 {
		return n.BusID
	}
	return n.BusID[:i] + ":00.0"
}

// RateGbps is the NIC's best port rate (0 when no port reports one).
func (n NIC) RateGbps() float64 {
	var r float64
	for _, p := range n.Ports {
		r = max(r, p.RateGbps)
	}
	for _, i := range n.Interfaces {
		if i.SpeedMbps > 0 {
			r = max(r, float64(i.SpeedMbps)/1000)
		}
	}
	return r
}

// Port is one RDMA port.
type Port struct {
	Port        int     `json:"port"`
	State       string  `json:"state"`      // ports/N/state text, "ACTIVE"
	StateID     int     `json:"state_id"`   // ports/N/state number, 4
	PhysState   string  `json:"phys_state"` // ports/N/phys_state text, "LinkUp"
	PhysStateID int     `json:"phys_state_id"`
	RateGbps    float64 `json:"rate_gbps"`  // ports/N/rate
	LinkLayer   string  `json:"link_layer"` // ports/N/link_layer
	Netdev      string  `json:"netdev,omitempty"`
	GIDs        []GID   `json:"gids,omitempty"` // Ethernet link layer only
}

// Up reports whether the port passes traffic: state ACTIVE and, where a
// physical state is reported, LinkUp.
func (p Port) Up() bool { return p.StateID == 4 && (p.PhysStateID == 0 || p.PhysStateID == 5) }

// Known reports whether the port's state was read at all.
func (p Port) Known() bool { return p.StateID != 0 || p.State != "" }

// Health says what is wrong with the port ("DOWN/Polling"); "" when Up
// or when its state could not be read.
func (p Port) Health() string {
	if p.Up() || !p.Known() {
		return ""
	}
	return orWord(p.State, "unknown state") + "/" + orWord(p.PhysState, "unknown physical state")
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// DownPorts describes each port of the NIC that does not pass traffic
// ("port 1 DOWN/Polling"), or, for a NIC without RDMA ports, each netdev
// whose operstate is known and not up ("netdev eth1 down").
func (n NIC) DownPorts() []string {
	var out []string
	if len(n.Ports) > 0 {
		for _, p := range n.Ports {
			if h := p.Health(); h != "" {
				out = append(out, fmt.Sprintf("port %d %s", p.Port, h))
			}
		}
		return out
	}
	for _, i := range n.Interfaces {
		if i.OperState != "" && i.OperState != "up" {
			out = append(out, fmt.Sprintf("netdev %s %s", i.Name, i.OperState))
		}
	}
	return out
}

// Healthy reports whether the NIC can carry traffic: some RDMA port is
// up or of unknown state, or (without RDMA ports) some netdev is up or of
// unknown state.
func (n NIC) Healthy() bool {
	if len(n.Ports) > 0 {
		for _, p := range n.Ports {
			if p.Up() || !p.Known() {
				return true
			}
		}
		return false
	}
	if len(n.Interfaces) == 0 {
		return true
	}
	for _, i := range n.Interfaces {
		if i.OperState == "" || i.OperState == "up" {
			return true
		}
	}
	return false
}

// UpRateGbps is the rate of the NIC's best RDMA port that is up; 0 when
// none is (a down port's rate file says nothing of the link).
func (n NIC) UpRateGbps() float64 {
	var r float64
	for _, p := range n.Ports {
		if p.Up() {
			r = max(r, p.RateGbps)
		}
	}
	return r
}

// HasRole reports whether the NIC serves role r (its Role or one of Roles).
func (n NIC) HasRole(r Role) bool { return n.Role == r || slices.Contains(n.Roles, r) }

// GID is one populated GID table entry of a RoCE port.
type GID struct {
	Index  int    `json:"index"`
	GID    string `json:"gid"`              // ports/N/gids/I
	Type   string `json:"type"`             // gid_attrs/types/I: "RoCE v2", "IB/RoCE v1"
	Netdev string `json:"netdev,omitempty"` // gid_attrs/ndevs/I
}

// Interface is one netdev of a NIC.
type Interface struct {
	Name      string `json:"name"`
	OperState string `json:"operstate,omitempty"`  // operstate (netlink under root /)
	MTU       int    `json:"mtu,omitempty"`        // mtu
	SpeedMbps int    `json:"speed_mbps,omitempty"` // speed; 0 when unknown
	Address   string `json:"address,omitempty"`    // address (MAC)
	// Master is the interface this one is enslaved to (a bond or bridge;
	// Azure's netvsc for its accelerated-networking VF): the basename of
	// the master link; "" when none.
	Master string `json:"master,omitempty"`
	// MasterKind is "bond" or "bridge" where the master's sysfs directory
	// says so; "" otherwise (netvsc, unknown).
	MasterKind string `json:"master_kind,omitempty"`
	// IPv4 are the interface's IPv4 addresses in CIDR form
	// ("10.10.1.5/16"): netlink on a live root, the recorded
	// addresses.json elsewhere.
	IPv4 []string `json:"ipv4,omitempty"`
}

// UnsupportedWarning is the warning every command gives when the bus
// shows accelerators gpuaffinity does not drive (as, of a node with gpus
// GPUs); "" when there are none.
func UnsupportedWarning(as []Accelerator, gpus int) string {
	if len(as) == 0 {
		return ""
	}
	kinds := map[string]int{}
	var order []string
	for _, a := range as {
		k := a.Name
		if k == "" {
			k = "class " + a.Class
		}
		k = fmt.Sprintf("%s (%s:%s, driver %s)", k, strings.TrimPrefix(a.Vendor, "0x"), strings.TrimPrefix(a.Device, "0x"), orWord(a.Driver, "none"))
		if kinds[k] == 0 {
			order = append(order, k)
		}
		kinds[k]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d× %s", kinds[k], k))
	}
	buses := make([]string, 0, len(as))
	for _, a := range as {
		buses = append(buses, a.BusID)
	}
	return fmt.Sprintf("%d accelerator(s) on the PCI bus are not supported yet: %s at %s; they are not among the %d GPU(s) gpuaffinity reports, pairs, binds or checks (NIC roles still follow their places)",
		len(as), strings.Join(parts, ", "), strings.Join(buses, " "), gpus)
}
