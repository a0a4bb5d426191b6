package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/rdma"
)

// classNet lists the netdevs whose addresses are recorded.
const classNet = "sys/class/net"

// maxAddresses bounds a root's addresses.json when copied (the size
// rdma.ReadAddresses accepts).
const maxAddresses = 1 << 20

// addresses writes addresses.json (rdma.AddressesFile, schema
// rdma.AddressesSchema): the IPv4 addresses netlink gives each netdev of
// the root's sys/class/net, from opts.Netlink, else on the live root from
// this process's netlink; for another root, the root's own addresses.json
// is copied as it is, where it has one. sysfs has no per-interface IPv4
// file, so without this a snapshot would lose every address (and the
// NICs a network mount is reached through). Addresses are not scrubbed
// (docs/snapshot.md).
func (c *collector) addresses() error {
	nl := c.opts.Netlink
	source := "Options.Netlink"
	if nl == nil {
		if !rootfs.IsLive(c.opts.Root) {
			return c.copyAddresses()
		}
		live, closeFn, err := rdma.NewNetlink()
		if err != nil {
			c.warn("%s not written: %v", rdma.AddressesFile, err)
			return nil
		}
		defer closeFn()
		nl, source = live, "netlink"
	}
	a := rdma.Addresses{Schema: rdma.AddressesSchema, Interfaces: map[string][]string{}}
	entries, err := c.readDir(classNet)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return c.handle(classNet, err, true)
	}
	for _, e := range entries {
		list, err := nl.IPv4(e.Name())
		if err != nil {
			// Gone since it was listed, or not a netdev of this
			// namespace (a root other than ours with Options.Netlink).
			c.warn("%s: netdev %s: netlink addresses: %v", rdma.AddressesFile, e.Name(), err)
			continue
		}
		if len(list) > 0 {
			a.Interfaces[e.Name()] = slices.Clone(list)
		}
	}
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", rdma.AddressesFile, err)
	}
	if !c.tree.addFile(rdma.AddressesFile, append(data, '\n')) {
		c.warn("%s: captured twice, kept the first", rdma.AddressesFile)
	}
	c.rep.Addresses = fmt.Sprintf("%s (%d interfaces)", source, len(a.Interfaces))
	return nil
}

// copyAddresses copies the source root's addresses.json, bytes as they
// are (bounded); a root without one gets none.
func (c *collector) copyAddresses() error {
	data, err := c.read(c.src, rdma.AddressesFile, maxAddresses)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, errTooLarge):
		c.skip(fmt.Sprintf("larger than %d bytes", maxAddresses))
		return nil
	case err != nil:
		return c.handle(rdma.AddressesFile, err, true)
	}
	c.tree.addFile(rdma.AddressesFile, data)
	c.rep.Addresses = filepath.Join(c.opts.Root, rdma.AddressesFile)
	return nil
}
