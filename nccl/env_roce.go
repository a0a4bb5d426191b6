package nccl

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// gidIndex finds the GID index that holds a RoCE v2, IPv4-mapped address
// on every ACTIVE compute RoCE port (the lowest such index).
func (b *envBuilder) gidIndex(nics []topology.NIC) (int, bool) {
	var common []int
	first := true
	var lacking []string
	for _, nic := range nics {
		for _, p := range nic.Ports {
			if p.StateID != 4 {
				continue
			}
			var idx []int
			for _, g := range p.GIDs {
				if g.Type == "RoCE v2" && envIPv4Mapped(g.GID) {
					idx = append(idx, g.Index)
				}
			}
			if len(idx) == 0 {
				lacking = append(lacking, fmt.Sprintf("%s:%d", nic.Name, p.Port))
				continue
			}
			slices.Sort(idx)
			if first {
				common, first = idx, false
				continue
			}
			common = slices.DeleteFunc(common, func(i int) bool { return !slices.Contains(idx, i) })
		}
	}
	switch {
	case len(lacking) > 0:
		b.warn("RoCE port(s) %s have no RoCE v2 GID with an IPv4 address: NCCL_IB_GID_INDEX not set (NCCL picks one itself)", strings.Join(lacking, ", "))
		return 0, false
	case first:
		return 0, false // no active RoCE port; NCCL_IB_HCA already warned
	case len(common) == 0:
		b.warn("the compute RoCE ports hold their RoCE v2 IPv4 GIDs at different indexes: NCCL_IB_GID_INDEX not set (NCCL picks one itself)")
		return 0, false
	}
	return common[0], true
}

// envIPv4Mapped reports whether a GID ("0000:...:ffff:0a00:0001") holds an
// IPv4-mapped IPv6 address other than 0.0.0.0.
func envIPv4Mapped(gid string) bool {
	a, err := netip.ParseAddr(gid)
	if err != nil || !a.Is4In6() {
		return false
	}
	return !a.Unmap().IsUnspecified()
}
