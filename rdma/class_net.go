package rdma

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// Netdev is one network interface (class/net/<name>).
type Netdev struct {
	Name string
	// PCI is the function the netdev belongs to (the last PCI address in
	// its sysfs path: virtio netdevs sit one level below theirs); nil for
	// virtual interfaces (lo, bridges, veth).
	PCI       *pci.Address
	OperState string // operstate
	MTU       int    // mtu
	SpeedMbps int    // speed; 0 when unknown (-1 or unreadable, as virtio reports)
	Address   string // address (MAC)
	Type      int    // type: 1 Ethernet, 32 InfiniBand (IPoIB)
	// Master is the interface this one is enslaved to (the master link:
	// a bond or bridge, or Azure netvsc's synthetic NIC for its VF); ""
	// when none.
	Master string
	// MasterKind is "bond" or "bridge" when the master's own directory
	// has bonding/ or bridge/; "" otherwise.
	MasterKind string
	// BondSlaves are the netdevs enslaved to this one when it is a bond
	// (bonding/slaves, in the bond's order); nil for any other netdev.
	BondSlaves []string
	// BondMode is a bond's bonding/mode ("802.3ad 4"); "" otherwise.
	BondMode string
}

// Netdevs reads every netdev, sorted by name.
func Netdevs(root *rootfs.Root) ([]Netdev, []error) {
	return readClass(root, "net", "netdevs", readNetdev)
}

func readNetdev(root *rootfs.Root, classDir, name string) (*Netdev, []error) {
	if name == "bonding_masters" {
		return nil, nil // a file, not an interface
	}
	link := path.Join(classDir, name)
	nd := &Netdev{Name: name}
	addr, _, ok, err := pci.ResolveAddress(root, link)
	if err != nil {
		return nil, []error{fmt.Errorf("netdev %q: %w", name, err)}
	}
	if _, err := root.Stat(link); err != nil {
		return nil, []error{fmt.Errorf("netdev %q: %w", name, err)} // vanished
	}
	if ok {
		nd.PCI = &addr
	}
	var errs []error
	note := func(err error) {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("netdev %q: %w", name, err))
		}
	}
	nd.OperState, err = root.String(path.Join(link, "operstate"))
	note(err)
	nd.Address, err = root.String(path.Join(link, "address"))
	note(err)
	nd.MTU, err = root.Int(path.Join(link, "mtu"))
	note(err)
	nd.Type, err = root.Int(path.Join(link, "type"))
	note(err)
	if target, err := root.Readlink(path.Join(link, "master")); err == nil {
		nd.Master = path.Base(target)
		nd.MasterKind = masterKind(root, path.Join(classDir, nd.Master))
	}
	if fi, err := root.Stat(path.Join(link, "bonding")); err == nil && fi.IsDir() {
		// A bond: drivers/net/bonding/bond_sysfs.c writes its slaves
		// space-separated, nothing when it has none.
		slaves, err := root.String(path.Join(link, "bonding/slaves"))
		note(err)
		nd.BondSlaves = strings.Fields(slaves)
		if nd.BondSlaves == nil {
			nd.BondSlaves = []string{}
		}
		nd.BondMode, err = root.String(path.Join(link, "bonding/mode"))
		note(err)
	}
	// speed fails with EINVAL while the link is down; -1 on virtio.
	if s, err := root.Int(path.Join(link, "speed")); err == nil && s > 0 {
		nd.SpeedMbps = s
	}
	return nd, errs
}

// masterKind names the kind of a master interface from its sysfs
// directory: bonding/ (bond) or bridge/ (bridge).
func masterKind(root *rootfs.Root, dir string) string {
	for _, k := range []struct{ sub, kind string }{{"bonding", "bond"}, {"bridge", "bridge"}} {
		if fi, err := root.Stat(path.Join(dir, k.sub)); err == nil && fi.IsDir() {
			return k.kind
		}
	}
	return ""
}
