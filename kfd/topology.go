package kfd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// Where KFD lays out its topology: the "kfd" device of the "kfd" class
// (kfd_chardev.c), a "topology" kobject under it with a "nodes"
// directory of numbered nodes (kfd_topology.c kfd_topology_update_sysfs,
// kfd_build_sysfs_node_entry). sys/class/kfd/kfd is a link to
// sys/devices/virtual/kfd/kfd.
const (
	TopologyDir = "sys/class/kfd/kfd/topology"
	NodesDir    = TopologyDir + "/nodes"
)

// Bounds on what is read: past them the rest is left out with an error.
// KFD numbers a node per CPU NUMA node and per GPU partition (eight per
// MI300X in CPX mode), and DRM render minors stop at 255; a node's links
// go to every other node at most.
const (
	MaxNodes = 256
	MaxLinks = 256
)

// maxAttr bounds one sysfs file: KFD prints into one page
// (sysfs_show_gen_prop writes at most PAGE_SIZE), 64 KiB on arm64.
const maxAttr = 64 << 10

// ErrDenied is wrapped when a GPU node's files answer EPERM: KFD checks
// the reader against its device cgroup on every read of a GPU's gpu_id,
// name, properties and links (kfd_topology.c node_show, iolink_show:
// kfd_devcgroup_check_permission), so inside a container the GPUs it
// was not given answer EPERM while the CPU nodes read.
var ErrDenied = errors.New("the caller's device cgroup denies this GPU (KFD answers EPERM)")

// Topology is KFD's view of the node: one Node per CPU NUMA node and
// per GPU (per partition of a partitioned GPU), sorted by ID.
type Topology struct {
	System SystemProperties // topology/system_properties
	Nodes  []Node
}

// Node is one nodes/<N> directory, with amdgpu's DRM attributes of its
// PCI function for a GPU.
type Node struct {
	// ID is N, the directory's number: what links name in node_from and
	// node_to (KFD numbers CPU nodes first, then GPUs as they were added).
	ID int
	// GPUID is gpu_id: KFD's hash of the GPU (kfd_generate_gpu_id); 0 for
	// a CPU node, and for a Denied node, whose gpu_id answered EPERM.
	GPUID uint32
	// Name is name: the ASIC name in lower case for a GPU (amdgpu's
	// asic name, "ip discovery" for MI300-class GPUs, whose ISA is
	// Props.GFXTarget()); "" for a CPU node.
	Name  string
	Props Properties // properties
	// IOLinks are io_links/<M>/properties in M order: the node's direct
	// links; P2PLinks are p2p_links/<M>/properties, the indirect ones.
	IOLinks  []Link
	P2PLinks []Link
	// Denied is set where the node's files answered EPERM: a GPU the
	// caller's device cgroup does not grant (see ErrDenied). Its fields
	// are then what could be read, and an error wrapping ErrDenied names
	// the file.
	Denied bool
	// PCI is the GPU's PCI function, from Props.Domain and
	// Props.LocationID (see Properties.PCIAddress); nil for a CPU node,
	// a Denied node, or a location that does not decode.
	PCI *pci.Address
	// Partition is the compute partition of the GPU this node is (0 on
	// a GPU in SPX mode, 0..7 in CPX mode on MI300X), from location_id.
	Partition int
	// DRM is amdgpu's sysfs of PCI; zero where PCI is nil or not under
	// sys/bus/pci/devices.
	DRM DRM
}

// IsGPU reports whether the node is a GPU: a non-zero gpu_id, or a
// node the device cgroup denies (KFD checks only GPU nodes).
func (n Node) IsGPU() bool { return n.GPUID != 0 || n.Denied }

// fsys is the part of *rootfs.Root the reader uses: a seam for tests,
// which wrap a root to answer EPERM as a device cgroup does.
type fsys interface {
	ReadFile(rel string, limit int) ([]byte, error)
	ReadDir(rel string) ([]fs.DirEntry, error)
	Stat(rel string) (fs.FileInfo, error)
	Path(rel string) string
}

var _ fsys = (*rootfs.Root)(nil)

// ReadTopology reads KFD's topology under root (sys/class/kfd/kfd/
// topology: system_properties, nodes/<N>/{gpu_id,name,properties},
// nodes/<N>/io_links/<M>/properties, nodes/<N>/p2p_links/<M>/properties)
// and, for each GPU node, amdgpu's attributes of its PCI function under
// sys/bus/pci/devices (xgmi_device_id, xgmi_physical_id,
// xgmi_hive_info/xgmi_hive_id, drm/renderDN, current_compute_partition,
// current_memory_partition). Layout: linux
// drivers/gpu/drm/amd/amdkfd/kfd_topology.c, drivers/gpu/drm/amd/amdgpu/
// amdgpu_xgmi.c, amdgpu_gfx.c, amdgpu_gmc.c.
//
// A root without a KFD topology (no amdkfd, no AMD GPU) gives an empty
// Topology and no error. errs name each file that could not be read or
// parsed, a node the device cgroup denies (ErrDenied; the node is kept,
// Denied), a link to a node that does not exist, a count past MaxNodes
// or MaxLinks, and a render node KFD and DRM disagree on (ErrMismatch).
func ReadTopology(root *rootfs.Root) (Topology, []error) {
	return readTopology(root)
}

func readTopology(r fsys) (Topology, []error) {
	var (
		t    Topology
		errs []error
	)
	ents, err := r.ReadDir(NodesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, []error{fmt.Errorf("list KFD nodes: %w", err)}
	}
	if b, err := r.ReadFile(path.Join(TopologyDir, "system_properties"), maxAttr); err == nil {
		if t.System, err = parseSystem(b); err != nil {
			errs = append(errs, fmt.Errorf("parse %s: %w", r.Path(path.Join(TopologyDir, "system_properties")), err))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}

	ids, lerrs := numbered(r, NodesDir, ents, MaxNodes, "KFD nodes")
	errs = append(errs, lerrs...)
	exists := func(id int) bool { _, ok := slices.BinarySearch(ids, id); return ok }
	for _, id := range ids {
		n, nerrs := readNode(r, id, exists)
		t.Nodes = append(t.Nodes, n)
		errs = append(errs, nerrs...)
	}
	return t, errs
}

// numbered returns the numbers of dir's entries in numeric order, at
// most limit of them: KFD names nodes and links 0, 1, 2... An entry that
// is not a number is an error naming it.
func numbered(r fsys, dir string, ents []fs.DirEntry, limit int, what string) ([]int, []error) {
	var (
		ids  []int
		errs []error
	)
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil || id < 0 || id >= maxNodeID || e.Name() != strconv.Itoa(id) {
			errs = append(errs, fmt.Errorf("%s: %q is not a KFD entry number", r.Path(dir), e.Name()))
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) > limit {
		errs = append(errs, fmt.Errorf("%s: %d %s, more than %d; the rest are not read", r.Path(dir), len(ids), what, limit))
		ids = ids[:limit]
	}
	return ids, errs
}

// denied reports whether err is KFD's EPERM.
func denied(err error) bool { return errors.Is(err, syscall.EPERM) }

// readNode reads nodes/<id>. A file that answers EPERM makes the node
// Denied, with one error for the node (its links are then not read:
// they answer the same). exists tells which node numbers there are.
func readNode(r fsys, id int, exists func(int) bool) (Node, []error) {
	n := Node{ID: id}
	dir := path.Join(NodesDir, strconv.Itoa(id))
	var errs []error
	deny := func(err error) {
		if !n.Denied {
			errs = append(errs, fmt.Errorf("KFD node %d: %w: %w", id, ErrDenied, err))
		}
		n.Denied = true
	}
	read := func(name string) ([]byte, bool) {
		b, err := r.ReadFile(path.Join(dir, name), maxAttr)
		switch {
		case err == nil:
			return b, true
		case denied(err):
			deny(err)
		default:
			errs = append(errs, fmt.Errorf("KFD node %d: %w", id, err))
		}
		return nil, false
	}
	if b, ok := read("gpu_id"); ok {
		s := strings.TrimSpace(string(b))
		if v, err := strconv.ParseUint(s, 10, 32); err == nil && validNumber([]byte(s)) {
			n.GPUID = uint32(v)
		} else {
			errs = append(errs, fmt.Errorf("parse %s: %q is not a gpu_id: %w", r.Path(path.Join(dir, "gpu_id")), clip(b), errSyntax))
		}
	}
	if b, ok := read("name"); ok {
		n.Name = strings.TrimRight(string(b), "\n")
		if len(n.Name) > 64 || strings.ContainsFunc(n.Name, func(c rune) bool { return c < ' ' || c > '~' }) {
			errs = append(errs, fmt.Errorf("parse %s: %q is not a node name: %w", r.Path(path.Join(dir, "name")), clip(b), errSyntax))
			n.Name = ""
		}
	}
	propsOK := false
	if b, ok := read("properties"); ok {
		p, err := parseProperties(b)
		n.Props = p
		if err != nil {
			errs = append(errs, fmt.Errorf("parse %s: %w", r.Path(path.Join(dir, "properties")), err))
		} else {
			propsOK = true
		}
	}
	if n.Denied {
		return n, errs
	}

	var lerrs []error
	var ok bool
	n.IOLinks, ok, lerrs = readLinks(r, id, path.Join(dir, "io_links"), exists, deny)
	errs = append(errs, lerrs...)
	if ok && propsOK && int(n.Props.IOLinksCount) != len(n.IOLinks) {
		errs = append(errs, fmt.Errorf("KFD node %d: properties says io_links_count %d, %s holds %d", id, n.Props.IOLinksCount, r.Path(path.Join(dir, "io_links")), len(n.IOLinks)))
	}
	n.P2PLinks, ok, lerrs = readLinks(r, id, path.Join(dir, "p2p_links"), exists, deny)
	errs = append(errs, lerrs...)
	if ok && propsOK && int(n.Props.P2PLinksCount) != len(n.P2PLinks) {
		errs = append(errs, fmt.Errorf("KFD node %d: properties says p2p_links_count %d, %s holds %d", id, n.Props.P2PLinksCount, r.Path(path.Join(dir, "p2p_links")), len(n.P2PLinks)))
	}

	if n.GPUID != 0 && propsOK && !n.Denied {
		errs = append(errs, readGPU(r, &n)...)
	}
	return n, errs
}

// readLinks reads the <M>/properties files of a links directory. ok is
// set when every entry was read (the count can then be checked); a
// missing directory (p2p_links on older kernels) is no links and
// ok. A link whose node_to names no node (a node removed mid-read, a
// truncated snapshot) is kept, with an error.
func readLinks(r fsys, id int, dir string, exists func(int) bool, deny func(error)) (links []Link, ok bool, errs []error) {
	ents, err := r.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, true, nil
	case denied(err):
		deny(err)
		return nil, false, nil
	case err != nil:
		return nil, false, []error{fmt.Errorf("KFD node %d: %w", id, err)}
	}
	ids, errs := numbered(r, dir, ents, MaxLinks, "links")
	ok = len(errs) == 0
	for _, m := range ids {
		file := path.Join(dir, strconv.Itoa(m), "properties")
		b, err := r.ReadFile(file, maxAttr)
		if denied(err) {
			deny(err)
			return links, false, errs
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("KFD node %d: %w", id, err))
			ok = false
			continue
		}
		l, err := parseLink(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("parse %s: %w", r.Path(file), err))
			ok = false
			continue
		}
		if l.From != id {
			errs = append(errs, fmt.Errorf("%s: node_from %d in node %d's directory", r.Path(file), l.From, id))
		}
		if !exists(l.To) {
			errs = append(errs, fmt.Errorf("%s: node_to %d: no such KFD node", r.Path(file), l.To))
		}
		links = append(links, l)
	}
	return links, ok, errs
}

// readGPU fills a GPU node's PCI function, partition and DRM attributes,
// and checks KFD's render minor against DRM's.
func readGPU(r fsys, n *Node) []error {
	addr, part, err := n.Props.PCIAddress()
	if err != nil {
		return []error{fmt.Errorf("KFD node %d: parse %s: %w", n.ID, r.Path(path.Join(NodesDir, strconv.Itoa(n.ID), "properties")), err)}
	}
	addr, part, err = resolvePCI(r, addr, part)
	n.PCI, n.Partition = &addr, part
	if err != nil {
		return []error{fmt.Errorf("KFD node %d (domain %d, location_id %d): %w", n.ID, n.Props.Domain, n.Props.LocationID, err)}
	}
	dev := path.Join(pci.BusDir, addr.String())
	d, errs := readDRM(r, dev, part)
	n.DRM = d
	for i, err := range errs {
		errs[i] = fmt.Errorf("KFD node %d: %w", n.ID, err)
	}
	if part == 0 && d.RenderMinor != n.Props.DRMRenderMinor {
		props := r.Path(path.Join(NodesDir, strconv.Itoa(n.ID), "properties"))
		drm := r.Path(path.Join(dev, "drm"))
		if d.RenderMinor == 0 {
			errs = append(errs, fmt.Errorf("KFD node %d: %w: %s drm_render_minor %d, %s has no renderD%d", n.ID, ErrMismatch, props, n.Props.DRMRenderMinor, drm, n.Props.DRMRenderMinor))
		} else {
			errs = append(errs, fmt.Errorf("KFD node %d: %w: %s drm_render_minor %d, %s has renderD%d", n.ID, ErrMismatch, props, n.Props.DRMRenderMinor, drm, d.RenderMinor))
		}
	}
	return errs
}
