// Package discover is the one place that calls every source (pci, numa,
// rdma, platform, nvml, netlink) with one root and assembles a
// topology.Node: GPUs matched to NVML by PCI address, NICs built from
// network PCI functions with their RDMA devices and netdevs, NUMA nodes,
// sockets and cores, then paths, roles and pairs (topology.Link).
//
// Discovery is a pure function of the root directory (plus live NVML and
// netlink answers when the root is "/"). It never fails on bad hardware
// data: every missing, unreadable or garbage file, every device that
// vanished mid-read and every NVML failure becomes a warning in
// Node.Warnings naming the file or device. It fails only when the root has
// no PCI bus to read at all.
package discover
