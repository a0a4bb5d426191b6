// Package kfd reads AMD GPUs as the kernel's amdkfd driver lays them
// out under a root: the topology under sys/class/kfd/kfd/topology (one
// numbered node per CPU NUMA node and per GPU, each with gpu_id, name,
// a "key value" properties file and its io_links and p2p_links), and,
// for each GPU node, amdgpu's attributes of its PCI function under
// sys/bus/pci/devices/<address> (XGMI device and hive ids, the render
// node, the compute and memory partition modes, and the health counters:
// ras/<block>_err_count, ras/features, xgmi_num_links and
// pcie_replay_count, in DRM.Health; ReadHealth reads them by address).
// xgmi_error is read only by ReadXGMIError, on purpose: a read clears it.
// PeerMemory reports amdkfd's peer-memory client. This is the sysfs that
// RCCL reads its topology from by default (ROCm/rccl src/misc/
// alt_rsmi.cc) and rocm-smi --showtopo prints: io_link type 11 is XGMI,
// 2 PCIe; weight 15 per XGMI hop, 20 for PCIe.
//
// The layout is the kernel's: drivers/gpu/drm/amd/amdkfd/kfd_topology.c
// (node_show, iolink_show, sysprops_show, kfd_topology_add_device),
// kfd_crat.c and kfd_crat.h (link types, weights, flags),
// drivers/gpu/drm/amd/amdgpu/amdgpu_xgmi.c (xgmi_device_id,
// xgmi_physical_id, xgmi_hive_info), amdgpu_gfx.c and amdgpu_gmc.c
// (current_compute_partition, current_memory_partition), amdgpu_xcp.c
// (the render nodes of partitions).
//
// It is a source: it hands plain values up and never imports the model
// or another source but pci (for the address type). Every file is read
// through internal/rootfs: bounded, never blocking on a FIFO, never
// following a link out of the root.
//
// Error contract. ReadTopology returns what it could read and a list of
// errors, each naming its file:
//   - no sys/class/kfd/kfd/topology/nodes (no amdkfd loaded, no AMD GPU):
//     an empty Topology and no error;
//   - a GPU node whose files answer EPERM: the caller's device cgroup
//     does not grant that GPU (KFD checks it on every read,
//     kfd_devcgroup_check_permission). The node is kept with Denied set
//     and one error wrapping ErrDenied and fs.ErrPermission; never a
//     GPU silently missing;
//   - a file that is a FIFO, a device, garbage, or past its bound: an
//     error wrapping the cause, the node kept with what did parse;
//   - more than MaxNodes nodes or MaxLinks links in a directory: the
//     first ones are read, and an error says so;
//   - a link to a node that does not exist, a link count that
//     disagrees with io_links_count or p2p_links_count, a render minor
//     that KFD and DRM disagree on (ErrMismatch): an error; the values
//     read are kept as read.
//
// Deciding what the links mean (which GPUs form an XGMI clique, which
// NIC is nearest a GPU) belongs to the model, not here.
package kfd
