package rdma

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"net/netip"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// AddressesFile is where a snapshot or fixture root records the IPv4
// addresses netlink gave each interface on the live host (a live root asks
// netlink instead): sysfs and procfs have no per-interface IPv4 file.
const AddressesFile = "addresses.json"

// AddressesSchema names the format of AddressesFile.
const AddressesSchema = "gpuaffinity.addresses/v1"

// maxAddressesFile bounds AddressesFile (a few hundred interfaces).
const maxAddressesFile = 1 << 20

// Addresses is AddressesFile: each interface's IPv4 addresses in CIDR
// form ("10.10.1.5/16"), as netlink lists them.
type Addresses struct {
	Schema     string              `json:"schema"`
	Interfaces map[string][]string `json:"interfaces"`
}

// ReadAddresses reads <root>/addresses.json. A root without the file has
// no recorded addresses (nil map, no error); an unreadable or invalid
// file is an error naming it, and an entry that is not an IPv4 prefix is
// dropped with an error naming the interface.
func ReadAddresses(root *rootfs.Root) (map[string][]string, []error) {
	b, err := root.ReadFile(AddressesFile, maxAddressesFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("read %s: %w", root.Path(AddressesFile), err)}
	}
	var a Addresses
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, []error{fmt.Errorf("%s: %w", root.Path(AddressesFile), err)}
	}
	if a.Schema != AddressesSchema {
		return nil, []error{fmt.Errorf("%s: schema %q, want %q", root.Path(AddressesFile), a.Schema, AddressesSchema)}
	}
	var errs []error
	out := make(map[string][]string, len(a.Interfaces))
	for name, list := range a.Interfaces {
		for _, s := range list {
			if _, err := ParseIPv4Prefix(s); err != nil {
				errs = append(errs, fmt.Errorf("%s: interface %q: %w", root.Path(AddressesFile), name, err))
				continue
			}
			out[name] = append(out[name], s)
		}
	}
	sortfn.Sort(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return out, errs
}

// ParseIPv4Prefix parses "10.10.1.5/16" and refuses anything that is not
// an IPv4 address with a prefix length.
func ParseIPv4Prefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("address %q: %w", s, err)
	}
	if !p.Addr().Is4() {
		return p, fmt.Errorf("address %q is not IPv4", s)
	}
	return p, nil
}
