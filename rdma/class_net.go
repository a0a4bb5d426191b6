package rdma

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
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
}

// Netdevs reads every netdev, sorted by name.
func Netdevs(root string) ([]Netdev, []error) {
	return readClass(root, "net", "netdevs", readNetdev)
}

func readNetdev(root, classDir, name string) (*Netdev, []error) {
	if name == "bonding_masters" {
		return nil, nil // a file, not an interface
	}
	link := filepath.Join(classDir, name)
	nd := &Netdev{Name: name}
	addr, _, ok, err := pci.ResolveAddress(root, link)
	if err != nil {
		return nil, []error{fmt.Errorf("netdev %q: %w", name, err)}
	}
	if _, err := os.Stat(link); err != nil {
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
	nd.OperState, err = sysattr.String(filepath.Join(link, "operstate"))
	note(err)
	nd.Address, err = sysattr.String(filepath.Join(link, "address"))
	note(err)
	nd.MTU, err = sysattr.Int(filepath.Join(link, "mtu"))
	note(err)
	nd.Type, err = sysattr.Int(filepath.Join(link, "type"))
	note(err)
	// speed fails with EINVAL while the link is down; -1 on virtio.
	if s, err := sysattr.Int(filepath.Join(link, "speed")); err == nil && s > 0 {
		nd.SpeedMbps = s
	}
	return nd, errs
}
