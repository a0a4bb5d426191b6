// Package rdma reads the network side of a node under a root directory:
// RDMA devices and their ports from <root>/sys/class/infiniband (state,
// physical state, rate, link layer, the GID table of RoCE ports, firmware,
// node GUID) and netdevs from <root>/sys/class/net (the PCI function they
// belong to, operstate, MTU, speed, MAC). Devices are tied to PCI
// functions by the PCI address in their sysfs path, never by name.
//
// On a live host (root "/") a Netlink source cross-checks operstate and
// MTU: sysfs can lag a link change, netlink is what the kernel holds now.
//
// It hands plain values up and never imports the model. A device or port
// whose files are missing or garbage is kept with the unknown fields unset,
// and the problem is returned in an error list naming the file.
//
// Port state is read here and not through prometheus/procfs's
// InfiniBandClass: that call also reads every counter and hw_counter file
// of every port (hundreds of reads on a 32-NIC node), which belongs at
// scrape time in the exporter, not in discovery, and it fails a whole
// device when fw_ver is missing.
//
// At scrape time a CounterReader reads every port's state, rate,
// counters/, counters_ext/ and hw_counters/ (what node_exporter's
// infiniband collector exports, with the same values), a few ports at a
// time. A device that vanishes mid-read is skipped, and a counter file
// that answers EINVAL (ConnectX ports reserved by Fabric Manager, whose
// reads flood the kernel log) is remembered and never read again.
package rdma
