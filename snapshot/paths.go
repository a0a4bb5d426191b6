package snapshot

import "strings"

// This file is the allowlist: every file a snapshot may hold is named here,
// nothing else is ever read. Patterns are slash-separated, relative to the
// scope's directory; each component is a path.Match pattern, and
// {a,b,c} lists alternatives. Who reads each entry is said beside it:
// "discovery" is gpuaffinity's own (pci/, numa/, rdma/, nvml/ readers),
// "hwloc" is HWLOC_FSROOT, "node_exporter" is --path.sysfs/--path.procfs,
// "ghw" is GHW_CHROOT.

// scope is the kind of directory a rule's pattern is relative to.
type scope int

const (
	scopeRoot   scope = iota // the source root
	scopePCI                 // a PCI function's directory, and each ancestor up to sys/devices/pciDDDD:BB
	scopeNetdev              // a network interface's directory (under a PCI function or sys/devices/virtual/net)
	scopeRDMA                // an RDMA device's directory (PCI function/infiniband/<ibdev>)
	scopeNVMe                // an NVMe controller's directory (PCI function/nvme/nvmeN)
	scopeSubsys              // an NVMe subsystem's directory (sys/devices/virtual/nvme-subsystem/nvme-subsysN)
	scopeBlock               // a block device's directory (a namespace, partition, md or dm device)
)

func (s scope) String() string {
	return [...]string{"root", "pci", "netdev", "rdma", "nvme", "nvme-subsystem", "block"}[s]
}

// action is what a rule does with what its pattern matches.
type action int

const (
	copyFile   action = iota // regular files: read (bounded) and copied
	copyLink                 // symlinks: copied as their exact text, never followed
	linkMkdir                // symlinks: copied; an empty directory is made at the target so the link resolves
	followLink               // symlinks: copied, and the target directory visited in rule.into
	enterDir                 // real directories: visited in rule.into
	keepDir                  // real directories: made empty, for their presence alone
	// copyVPD: a PCI function's vpd, only of a ConnectX-8 PF or Data
	// Direct function (pci.WantsVPD): parsed, and re-encoded with its name
	// and V3 keyword alone (the serial and every other keyword left out;
	// V3 replaced by a keyed digest under --scrub, the same for every
	// function of one adapter, so the tie still reads back).
	copyVPD
	// describeNode: character device nodes, never opened: recorded as a
	// regular file holding "c MAJOR:MINOR" (what a replayed root holds in
	// their place, discover/imex.go); a regular file already in that form
	// (a snapshot of a snapshot) is copied.
	describeNode
)

// scrubKind says how Options.Scrub rewrites a file (scrub.go).
type scrubKind int

const (
	scrubNone     scrubKind = iota
	scrubAddress            // netdev hardware address: MAC, or IPoIB's 20 bytes
	scrubGUID               // xxxx:xxxx:xxxx:xxxx
	scrubGID                // 8 groups of 4 hex digits
	scrubHostname           // host-<hex>
	scrubAssetTag           // only when it looks like a serial
	scrubUUIDs              // every GPU-/MIG- UUID in the text
	scrubSerial             // a drive's serial number: same length, every letter and digit replaced
)

const (
	attrLimit = 64 << 10 // sysfs attributes are a page at most
	procLimit = 4 << 20  // cpuinfo on a 256-CPU host is ~400 KiB
)

// rule is one allowlist entry.
type rule struct {
	scope   scope
	pattern string
	action  action
	into    scope // for followLink and enterDir
	limit   int64 // for copyFile; 0 means attrLimit
	scrub   scrubKind
	// flat stores the file at its logical path instead of the link-resolved
	// one and records no links on the way: /proc/self and /proc/mounts are
	// links to this process's pid on a live node, and must be plain
	// proc/self/status and proc/mounts in a snapshot.
	flat bool
}

var rules = []rule{
	// --- Root: the entry points. ---

	// discovery, hwloc, ghw, lspci: one link per PCI function; the target's
	// path is the PCI tree.
	{scope: scopeRoot, pattern: "sys/bus/pci/devices/*", action: followLink, into: scopePCI},
	// discovery (NICs, netdev names), node_exporter: one link per interface.
	{scope: scopeRoot, pattern: "sys/class/net/*", action: followLink, into: scopeNetdev},
	// discovery (RDMA devices, ports, GIDs), node_exporter: one link per device.
	{scope: scopeRoot, pattern: "sys/class/infiniband/*", action: followLink, into: scopeRDMA},

	// discovery, hwloc: which CPUs exist and are online.
	{scope: scopeRoot, pattern: "sys/devices/system/cpu/{online,offline,possible,present,kernel_max}", action: copyFile},
	// hwloc, discovery: per-CPU hotplug state (cpu0 usually has none).
	{scope: scopeRoot, pattern: "sys/devices/system/cpu/cpu[0-9]*/online", action: copyFile},
	// hwloc, discovery, ghw: cores, packages, dies, SMT siblings.
	{scope: scopeRoot, pattern: "sys/devices/system/cpu/cpu[0-9]*/topology/*", action: copyFile},
	// hwloc, ghw: caches (hwloc builds L1-L3 objects from these; not in the
	// original brief, added so hwloc reads a snapshot as it reads the node).
	{scope: scopeRoot, pattern: "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/{level,type,size,id,shared_cpu_map,shared_cpu_list,coherency_line_size,ways_of_associativity,number_of_sets,physical_line_partition}", action: copyFile},

	// discovery, hwloc, ghw: NUMA node sets.
	{scope: scopeRoot, pattern: "sys/devices/system/node/{online,possible,has_cpu,has_memory,has_normal_memory}", action: copyFile},
	// discovery, hwloc, ghw: per node CPUs, distances, memory.
	{scope: scopeRoot, pattern: "sys/devices/system/node/node[0-9]*/{cpulist,cpumap,distance,meminfo}", action: copyFile},
	// ghw (needs the folder), discovery: hugepage pools per node.
	{scope: scopeRoot, pattern: "sys/devices/system/node/node[0-9]*/hugepages/*/*", action: copyFile},
	// hwloc: initiators of CPU-less (GPU or CXL memory) nodes, links to nodes.
	{scope: scopeRoot, pattern: "sys/devices/system/node/node[0-9]*/access[01]/initiators/*", action: copyLink},
	// hwloc: the initiators' bandwidth and latency beside those links.
	{scope: scopeRoot, pattern: "sys/devices/system/node/node[0-9]*/access[01]/initiators/*", action: copyFile},
	// ghw: CPUs of a node as links (not in the original brief; ghw's
	// topology reads cores through them).
	{scope: scopeRoot, pattern: "sys/devices/system/node/node[0-9]*/cpu[0-9]*", action: copyLink},

	// discovery (cloud and machine type), health: what the machine is.
	// Never product_serial, board_serial, chassis_serial or product_uuid.
	{scope: scopeRoot, pattern: "sys/class/dmi/id/{sys_vendor,product_name,product_version,board_vendor,board_name,chassis_vendor}", action: copyFile},
	// health (RCCL skips its iommu=pt advice on Hyper-V, whose firmware
	// says "Hyper-V UEFI Release" here).
	{scope: scopeRoot, pattern: "sys/class/dmi/id/bios_version", action: copyFile},
	// discovery (kfd: AMD GPUs): KFD's topology, a link to
	// sys/devices/virtual/kfd/kfd, and its nodes and links.
	{scope: scopeRoot, pattern: "sys/class/kfd/kfd", action: linkMkdir},
	{scope: scopeRoot, pattern: "sys/devices/virtual/kfd/kfd/topology/{generation_id,system_properties}", action: copyFile},
	{scope: scopeRoot, pattern: "sys/devices/virtual/kfd/kfd/topology/nodes/*/{gpu_id,name,properties}", action: copyFile},
	{scope: scopeRoot, pattern: "sys/devices/virtual/kfd/kfd/topology/nodes/*/{io_links,p2p_links}/*/properties", action: copyFile},
	// discovery (ROCm): the amdgpu module's version (DKMS) and amdkfd's
	// peer-memory client.
	{scope: scopeRoot, pattern: "sys/module/amdgpu/version", action: copyFile, flat: true},
	{scope: scopeRoot, pattern: "sys/kernel/mm/memory_peers/amdkfd/version", action: copyFile},
	{scope: scopeRoot, pattern: "sys/kernel/memory_peers/amdkfd/version", action: copyFile},
	{scope: scopeRoot, pattern: "sys/memory_peers/amdkfd/version", action: copyFile},
	// discovery (Azure and OCI mark themselves here).
	{scope: scopeRoot, pattern: "sys/class/dmi/id/chassis_asset_tag", action: copyFile, scrub: scrubAssetTag},

	// hwloc, ghw, discovery: CPU model and flags; memory totals.
	{scope: scopeRoot, pattern: "proc/{cpuinfo,meminfo}", action: copyFile, limit: procLimit, flat: true},
	// hwloc (Cpus_allowed, Mems_allowed), discovery: this process's affinity.
	{scope: scopeRoot, pattern: "proc/self/status", action: copyFile, limit: procLimit, flat: true},
	// hwloc (cgroup mounts for allowed CPUs).
	{scope: scopeRoot, pattern: "proc/mounts", action: copyFile, limit: procLimit, flat: true},
	// discovery (node name in reports).
	{scope: scopeRoot, pattern: "proc/sys/kernel/hostname", action: copyFile, flat: true, scrub: scrubHostname},
	// Discovery: the NCCL topology files Azure's HPC images install, taken
	// as the authority for PCIe placement on Azure.
	{scope: scopeRoot, pattern: "opt/microsoft/*/topo.xml", action: copyFile, limit: procLimit, flat: true},
	// Discovery: the static NCCL topology files aws-ofi-nccl installs
	// (p4d, p4de, g5), the authority for PCIe placement on those instances.
	{scope: scopeRoot, pattern: "opt/amazon/{ofi-nccl,aws-ofi-nccl}/share/aws-ofi-nccl/xml/*.xml", action: copyFile, limit: procLimit, flat: true},
	// Discovery (net_plugins): Google's gIB plugin marks itself with this
	// script; env sets Google's profile where it is installed.
	{scope: scopeRoot, pattern: "usr/local/gib/scripts/set_nccl_env.sh", action: copyFile, flat: true},
	// Discovery (kernel; health's topo.gdr): the kernel release and which
	// of discover.KernelModules (and mlx5_core) are loaded: the module's
	// directory, present for a built-in module too (no initstate then).
	{scope: scopeRoot, pattern: "proc/sys/kernel/osrelease", action: copyFile, flat: true},
	{scope: scopeRoot, pattern: "sys/module/{amdgpu,efa,ib_core,ib_uverbs,mlx5_core,mlx5_ib,nvidia,nvidia_fs,nvidia_peermem,nvidia_uvm}", action: keepDir, flat: true},
	{scope: scopeRoot, pattern: "sys/module/{amdgpu,efa,ib_core,ib_uverbs,mlx5_core,mlx5_ib,nvidia,nvidia_fs,nvidia_peermem,nvidia_uvm}/initstate", action: copyFile, flat: true},
	// Discovery (the front-end interface: the default route's). Addresses
	// in it are IPs, which scrub does not touch (docs/snapshot.md).
	{scope: scopeRoot, pattern: "proc/net/route", action: copyFile, limit: procLimit, flat: true},
	// discovery, health: driver version.
	{scope: scopeRoot, pattern: "proc/driver/nvidia/version", action: copyFile, flat: true},
	// discovery, health: the driver version where NVML is absent.
	{scope: scopeRoot, pattern: "sys/module/nvidia/version", action: copyFile, flat: true},
	// discovery, health: per-GPU model, bus location, UUID.
	{scope: scopeRoot, pattern: "proc/driver/nvidia/gpus/*/information", action: copyFile, flat: true, scrub: scrubUUIDs},
	// discovery (gpu_numa_id where NVML does not answer), hwloc (the
	// GPU memory nodes it hides): the NUMA node of a coherent GPU's
	// memory and its online status; only on Grace-class platforms.
	{scope: scopeRoot, pattern: "proc/driver/nvidia/gpus/*/numa_status", action: copyFile, flat: true},

	// --- Storage (storage/, discover/storage.go). ---

	// discovery (storage.nvme): one link per NVMe controller; the target
	// is below its PCI function (or sys/devices/virtual/nvme-fabrics for
	// NVMe over fabrics).
	{scope: scopeRoot, pattern: "sys/class/nvme/*", action: followLink, into: scopeNVMe},
	// No reader of gpuaffinity's yet: one link per NVMe subsystem, with
	// its controllers' links and I/O policy, so a snapshot shows how
	// native multipath grouped the controllers (its heads are block
	// devices, copied through sys/class/block).
	{scope: scopeRoot, pattern: "sys/class/nvme-subsystem/*", action: followLink, into: scopeSubsys},
	// discovery (which NVMe a mount sits on): one link per block device,
	// walked through partitions, md and device-mapper slaves.
	{scope: scopeRoot, pattern: "sys/class/block/*", action: followLink, into: scopeBlock},
	// discovery (storage.gds.iommu.units): the IOMMU units; their target
	// folders are made empty so the links resolve.
	{scope: scopeRoot, pattern: "sys/class/iommu/*", action: linkMkdir},
	// discovery (storage.gds.iommu.group_types): each IOMMU group's
	// default domain type, which a PCI function's iommu_group link names.
	{scope: scopeRoot, pattern: "sys/kernel/iommu_groups/*/type", action: copyFile},
	// discovery (storage.gds.iommu.cmdline): iommu=, intel_iommu=... A
	// root=UUID= in it is scrubbed as UUIDs are.
	{scope: scopeRoot, pattern: "proc/cmdline", action: copyFile, flat: true, scrub: scrubUUIDs},
	// discovery (storage.gds.nvidia_fs): the nvidia-fs driver's folder,
	// present while it is loaded, and its version line.
	{scope: scopeRoot, pattern: "proc/driver/nvidia-fs", action: keepDir, flat: true},
	{scope: scopeRoot, pattern: "proc/driver/nvidia-fs/version", action: copyFile, flat: true},
	// discovery (nvlink_fabric.imex): the driver's character device
	// majors (nvidia-caps-imex-channels), the IMEX channel nodes as
	// "c MAJOR:MINOR" descriptions, and the IMEX daemon's config and node
	// list where installed (the default IMEX_NODE_CONFIG_FILE only).
	{scope: scopeRoot, pattern: "proc/devices", action: copyFile, flat: true},
	{scope: scopeRoot, pattern: "dev/nvidia-caps-imex-channels/channel[0-9]*", action: describeNode, flat: true},
	{scope: scopeRoot, pattern: "etc/nvidia-imex/{config.cfg,nodes_config.cfg}", action: copyFile, flat: true},
	// discovery (storage.gds.nvme_multipath): native NVMe multipath.
	{scope: scopeRoot, pattern: "sys/module/nvme_core/parameters/multipath", action: copyFile, flat: true},

	// --- PCI function (and each ancestor bridge). ---

	// discovery, hwloc, ghw, lspci: identity, NUMA locality, link state.
	// config is copied whole, as far as it reads: 4096 bytes for a PCIe
	// function read as root, 256 for conventional PCI, 64 unprivileged.
	// hwloc needs the header type and bus numbers to see bridges;
	// discovery's ACS reader (pci.readACS) needs the extended space, so a
	// snapshot taken without root reads back as ACS "unknown", as the node
	// did to that user. Never resource*, rom, vpd, remove, reset, rescan:
	// large, write-only or with side effects.
	{scope: scopePCI, pattern: "{vendor,device,class,subsystem_vendor,subsystem_device,revision,numa_node,local_cpulist,local_cpus,current_link_speed,current_link_width,max_link_speed,max_link_width,modalias,enable,irq,config}", action: copyFile},
	// discovery (the NIC's Data Direct function): what ties a ConnectX-8
	// PF to its Data Direct function, and nothing else of the VPD.
	{scope: scopePCI, pattern: "vpd", action: copyVPD},
	// discovery (driver name), ghw: the link, and an empty driver folder
	// under sys/bus/pci/drivers/ so that it resolves.
	{scope: scopePCI, pattern: "driver", action: linkMkdir},
	// discovery: a virtual function's physical function.
	{scope: scopePCI, pattern: "physfn", action: copyLink},
	// discovery: the netdevs of a PCI function.
	{scope: scopePCI, pattern: "net/*", action: enterDir, into: scopeNetdev},
	// discovery: the RDMA devices of a PCI function.
	{scope: scopePCI, pattern: "infiniband/*", action: enterDir, into: scopeRDMA},
	// discovery (storage.gds.iommu.group_types): the function's IOMMU
	// group, a link to sys/kernel/iommu_groups/N (whose type the root
	// rule copies).
	{scope: scopePCI, pattern: "iommu_group", action: copyLink},

	// discovery (kfd: AMD GPUs): amdgpu's XGMI identity, partition
	// modes, render node, RAS and PCIe replay counts. Never xgmi_error:
	// reading it clears the counter (amdgpu_xgmi.c).
	{scope: scopePCI, pattern: "{xgmi_device_id,xgmi_physical_id,xgmi_num_links,current_compute_partition,current_memory_partition,pcie_replay_count}", action: copyFile},
	// the hive directory: real under the hive's first GPU, a link to it
	// from the others (amdgpu_xgmi_sysfs_add_dev_info).
	{scope: scopePCI, pattern: "xgmi_hive_info", action: copyLink},
	{scope: scopePCI, pattern: "xgmi_hive_info/xgmi_hive_id", action: copyFile},
	{scope: scopePCI, pattern: "drm/renderD[0-9]*", action: keepDir},
	{scope: scopePCI, pattern: "ras/{features,*_err_count}", action: copyFile},

	// --- NVMe controller. ---

	// discovery (storage.nvme): identity, transport, state, locality.
	// Never subsysnqn: it embeds the serial.
	{scope: scopeNVMe, pattern: "{model,firmware_rev,transport,address,state,numa_node}", action: copyFile},
	// discovery: the drive's serial, an identifier like a GPU UUID.
	{scope: scopeNVMe, pattern: "serial", action: copyFile, scrub: scrubSerial},
	// discovery: the controller's parent device (its PCI function).
	{scope: scopeNVMe, pattern: "device", action: linkMkdir},
	// discovery: each namespace's size; nvmeXcYnZ are the hidden
	// per-controller paths of a multipath head, which sys/class/block
	// may not list.
	{scope: scopeNVMe, pattern: "nvme[0-9]*/size", action: copyFile},

	// --- NVMe subsystem. ---

	{scope: scopeSubsys, pattern: "{model,firmware_rev,iopolicy}", action: copyFile},
	{scope: scopeSubsys, pattern: "serial", action: copyFile, scrub: scrubSerial},
	// The subsystem's controllers (links into sys/class/nvme's targets).
	{scope: scopeSubsys, pattern: "nvme[0-9]*", action: copyLink},

	// --- Block device. ---

	// discovery (storage.Disks): a partition says so; sizes; an md
	// array's level.
	{scope: scopeBlock, pattern: "{partition,size,md/level}", action: copyFile},
	// discovery: the devices an md or dm device is built on, and what is
	// built on this one (links to other block devices, which
	// sys/class/block lists too).
	{scope: scopeBlock, pattern: "{slaves,holders}/*", action: copyLink},

	// --- Netdev. ---

	// discovery (NIC identity, state, MTU, speed), node_exporter.
	{scope: scopeNetdev, pattern: "address", action: copyFile, scrub: scrubAddress},
	{scope: scopeNetdev, pattern: "{operstate,mtu,speed,type,carrier,ifindex,addr_assign_type,dev_port,dev_id}", action: copyFile},
	// discovery: the netdev's parent device (its PCI function).
	{scope: scopeNetdev, pattern: "device", action: linkMkdir},
	// discovery (front end through a bond, Azure's netvsc VF): the
	// interface this one is enslaved to (a netdev under sys/class/net, so
	// the root rule visits it), and what kind of master a netdev is.
	{scope: scopeNetdev, pattern: "master", action: copyLink},
	{scope: scopeNetdev, pattern: "bonding/{slaves,mode}", action: copyFile},
	{scope: scopeNetdev, pattern: "bridge/bridge_id", action: copyFile},

	// --- RDMA device. ---

	// discovery, node_exporter (node_infiniband_info).
	{scope: scopeRDMA, pattern: "{fw_ver,node_type,hca_type,board_id}", action: copyFile},
	{scope: scopeRDMA, pattern: "{node_guid,sys_image_guid}", action: copyFile, scrub: scrubGUID},
	// discovery: the RDMA device's PCI function.
	{scope: scopeRDMA, pattern: "device", action: linkMkdir},
	// discovery (fabric, link state, rate), node_exporter.
	{scope: scopeRDMA, pattern: "ports/*/{state,phys_state,rate,link_layer,lid,sm_lid,cap_mask}", action: copyFile},
	// discovery (NCCL_IB_GID_INDEX); unpopulated GIDs read as EINVAL.
	{scope: scopeRDMA, pattern: "ports/*/gids/*", action: copyFile, scrub: scrubGID},
	// discovery: GID types (RoCE v1/v2) and their netdevs.
	{scope: scopeRDMA, pattern: "ports/*/gid_attrs/{types,ndevs}/*", action: copyFile},
	// node_exporter, exporter: port counters (small integers).
	{scope: scopeRDMA, pattern: "ports/*/{counters,hw_counters}/*", action: copyFile},
	// node_exporter, exporter: device-wide hardware counters (mlx5).
	{scope: scopeRDMA, pattern: "hw_counters/*", action: copyFile},
}

// neverRead are file names no rule may open, whatever a pattern matched:
// large (resource*, rom), write-only or with side effects when written
// (remove, reset, rescan, bind...), or identifying (serials, product_uuid).
// The table never names them; this is a second lock.
func neverRead(name string) bool {
	if strings.HasPrefix(name, "resource") {
		return true
	}
	switch name {
	case "rom", "vpd", "remove", "reset", "reset_method", "rescan", "bind", "unbind",
		"new_id", "remove_id", "driver_override", "sriov_numvfs",
		"serial_number", "product_serial", "board_serial", "chassis_serial", "product_uuid":
		return true
	}
	return false
}

// expandBraces expands {a,b} alternatives (not nested) in pattern.
func expandBraces(pattern string) []string {
	i := strings.IndexByte(pattern, '{')
	if i < 0 {
		return []string{pattern}
	}
	j := strings.IndexByte(pattern[i:], '}')
	if j < 0 {
		return []string{pattern}
	}
	j += i
	var out []string
	for _, alt := range strings.Split(pattern[i+1:j], ",") {
		out = append(out, expandBraces(pattern[:i]+alt+pattern[j+1:])...)
	}
	return out
}

// hasMeta reports whether a pattern component is a glob.
func hasMeta(comp string) bool {
	return strings.ContainsAny(comp, `*?[\`)
}
