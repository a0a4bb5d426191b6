// Package cufile renders the node's GPUDirect Storage settings as
// cuFile's configuration file, cufile.json (docs/cufile.md): the client
// addresses cuFile's RDMA path uses per network file system
// (fs.<fs>.rdma_dev_addr_list, or per mount in fs.<fs>.mount_table), the
// P2PDMA switches, and dynamic routing where a GPU shares no PCIe switch
// with a storage NIC.
//
// FromNode decides the settings from a linked topology.Node; it does no
// I/O. Render writes them into NVIDIA's default file (a complete file
// cuFile accepts); Merge writes them into an existing one, keeping every
// setting gpuaffinity does not own as it was written (see jsonc.go).
package cufile

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// reference is NVIDIA's default /etc/cufile.json, comments included, as
// the GDS Benchmarking and Configuration Guide §4.2 prints it
// (testdata/README.md): the base of a fresh file. It lives in testdata
// because the tests read the same bytes as the reference they check
// against; one copy, so the two cannot drift.
//
//go:embed testdata/cufile.default.json
var reference []byte

// fsKeys are cufile.json's network file system keys in the reference's
// order (topology.MountKind.CuFileFS gives them).
var fsKeys = []string{"beegfs", "lustre", "nfs", "gpfs", "weka"}

// Settings are the values gpuaffinity owns in cufile.json for one node.
type Settings struct {
	// FS holds the client addresses of each network file system mounted,
	// in fsKeys order; a file system none of whose mounts has an address
	// is absent (its keys stay as they were).
	FS []FSAddrs
	// P2PDMA is properties.use_pci_p2pdma and block.nvme.use_pci_p2pdma:
	// the node's P2PDMA verdict (topology.GDS.P2PDMA).
	P2PDMA bool
	// DynamicRouting is properties.rdma_dynamic_routing: the node has a
	// network mount and some GPU's nearest storage NIC is further than PXB.
	DynamicRouting bool
	// Warnings say what could not be rendered (a NIC without an IPv4
	// address) and why.
	Warnings []string
}

// FSAddrs are the rdma_dev_addr_list values of one file system: Addrs
// (fs.<fs>.rdma_dev_addr_list) when every mount of it is served by the
// same addresses, else Mounts (fs.<fs>.mount_table); never both, which
// cuFile refuses.
type FSAddrs struct {
	FS     string
	Addrs  []string
	Mounts []MountAddrs
}

// MountAddrs is one mount_table entry.
type MountAddrs struct {
	Target string
	Addrs  []string
}

// FromNode decides the cufile.json settings of node n, which must be
// linked (topology.Link fills each mount's NICs and the storage pairs).
func FromNode(n topology.Node) Settings {
	s := Settings{P2PDMA: n.Storage.GDS.P2PDMA.Supported}
	nics := map[string]topology.NIC{}
	for _, nic := range n.NICs {
		nics[nic.Name] = nic
	}
	// Each mount's client addresses, in mount order: the IPv4 addresses
	// of its NICs in NIC order.
	addrs := make([][]string, len(n.Storage.Mounts))
	noAddr := map[string][]string{} // NIC -> mount targets, for one warning per NIC
	var noAddrOrder []string
	for i, m := range n.Storage.Mounts {
		if m.Kind.CuFileFS() == "" {
			continue
		}
		for _, name := range m.NICs {
			nic, ok := nics[name]
			ip := nic.IPv4()
			if !ok || len(ip) == 0 {
				if _, seen := noAddr[name]; !seen {
					noAddrOrder = append(noAddrOrder, name)
				}
				noAddr[name] = append(noAddr[name], m.Target)
				continue
			}
			for _, a := range ip {
				if !slices.Contains(addrs[i], a) {
					addrs[i] = append(addrs[i], a)
				}
			}
		}
	}
	network := false
	for _, fs := range fsKeys {
		var mounts []MountAddrs
		missing := false
		for i, m := range n.Storage.Mounts {
			if m.Kind.CuFileFS() != fs {
				continue
			}
			network = true
			if len(addrs[i]) == 0 {
				missing = true
				continue
			}
			// A later mount on the same target hides the earlier one.
			mounts = slices.DeleteFunc(mounts, func(e MountAddrs) bool { return e.Target == m.Target })
			mounts = append(mounts, MountAddrs{Target: m.Target, Addrs: addrs[i]})
		}
		switch {
		case len(mounts) == 0 && missing:
			s.Warnings = append(s.Warnings, fmt.Sprintf("fs.%s: no mount of it has a client IPv4 address; its rdma_dev_addr_list and mount_table are left as they are", fs))
		case len(mounts) == 0:
		case !missing && allEqual(mounts):
			s.FS = append(s.FS, FSAddrs{FS: fs, Addrs: mounts[0].Addrs})
		default:
			s.FS = append(s.FS, FSAddrs{FS: fs, Mounts: mounts})
		}
	}
	for _, name := range noAddrOrder {
		s.Warnings = append(s.Warnings, fmt.Sprintf("NIC %s carries %s but has no IPv4 address: left out of rdma_dev_addr_list (cuFile takes client IPv4 addresses)",
			name, strings.Join(slices.Compact(noAddr[name]), ", ")))
	}
	if network {
		for _, p := range n.Storage.Pairs {
			if len(p.NICs) > 0 && p.NICClass != topology.ClassUnknown && !p.NICClass.SharesSwitch() {
				s.DynamicRouting = true
			}
		}
	}
	return s
}

func allEqual(ms []MountAddrs) bool {
	for _, m := range ms[1:] {
		if !slices.Equal(m.Addrs, ms[0].Addrs) {
			return false
		}
	}
	return true
}

// Owned lists the keys Render and Merge set or remove, for the
// documentation and the tests; "<fs>" is each network file system mounted
// and "<mount>" each of its mount points.
var Owned = []string{
	"properties.use_pci_p2pdma",
	"properties.rdma_dynamic_routing",
	"block.nvme.use_pci_p2pdma",
	"fs.<fs>.rdma_dev_addr_list",
	"fs.<fs>.mount_table",
	"fs.<fs>.mount_table.<mount>.rdma_dev_addr_list",
}

// Render writes s into NVIDIA's default cufile.json: a complete file, in
// the reference's key order, comment-free, with a 2-space indent.
func Render(s Settings) ([]byte, error) {
	out, _, err := Merge("NVIDIA's default cufile.json", reference, s)
	return out, err
}

// Merge writes s into the cufile.json src (named name in errors), which
// may hold // and /* */ comments: the keys gpuaffinity owns (Owned) are
// set, the per-fs list or mount_table that would conflict with what it
// writes is removed, and every other key keeps its place and its bytes.
// A missing object on the way to an owned key is appended to its parent.
// The output is comment-free.
//
// Duplicate keys: an owned key written twice is set once, in the first
// one's place (its old values were gpuaffinity's to replace). An object
// on the way to an owned key written twice in its parent (two
// "properties", two fs.nfs) is refused with ErrDuplicateKey naming both
// lines: readers disagree on which copy counts and cuFile does not say,
// so writing into either could leave the other's stale values live, and
// joining them would change which of the site's other settings count.
// Other duplicates are left as written, with a note each.
//
// The notes say what was removed and which duplicates were left.
func Merge(name string, src []byte, s Settings) (out []byte, notes []string, err error) {
	root, err := parse(name, src)
	if err != nil {
		return nil, nil, err
	}
	m := merger{name: name}
	if err := m.merge(root, s); err != nil {
		return nil, nil, err
	}
	return write(root), append(m.notes, foreignDuplicates(name, root)...), nil
}

// merger writes Settings into a parsed file named name.
type merger struct {
	name  string
	notes []string
}

func (m *merger) merge(root *value, s Settings) error {
	props, err := m.object(root, "", "properties")
	if err != nil {
		return err
	}
	props.set("use_pci_p2pdma", boolValue(s.P2PDMA))
	props.set("rdma_dynamic_routing", boolValue(s.DynamicRouting))
	block, err := m.object(root, "", "block")
	if err != nil {
		return err
	}
	nvme, err := m.object(block, "block.", "nvme")
	if err != nil {
		return err
	}
	nvme.set("use_pci_p2pdma", boolValue(s.P2PDMA))
	if len(s.FS) == 0 {
		return nil
	}
	fsObj, err := m.object(root, "", "fs")
	if err != nil {
		return err
	}
	for _, f := range s.FS {
		obj, err := m.object(fsObj, "fs.", f.FS)
		if err != nil {
			return err
		}
		if f.Mounts == nil {
			if obj.del("mount_table") {
				m.notes = append(m.notes, fmt.Sprintf("fs.%s.mount_table removed: fs.%s.rdma_dev_addr_list is set, and cuFile refuses both", f.FS, f.FS))
			}
			obj.set("rdma_dev_addr_list", stringsValue(f.Addrs))
			continue
		}
		if obj.del("rdma_dev_addr_list") {
			m.notes = append(m.notes, fmt.Sprintf("fs.%s.rdma_dev_addr_list removed: fs.%s.mount_table is set, and cuFile refuses both", f.FS, f.FS))
		}
		table, err := m.object(obj, "fs."+f.FS+".", "mount_table")
		if err != nil {
			return err
		}
		for _, mt := range f.Mounts {
			entry, err := m.object(table, "fs."+f.FS+".mount_table.", mt.Target)
			if err != nil {
				return err
			}
			entry.set("rdma_dev_addr_list", stringsValue(mt.Addrs))
		}
	}
	return nil
}

// object is the object at key in parent (path names parent), appended
// when missing. A key written twice in parent is an ErrDuplicateKey
// error, one whose value is not an object an error too; both name the
// file and the line.
func (m *merger) object(parent *value, path, key string) (*value, error) {
	first, again := parent.find(key)
	switch {
	case again != nil:
		return nil, fmt.Errorf("%s:%d:%d: %w %q (first at line %d): gpuaffinity writes under it, and cuFile does not document which copy it reads; join the two by hand",
			m.name, again.line, again.col, ErrDuplicateKey, path+key, first.line)
	case first == nil:
		c := &value{kind: kindObject}
		parent.set(key, c)
		return c, nil
	case first.val.kind != kindObject:
		return nil, fmt.Errorf("%s:%d:%d: %s%s is not an object", m.name, first.line, first.col, path, key)
	}
	return first.val, nil
}

// maxDuplicateNotes bounds the notes for duplicates left as written: a
// hostile file may hold thousands.
const maxDuplicateNotes = 10

// foreignDuplicates are the notes for the keys root still holds twice
// after a merge: none is on the way to a key gpuaffinity owns (those are
// set once or refused), so they are the site's, left as written.
func foreignDuplicates(name string, root *value) []string {
	var notes []string
	n := 0
	duplicates(root, "", func(path string, first, again member) {
		n++
		if n <= maxDuplicateNotes {
			notes = append(notes, fmt.Sprintf("%s:%d:%d: %q written twice (first at line %d): left as written, gpuaffinity does not own it; cuFile does not document which copy it reads",
				name, again.line, again.col, path, first.line))
		}
	})
	if n > maxDuplicateNotes {
		notes = append(notes, fmt.Sprintf("%s: %d more keys written twice, left as written", name, n-maxDuplicateNotes))
	}
	return notes
}
