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
// Node.Warnings naming the file or device. So does a vendor NCCL topology
// file the platform installed (Azure's /opt/microsoft/*/topo.xml,
// aws-ofi-nccl's static files) that does not fit the node: unreadable,
// malformed, naming none of its GPUs and NICs, or listing a GPU or NIC it
// does not have; that file is then not used (Node.TopoFile stays ""). It
// fails only when the root has no PCI bus to read at all, or when the file
// named in Options.TopoFile (--topo-file) is unreadable, malformed or names
// none of the node's GPUs and NICs: an error naming that file.
package discover
