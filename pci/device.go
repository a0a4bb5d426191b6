package pci

import (
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// Device is one PCI function as sysfs shows it.
type Device struct {
	Address Address
	// Parent is the bridge above; nil for a function on a root bus.
	Parent *Address
	// RootBus is the root bus directory the function hangs off, "pci0000:15".
	RootBus string
	// SysPath is the function's directory relative to the root, resolved
	// from the bus/pci/devices link ("sys/devices/pci0000:15/.../0000:18:00.0").
	SysPath string

	Class           uint32 // class, 0x030200
	Vendor          uint16 // vendor
	DeviceID        uint16 // device
	SubsystemVendor uint16 // subsystem_vendor
	SubsystemDevice uint16 // subsystem_device
	// NUMANode is numa_node; nil when the file says -1, is missing or is garbage.
	NUMANode  *int
	LocalCPUs cpuset.Set // local_cpulist (local_cpus mask where the list is absent)

	CurrentLinkSpeed string // current_link_speed, "32.0 GT/s PCIe"
	CurrentLinkWidth int    // current_link_width; 0 when absent or 0
	MaxLinkSpeed     string // max_link_speed
	MaxLinkWidth     int    // max_link_width
	Driver           string // basename of the driver link; "" when unbound
	// Virtual is set for an SR-IOV virtual function (physfn link present).
	Virtual bool
	// ACS is a bridge's Access Control Services capability, read from its
	// config file; the zero value for other functions.
	ACS ACS
	// VPD is read only of ConnectX functions, and only on a node with a
	// Data Direct function (vpd.go); nil otherwise.
	VPD *VPD
}

// IsBridge reports whether the function is a PCI-to-PCI bridge (class 0x0604xx).
func (d Device) IsBridge() bool { return d.Class>>8 == 0x0604 }

// FS reads PCI devices under a root ("/" on a live host).
type FS struct {
	root *rootfs.Root
}

// BusDir is the directory of PCI function links under the root.
const BusDir = "sys/bus/pci/devices"

// NewFS returns a reader of <root>/sys/bus/pci.
func NewFS(root *rootfs.Root) FS { return FS{root: root} }

// Devices returns every PCI function sorted by address. errs lists the
// per-device problems (missing or garbage attributes, dangling links);
// err is set only when the PCI bus directory cannot be read at all.
func (f FS) Devices() (devs []Device, errs []error, err error) {
	entries, err := f.root.ReadDir(BusDir)
	if err != nil {
		return nil, nil, fmt.Errorf("list PCI devices: %w", err)
	}
	// Each function is a dozen small reads; on a host with hundreds of
	// functions the reads are spread over a few goroutines. Results are
	// gathered by position, so the output does not depend on scheduling.
	type result struct {
		d    *Device
		errs []error
	}
	results := make([]result, len(entries))
	parallel(len(entries), func(i int) {
		d, derrs := f.device(entries[i].Name())
		results[i] = result{d, derrs}
	})
	for _, r := range results {
		errs = append(errs, r.errs...)
		if r.d != nil {
			devs = append(devs, *r.d)
		}
	}
	sortfn.Sort(devs, func(a, b Device) int {
		if a.Address == b.Address {
			return 0
		}
		if a.Address.Less(b.Address) {
			return -1
		}
		return 1
	})
	readVPDs(f.root, devs)
	return devs, errs, nil
}

// device reads one function. A nil Device means the entry is unusable
// (not an address, dangling or vanished), and errs says why.
func (f FS) device(name string) (*Device, []error) {
	link := path.Join(BusDir, name)
	addr, err := ParseAddress(name)
	if err != nil {
		return nil, []error{fmt.Errorf("%s: %w", f.root.Path(link), err)}
	}
	target, err := f.root.Readlink(link)
	if err != nil {
		return nil, []error{fmt.Errorf("PCI device %s: %w", addr, err)}
	}
	rel, err := resolve(f.root, link, target)
	if err != nil {
		return nil, []error{fmt.Errorf("PCI device %s: %w", addr, err)}
	}
	d := &Device{Address: addr, SysPath: rel}
	var errs []error
	if d.RootBus, d.Parent, err = chain(rel, addr); err != nil {
		return nil, []error{fmt.Errorf("PCI device %s: %w", addr, err)}
	}
	// The function's directory, resolved once: its attributes are read
	// by name from it.
	dir, err := f.root.OpenDir(rel)
	if err != nil {
		// The link dangles, or the device went away between the listing
		// and now (hot unplug, a VF being destroyed).
		return nil, []error{fmt.Errorf("PCI device %s: %w", addr, err)}
	}
	defer dir.Close()
	note := func(err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("PCI device %s: %w", addr, err))
		}
	}
	hex := func(file string, bits int) uint32 {
		v, err := dir.Hex(file)
		if err == nil && bits < 32 && v>>bits != 0 {
			err = fmt.Errorf("%s: value %#x wider than %d bits", dir.Path(file), v, bits)
		}
		note(err)
		return v
	}
	d.Class = hex("class", 24)
	d.Vendor = uint16(hex("vendor", 16))
	d.DeviceID = uint16(hex("device", 16))
	d.SubsystemVendor = uint16(hex("subsystem_vendor", 16))
	d.SubsystemDevice = uint16(hex("subsystem_device", 16))

	if n, err := dir.Int("numa_node"); err == nil {
		if n >= 0 {
			d.NUMANode = &n
		} else if n != -1 {
			note(fmt.Errorf("%s: invalid NUMA node %d", dir.Path("numa_node"), n))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		note(err)
	}
	d.LocalCPUs, err = localCPUs(dir)
	note(err)

	d.CurrentLinkSpeed = optString(dir, "current_link_speed", note)
	d.MaxLinkSpeed = optString(dir, "max_link_speed", note)
	d.CurrentLinkWidth = optInt(dir, "current_link_width", note)
	d.MaxLinkWidth = optInt(dir, "max_link_width", note)

	if t, err := dir.Readlink("driver"); err == nil {
		d.Driver = path.Base(filepath.ToSlash(t))
	}
	d.Virtual = dir.Exists("physfn")
	if d.IsBridge() {
		// Read here, on the reader's goroutines, beside the function's
		// other attributes.
		var err error
		d.ACS, err = readACS(dir)
		note(err)
	}
	return d, errs
}

func optString(dir *rootfs.Dir, file string, note func(error)) string {
	s, err := dir.String(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		note(err)
	}
	// Root ports and virtual functions answer "Unknown" where they have no
	// link of their own.
	if s == "Unknown" || strings.HasPrefix(s, "Unknown ") {
		return ""
	}
	return s
}

func optInt(dir *rootfs.Dir, file string, note func(error)) int {
	n, err := dir.Int(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		note(err)
	}
	if n < 0 {
		note(fmt.Errorf("%s: negative value %d", dir.Path(file), n))
		return 0
	}
	return n
}

// localCPUs reads local_cpulist, else the local_cpus mask. A missing pair is
// not an error (some platform devices have neither); an empty list is.
func localCPUs(dir *rootfs.Dir) (cpuset.Set, error) {
	p := dir.Path("local_cpulist")
	s, err := dir.String("local_cpulist")
	if errors.Is(err, fs.ErrNotExist) {
		p = dir.Path("local_cpus")
		if s, err = dir.String("local_cpus"); errors.Is(err, fs.ErrNotExist) {
			return cpuset.Set{}, nil
		} else if err != nil {
			return cpuset.Set{}, err
		}
		set, err := cpuset.ParseMask(s)
		if err != nil {
			return cpuset.Set{}, fmt.Errorf("%s: %w", p, err)
		}
		return set, nil
	}
	if err != nil {
		return cpuset.Set{}, err
	}
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("%s: %w", p, err)
	}
	if set.IsEmpty() {
		return set, fmt.Errorf("%s: empty CPU list", p)
	}
	return set, nil
}

// resolve turns the target of the link at rel (relative to root) into a
// path relative to root, refusing targets that leave the root. sysfs
// writes every link relative; the directories above a class or bus link
// are real directories, so the target resolves textually.
func resolve(root *rootfs.Root, link, target string) (string, error) {
	if path.IsAbs(target) {
		return "", fmt.Errorf("link %s: absolute target %q: %w", root.Path(link), target, rootfs.ErrOutsideRoot)
	}
	rel := path.Join(path.Dir(link), target)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("link %s: target %q: %w", root.Path(link), target, rootfs.ErrOutsideRoot)
	}
	return rel, nil
}

// chain finds the root bus and parent of addr in its resolved sysfs path
// "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/.../<addr>". Non-PCI
// components before the root bus (Hyper-V's VMBUS, ACPI nodes) are skipped.
func chain(rel string, addr Address) (root string, parent *Address, err error) {
	parts := strings.Split(rel, "/")
	start := -1
	for i, p := range parts {
		if parseRootBus(p) {
			start = i
		}
	}
	if start < 0 {
		return "", nil, fmt.Errorf("no root bus in path %q", rel)
	}
	var chainAddrs []Address
	for _, p := range parts[start+1:] {
		a, err := ParseAddress(p)
		if err != nil {
			return "", nil, fmt.Errorf("non-PCI component %q in path %q", p, rel)
		}
		chainAddrs = append(chainAddrs, a)
	}
	if len(chainAddrs) == 0 || chainAddrs[len(chainAddrs)-1] != addr {
		return "", nil, fmt.Errorf("path %q does not end in %s", rel, addr)
	}
	if n := len(chainAddrs); n >= 2 {
		p := chainAddrs[n-2]
		parent = &p
	}
	return parts[start], parent, nil
}

// ResolveAddress finds the PCI function a class device (a netdev, an RDMA
// device) belongs to: the last PCI address in the target of its link at
// link (relative to root), and the target as a path relative to root. ok
// is false for virtual devices. It does no I/O besides reading the link.
func ResolveAddress(root *rootfs.Root, link string) (addr Address, rel string, ok bool, err error) {
	target, err := root.Readlink(link)
	if err != nil {
		return addr, "", false, err
	}
	rel, err = resolve(root, link, target)
	if err != nil {
		return addr, "", false, err
	}
	parts := strings.Split(rel, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if a, err := ParseAddress(parts[i]); err == nil && strings.Count(parts[i], ":") == 2 {
			return a, rel, true, nil
		}
	}
	return addr, rel, false, nil
}

// parallel calls fn(0..n-1) on up to GOMAXPROCS goroutines and returns
// when all calls have.
func parallel(n int, fn func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0), 8)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
