package nccl

import (
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// tcpx adds Google's GPUDirect-TCPX (a3-highgpu-8g: one NIC per two GPUs)
// or TCPXO (a3-megagpu-8g: one NIC per GPU) interface variables. Tuning
// is left to Google's own profile.
func (b *envBuilder) tcpx(front string, gve []topology.NIC) {
	n := b.n
	isGVE := map[string]bool{}
	for _, nic := range gve {
		isGVE[nic.Name] = true
	}
	var ifnames []string
	for _, g := range n.GPUs {
		for _, name := range envPairNICs(n, g.Index) {
			nic, ok := envNIC(n, name)
			if !ok || !isGVE[name] {
				continue
			}
			for _, nd := range nic.Netdevs {
				if !slices.Contains(ifnames, nd) && b.listable(nd) != "" {
					ifnames = append(ifnames, nd)
				}
			}
		}
	}
	it := n.Platform.InstanceType
	var prefix, ifVar string
	switch {
	case strings.HasPrefix(it, "a3-megagpu"), it == "" && len(gve) >= len(n.GPUs):
		prefix, ifVar = "NCCL_FASTRAK_CTRL_DEV", "NCCL_FASTRAK_IFNAME"
	case strings.HasPrefix(it, "a3-highgpu"), it == "" && 2*len(gve) == len(n.GPUs):
		prefix, ifVar = "NCCL_GPUDIRECTTCPX_CTRL_DEV", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"
	default:
		b.warn("%d gVNIC data NICs for %d GPUs (instance type %q) match neither GPUDirect-TCPXO (one per GPU) nor TCPX (one per two GPUs): no plugin variables set",
			len(gve), len(n.GPUs), it)
		return
	}
	if front != "" {
		b.set(prefix, front)
	} else {
		b.warn("%s not set: no front-end interface", prefix)
	}
	if len(ifnames) > 0 {
		b.set(ifVar, strings.Join(ifnames, ","))
	} else {
		b.warn("%s not set: no GPU is paired with a gVNIC data NIC", ifVar)
	}
}

// envGVNICs returns the compute NICs that are Google gVNICs (driver gve
// or PCI id 1ae0:0042) without RDMA: GPUDirect-TCPX(O) data NICs.
func envGVNICs(n topology.Node) []topology.NIC {
	var out []topology.NIC
	for _, nic := range envComputeNICs(n, topology.FabricEthernet) {
		if nic.RDMADevice == "" && (nic.Driver == "gve" || (nic.Vendor == "0x1ae0" && nic.Device == "0x0042")) {
			out = append(out, nic)
		}
	}
	return out
}
