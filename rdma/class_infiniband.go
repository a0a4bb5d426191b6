package rdma

import (
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// Device is one RDMA device (class/infiniband/<name>).
type Device struct {
	Name string
	// PCI is the function the device belongs to; nil for a software device
	// (rxe, siw) with no PCI parent.
	PCI             *pci.Address
	FirmwareVersion string // fw_ver
	NodeGUID        string // node_guid
	NodeType        string // node_type, "1: CA"
	Ports           []Port
}

// Port is one port of an RDMA device (ports/N).
type Port struct {
	Port        int
	State       string  // state text, "ACTIVE"
	StateID     int     // state number, 4
	PhysState   string  // phys_state text, "LinkUp"
	PhysStateID int     // phys_state number, 5
	RateGbps    float64 // rate, "400 Gb/sec (4X NDR)" -> 400
	LinkLayer   string  // link_layer: InfiniBand, Ethernet, Unknown (EFA)
	GIDs        []GID   // populated entries, Ethernet link layer only
	// Netdev is the netdev of the port (gid_attrs/ndevs/0) where sysfs says.
	Netdev string
}

// GID is one populated GID table entry.
type GID struct {
	Index  int
	GID    string // gids/N
	Type   string // gid_attrs/types/N
	Netdev string // gid_attrs/ndevs/N
}

// Devices reads every RDMA device, sorted by name. A root without
// class/infiniband has none (the RDMA core is not loaded): no error.
func Devices(root *rootfs.Root) ([]Device, []error) {
	return readClass(root, "infiniband", "RDMA devices", readDevice)
}

func readDevice(root *rootfs.Root, classDir, name string) (*Device, []error) {
	link := path.Join(classDir, name)
	d := &Device{Name: name}
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("RDMA device %s: %w", name, err))
		}
	}
	addr, _, ok, err := pci.ResolveAddress(root, link)
	if err != nil {
		// The device vanished after the listing, or its link is broken.
		return nil, []error{fmt.Errorf("RDMA device %s: %w", name, err)}
	}
	if ok {
		d.PCI = &addr
	}
	dir := link // the class link resolves to the device directory
	if _, err := root.Stat(dir); err != nil {
		return nil, []error{fmt.Errorf("RDMA device %s: %w", name, err)}
	}
	var err2 error
	d.FirmwareVersion, err2 = root.String(path.Join(dir, "fw_ver"))
	note(err2)
	d.NodeGUID = optional(root, path.Join(dir, "node_guid"), note)
	d.NodeType = optional(root, path.Join(dir, "node_type"), note)

	portsDir := path.Join(dir, "ports")
	entries, err := root.ReadDir(portsDir)
	if err != nil {
		note(fmt.Errorf("list ports: %w", err))
		return d, errs
	}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n < 0 {
			note(fmt.Errorf("%s: not a port number", root.Path(path.Join(portsDir, e.Name()))))
			continue
		}
		p, perrs := readPort(root, path.Join(portsDir, e.Name()), n)
		for _, err := range perrs {
			note(fmt.Errorf("port %d: %w", n, err))
		}
		d.Ports = append(d.Ports, p)
	}
	sortfn.Sort(d.Ports, func(a, b Port) int { return a.Port - b.Port })
	return d, errs
}

func optional(root *rootfs.Root, rel string, note func(error)) string {
	s, err := root.String(rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		note(err)
	}
	return s
}

func readPort(root *rootfs.Root, dir string, n int) (Port, []error) {
	p := Port{Port: n}
	var errs []error
	var err error
	if s, e := root.String(path.Join(dir, "state")); e != nil {
		errs = append(errs, e)
	} else if p.StateID, p.State, err = ParseState(s); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", root.Path(path.Join(dir, "state")), err))
	}
	if s, e := root.String(path.Join(dir, "phys_state")); e != nil {
		errs = append(errs, e)
	} else if p.PhysStateID, p.PhysState, err = ParseState(s); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", root.Path(path.Join(dir, "phys_state")), err))
	}
	if s, e := root.String(path.Join(dir, "rate")); e != nil {
		errs = append(errs, e)
	} else if p.RateGbps, err = ParseRate(s); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", root.Path(path.Join(dir, "rate")), err))
	}
	if p.LinkLayer, err = root.String(path.Join(dir, "link_layer")); err != nil {
		errs = append(errs, err)
	} else if !slices.Contains(linkLayers, p.LinkLayer) {
		// The kernel writes one of these (ib_core's link_layer_show); an
		// empty or junk file must not pass for a fabric silently.
		errs = append(errs, fmt.Errorf("%s: %q is not a link layer the kernel writes (InfiniBand, Ethernet, Unknown); the port's fabric is a guess", root.Path(path.Join(dir, "link_layer")), p.LinkLayer))
	}
	if nd, err := root.String(path.Join(dir, "gid_attrs/ndevs/0")); err == nil {
		p.Netdev = nd
	}
	if p.LinkLayer == "Ethernet" {
		p.GIDs = readGIDs(root, dir)
	}
	return p, errs
}

// linkLayers are the values of ports/N/link_layer: "Unknown" is what EFA
// and other ports of no IB link layer report.
var linkLayers = []string{"InfiniBand", "Ethernet", "Unknown"}

// maxGIDs bounds the GID table walk; mlx5 RoCE ports have 255 entries.
const maxGIDs = 256

// readGIDs returns the populated entries. Unpopulated entries read as
// all-zero or fail (EINVAL on real hardware); both are skipped, as are
// entries whose type is unreadable.
func readGIDs(root *rootfs.Root, portDir string) []GID {
	entries, err := root.ReadDir(path.Join(portDir, "gids"))
	if err != nil {
		return nil
	}
	var out []GID
	for _, e := range entries {
		i, err := strconv.Atoi(e.Name())
		if err != nil || i < 0 || i >= maxGIDs {
			continue
		}
		g, err := root.String(path.Join(portDir, "gids", e.Name()))
		if err != nil || isZeroGID(g) {
			continue
		}
		typ, err := root.String(path.Join(portDir, "gid_attrs/types", e.Name()))
		if err != nil {
			continue
		}
		nd, _ := root.String(path.Join(portDir, "gid_attrs/ndevs", e.Name()))
		out = append(out, GID{Index: i, GID: g, Type: typ, Netdev: nd})
	}
	sortfn.Sort(out, func(a, b GID) int { return a.Index - b.Index })
	return out
}

func isZeroGID(g string) bool {
	return strings.Trim(g, "0:") == ""
}

// ParseState reads "4: ACTIVE" (state) or "5: LinkUp" (phys_state).
func ParseState(s string) (int, string, error) {
	num, text, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, "", fmt.Errorf("malformed state %q", s)
	}
	id, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || id < 0 {
		return 0, "", fmt.Errorf("malformed state %q", s)
	}
	return id, strings.TrimSpace(text), nil
}

// ParseRate reads "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)" or
// "100 Gb/sec" into Gb/s.
func ParseRate(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 2 || f[1] != "Gb/sec" {
		return 0, fmt.Errorf("malformed rate %q", s)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || !(v >= 0 && v <= 1e6) { // also rejects NaN
		return 0, fmt.Errorf("malformed rate %q", s)
	}
	return v, nil
}
