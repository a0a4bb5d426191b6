//go:build !linux

package rdma

import "errors"

// NewNetlink is not available off Linux.
func NewNetlink() (Netlink, func(), error) {
	return nil, nil, errors.New("netlink: not supported on this OS")
}
