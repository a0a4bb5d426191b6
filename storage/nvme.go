package storage

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// Where the kernel's NVMe driver lists what it drives
// (drivers/nvme/host/core.c: the "nvme" class; multipath heads under the
// "nvme-subsystem" class).
const (
	ClassNVMe  = "sys/class/nvme"
	ClassBlock = "sys/class/block"
)

// Controller is one NVMe controller (sys/class/nvme/nvmeN).
type Controller struct {
	Name string // "nvme0"
	// Transport is "pcie", "rdma", "tcp", "fc" or "loop" (transport).
	Transport string
	// Address is the transport address (address): the PCI bus id for
	// pcie, "traddr=...,trsvcid=..." for fabrics.
	Address string
	// PCI is the PCI function of a PCIe controller; nil for fabrics.
	PCI *pci.Address
	// SysPath is the controller's directory relative to the root.
	SysPath  string
	Model    string // model
	Serial   string // serial
	Firmware string // firmware_rev
	State    string // state: "live", "resetting", "dead", ...
	// NUMANode is numa_node; nil when -1, absent or garbage.
	NUMANode *int
	// Namespaces are sorted by name.
	Namespaces []Namespace
}

// Namespace is one namespace of a controller, named by the block device
// that carries its data.
type Namespace struct {
	// Block is the block device: "nvme0n1", or with native multipath the
	// subsystem's head "nvme0n1" that the hidden path nvme0c0n1 serves.
	Block string
	// Path is the hidden per-controller path ("nvme0c0n1") where native
	// NVMe multipath made a head; "" otherwise.
	Path string
	// SizeBytes is size (512-byte sectors) × 512; 0 when unreadable.
	SizeBytes uint64
}

// nsDir matches a controller's namespace directories: nvme0n1, or the
// hidden multipath path nvme<subsystem>c<controller>n<nsid>.
var nsDir = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^nvme(\d+)(?:c(\d+))?n(\d+)$`) })

// Controllers reads every NVMe controller, sorted by name. errs name
// each unreadable attribute or entry; a root without the nvme class has
// none and no error.
func Controllers(root *rootfs.Root) ([]Controller, []error) {
	entries, err := root.ReadDir(ClassNVMe)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("list NVMe controllers: %w", err)}
	}
	var (
		out  []Controller
		errs []error
	)
	for _, e := range entries {
		c, cerrs := controller(root, e.Name())
		errs = append(errs, cerrs...)
		if c != nil {
			out = append(out, *c)
		}
	}
	sortfn.Sort(out, func(a, b Controller) int { return cmpName(a.Name, b.Name) })
	return out, errs
}

// cmpName orders "nvme2" before "nvme10".
func cmpName(a, b string) int {
	na, ea := strconv.Atoi(trimAlpha(a))
	nb, eb := strconv.Atoi(trimAlpha(b))
	if ea == nil && eb == nil && na != nb {
		return cmp.Compare(na, nb)
	}
	return cmp.Compare(a, b)
}

func trimAlpha(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			return s[i:]
		}
	}
	return ""
}

func controller(root *rootfs.Root, name string) (*Controller, []error) {
	link := path.Join(ClassNVMe, name)
	addr, rel, onPCI, err := pci.ResolveAddress(root, link)
	if err != nil {
		return nil, []error{fmt.Errorf("NVMe controller %s: %w", name, err)}
	}
	dir, err := root.OpenDir(rel)
	if err != nil {
		// Removed between the listing and now (a hot-unplugged drive).
		return nil, []error{fmt.Errorf("NVMe controller %s: %w", name, err)}
	}
	defer dir.Close()
	var errs []error
	str := func(file string) string {
		s, err := dir.String(file)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("NVMe controller %s: %w", name, err))
		}
		return s
	}
	c := &Controller{Name: name, SysPath: rel,
		Transport: str("transport"), Address: str("address"),
		Model: str("model"), Serial: str("serial"), Firmware: str("firmware_rev"), State: str("state")}
	if onPCI && c.Transport == "pcie" {
		c.PCI = &addr
	}
	if n, err := dir.Int("numa_node"); err == nil && n >= 0 {
		c.NUMANode = &n
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("NVMe controller %s: %w", name, err))
	}
	sub, err := dir.ReadDir()
	if err != nil {
		return c, append(errs, fmt.Errorf("NVMe controller %s: %w", name, err))
	}
	for _, e := range sub {
		m := nsDir().FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		ns := Namespace{Block: e.Name()}
		if m[2] != "" {
			ns.Path = e.Name()
			ns.Block = "nvme" + m[1] + "n" + m[3]
		}
		if s, err := root.String(path.Join(rel, e.Name(), "size")); err == nil {
			if v, perr := strconv.ParseUint(s, 10, 64); perr == nil && v < 1<<54 {
				ns.SizeBytes = v * 512
			} else {
				errs = append(errs, fmt.Errorf("NVMe namespace %s: size %q is not a sector count", e.Name(), s))
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("NVMe namespace %s: %w", e.Name(), err))
		}
		c.Namespaces = append(c.Namespaces, ns)
	}
	sortfn.Sort(c.Namespaces, func(a, b Namespace) int { return cmp.Compare(a.Block, b.Block) })
	return c, errs
}

// maxDepth bounds the walk down stacked block devices (a partition on a
// device-mapper volume on an md array on NVMe is four).
const maxDepth = 8

// Disks returns the whole disks that carry block device name: the disk
// itself, the disk of a partition ("nvme0n1p1" -> "nvme0n1"), or the
// members of an md or device-mapper device (its slaves), followed down
// until disks without slaves. A name that is not a block device under
// the root is an error.
func Disks(root *rootfs.Root, name string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	var walk func(name string, depth int) error
	walk = func(name string, depth int) error {
		if depth > maxDepth {
			return fmt.Errorf("block device %s: stacked more than %d deep", name, maxDepth)
		}
		if !validBlockName(name) {
			return fmt.Errorf("block device %q: not a block device name", name)
		}
		link := path.Join(ClassBlock, name)
		target, err := root.Readlink(link)
		if err != nil {
			return fmt.Errorf("block device %s: %w", name, err)
		}
		rel := path.Join(path.Dir(link), target)
		if _, err := root.Stat(path.Join(rel, "partition")); err == nil {
			name = path.Base(path.Dir(rel))
			rel = path.Dir(rel)
		}
		if seen[name] {
			return nil
		}
		seen[name] = true
		slaves, err := root.ReadDir(path.Join(rel, "slaves"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("block device %s: %w", name, err)
		}
		if len(slaves) == 0 {
			out = append(out, name)
			return nil
		}
		for _, s := range slaves {
			if err := walk(s.Name(), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(name, 0); err != nil {
		return nil, err
	}
	sortfn.Sort(out, cmpName)
	return out, nil
}

func validBlockName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '/' || c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// ErrUnresolved is returned by BlockName for a /dev path whose block
// device cannot be found from sysfs alone (a /dev/disk/by-* link, a named
// md array): the caller warns instead of guessing.
var ErrUnresolved = errors.New("block device path not resolvable from sysfs")

// BlockName returns the sys/class/block name of the block device a mount
// source names: "/dev/nvme0n1p2" is "nvme0n1p2", and "/dev/mapper/NAME"
// (LVM, dm-crypt, multipath) is the dm-N whose dm/name is NAME. ok is
// false where source is not a /dev path at all (NFS, Lustre, tmpfs).
func BlockName(root *rootfs.Root, source string) (name string, ok bool, err error) {
	dev, isDev := strings.CutPrefix(source, "/dev/")
	if !isDev {
		return "", false, nil
	}
	mapped, isMapper := strings.CutPrefix(dev, "mapper/")
	switch {
	case !strings.Contains(dev, "/"):
		return dev, true, nil
	case !isMapper || strings.Contains(mapped, "/") || mapped == "":
		return "", true, fmt.Errorf("mount source %s: %w", source, ErrUnresolved)
	}
	ents, err := root.ReadDir(ClassBlock)
	if err != nil {
		return "", true, fmt.Errorf("mount source %s: %w", source, err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "dm-") {
			continue
		}
		n, err := root.String(path.Join(ClassBlock, e.Name(), "dm", "name"))
		if err == nil && n == mapped {
			return e.Name(), true, nil
		}
	}
	return "", true, fmt.Errorf("mount source %s: no %s/dm-*/dm/name is %q: %w", source, ClassBlock, mapped, ErrUnresolved)
}
