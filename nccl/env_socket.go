package nccl

import (
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// frontEnds lists front, then the netdevs of the other front-end NICs
// that are up, in NIC order.
func (b *envBuilder) frontEnds(front string) []string {
	out := []string{front}
	for _, nic := range b.n.NICs {
		if nic.Role != topology.RoleFrontend {
			continue
		}
		for _, i := range nic.Interfaces {
			if i.OperState == "up" && !slices.Contains(out, i.Name) && b.listable(i.Name) != "" {
				out = append(out, i.Name)
			}
		}
	}
	return out
}

// frontEnd is the interface for NCCL's bootstrap sockets: the node's
// one answer, topology.SocketInterface (the default route's interface,
// else the front-end NIC's interface that is up and, where addresses are
// known, holds an address). Nothing else is guessed: a bond member or an
// RDMA port's netdev would carry no socket.
func (b *envBuilder) frontEnd() string {
	name, _ := topology.SocketInterface(b.n)
	if name == "" {
		what := "that is up"
		if topology.AddressesKnown(b.n) {
			what += " with an IPv4 address"
		}
		b.warn("no front-end interface found (no default route, and no Ethernet NIC without RDMA %s): NCCL_SOCKET_IFNAME not set", what)
		return ""
	}
	return b.listable(name)
}

// listable returns name, or "" with a warning where NCCL's list syntax
// cannot carry it.
func (b *envBuilder) listable(name string) string {
	if !envListable(name, ",") {
		b.warn("interface name %q contains ',', which NCCL's interface lists cannot express: not used", name)
		return ""
	}
	return name
}

// envListable reports whether name can stand in a comma list of NCCL's
// (none of the separators in seps, not empty).
func envListable(name, seps string) bool {
	return name != "" && !strings.ContainsAny(name, seps)
}
