//go:build linux

package rdma

import (
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
)

type liveNetlink struct {
	h *netlink.Handle
}

// NewNetlink returns the netlink source of the calling process's network
// namespace. Close releases its socket.
func NewNetlink() (Netlink, func(), error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, nil, fmt.Errorf("open netlink: %w", err)
	}
	return liveNetlink{h: h}, h.Close, nil
}

// NewNetlinkAt wraps an existing handle (one opened in another network
// namespace with netlink.NewHandleAt).
func NewNetlinkAt(h *netlink.Handle) Netlink { return liveNetlink{h: h} }

func (l liveNetlink) LinkState(name string) (LinkState, error) {
	link, err := l.h.LinkByName(name)
	if err != nil {
		return LinkState{}, err
	}
	a := link.Attrs()
	// netlink spells "lower-layer-down", sysfs "lowerlayerdown": use sysfs's form.
	return LinkState{OperState: strings.ReplaceAll(a.OperState.String(), "-", ""), MTU: a.MTU}, nil
}

func (l liveNetlink) IPv4(name string) ([]string, error) {
	link, err := l.h.LinkByName(name)
	if err != nil {
		return nil, err
	}
	addrs, err := l.h.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", name, err)
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if a.IPNet != nil {
			out = append(out, a.IPNet.String())
		}
	}
	return out, nil
}
