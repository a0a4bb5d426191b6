package numa

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
)

// Node is one NUMA node.
type Node struct {
	ID          int
	CPUs        cpuset.Set // nodeN/cpulist
	MemoryBytes uint64     // nodeN/meminfo "Node N MemTotal"
	Distances   []int      // nodeN/distance
}

// CPU is one logical CPU.
type CPU struct {
	ID       int
	Online   bool
	CoreID   int        // topology/core_id
	Socket   int        // topology/physical_package_id
	Siblings cpuset.Set // topology/thread_siblings_list (core_cpus_list)
	Node     int        // the node whose cpulist holds it; -1 if none
}

// Topology is what the package reads.
type Topology struct {
	Nodes    []Node // sorted by ID
	CPUs     []CPU  // online CPUs with topology, sorted by ID
	Online   cpuset.Set
	Offline  cpuset.Set
	Allowed  cpuset.Set // Cpus_allowed_list; Online when unreadable
	Arch     string     // "x86_64", "arm64", "ppc64" from cpuinfo's fields; "" unknown
	Vendor   string     // cpuinfo vendor_id
	Model    string     // cpuinfo model name
	FamilyID int        // cpuinfo cpu family
	ModelID  int        // cpuinfo model
	// Hypervisor is set where cpuinfo's flags (x86) include "hypervisor":
	// the CPU runs under a hypervisor.
	Hypervisor bool
}

// Paths under the root.
const (
	cpuDir    = "sys/devices/system/cpu"
	nodeDir   = "sys/devices/system/node"
	statusRel = "proc/self/status"
	cpuinfo   = "proc/cpuinfo"
)

// Read reads the topology under root. errs lists per-file problems.
func Read(root *rootfs.Root) (t Topology, errs []error) {
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	t.Online, err = readList(root, path.Join(cpuDir, "online"))
	note(err)
	t.Offline, err = readList(root, path.Join(cpuDir, "offline"))
	if !errors.Is(err, fs.ErrNotExist) {
		note(err)
	}
	t.Nodes, err = readNodes(root)
	note(err)
	if len(t.Nodes) == 0 {
		note(fmt.Errorf("%s: no NUMA nodes; assuming one node 0 with every online CPU",
			root.Path(nodeDir)))
		t.Nodes = []Node{{ID: 0, CPUs: t.Online, Distances: []int{10}}}
	}
	if t.Online.IsEmpty() {
		for _, n := range t.Nodes {
			t.Online = t.Online.Union(n.CPUs)
		}
	}
	// The kernel gives every CPU one node; a CPU two cpulists claim (a
	// hand-edited snapshot, a broken root) stays with the first (lowest
	// ID) node, so that no two ranks are given it, with a warning.
	nodeOf := map[int]int{}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		var dup []int
		for _, c := range n.CPUs.CPUs() {
			if _, taken := nodeOf[c]; taken {
				dup = append(dup, c)
				continue
			}
			nodeOf[c] = n.ID
		}
		if len(dup) > 0 {
			d := cpuset.Of(dup...)
			note(fmt.Errorf("%s: CPUs %s are also in the cpulist of NUMA node %d; they are counted in node %d only",
				root.Path(path.Join(nodeDir, fmt.Sprintf("node%d", n.ID), "cpulist")), d, nodeOf[dup[0]], nodeOf[dup[0]]))
			n.CPUs = n.CPUs.Difference(d)
		}
	}
	// SMT siblings share a core and a package: read the topology files
	// once per core, not once per CPU (each read costs a syscall round).
	known := map[int]CPU{}
	for _, id := range t.Online.CPUs() {
		c, ok := known[id]
		if !ok {
			var err error
			c, err = readCPU(root, id)
			note(err)
			if err == nil {
				for _, s := range c.Siblings.CPUs() {
					known[s] = c
				}
			}
		}
		c.ID, c.Node = id, -1
		if n, ok := nodeOf[id]; ok {
			c.Node = n
		}
		t.CPUs = append(t.CPUs, c)
	}
	t.Allowed, err = AllowedCPUs(root)
	if err != nil {
		note(fmt.Errorf("%w; taking every online CPU (%s) as allowed", err, t.Online))
		t.Allowed = t.Online
	}
	note(t.readCPUInfo(root))
	return t, errs
}

func readList(root *rootfs.Root, rel string) (cpuset.Set, error) {
	s, err := root.String(rel)
	return parseList(s, err, func() string { return root.Path(rel) })
}

// parseList is the CPU list a read of the file name gave.
func parseList(s string, err error, name func() string) (cpuset.Set, error) {
	if err != nil {
		return cpuset.Set{}, err
	}
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("%s: %w", name(), err)
	}
	return set, nil
}

func readNodes(root *rootfs.Root) ([]Node, error) {
	entries, err := root.ReadDir(nodeDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list NUMA nodes: %w", err)
	}
	var nodes []Node
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(rest)
		if err != nil || id < 0 {
			continue // "node" prefixes other files? none today; skip
		}
		n, err := readNode(root, path.Join(nodeDir, e.Name()), id)
		if err != nil {
			errs = append(errs, err)
		}
		nodes = append(nodes, n)
	}
	sortfn.Sort(nodes, func(a, b Node) int { return a.ID - b.ID })
	return nodes, errors.Join(errs...)
}

// readNode reads one node; a missing file leaves its field empty and is
// reported, the node is kept.
func readNode(root *rootfs.Root, dir string, id int) (Node, error) {
	n := Node{ID: id}
	var errs []error
	cpus, err := readList(root, path.Join(dir, "cpulist"))
	if err != nil {
		errs = append(errs, fmt.Errorf("NUMA node %d: %w", id, err))
	}
	n.CPUs = cpus
	if d, err := root.String(path.Join(dir, "distance")); err != nil {
		errs = append(errs, fmt.Errorf("NUMA node %d: %w", id, err))
	} else {
		for f := range strings.FieldsSeq(d) {
			v, err := strconv.Atoi(f)
			if err != nil || v < 0 {
				errs = append(errs, fmt.Errorf("NUMA node %d: %s: bad distance %q", id, root.Path(path.Join(dir, "distance")), f))
				n.Distances = nil
				break
			}
			n.Distances = append(n.Distances, v)
		}
	}
	mem, err := memTotal(root, path.Join(dir, "meminfo"))
	if err != nil {
		errs = append(errs, fmt.Errorf("NUMA node %d: %w", id, err))
	}
	n.MemoryBytes = mem
	return n, errors.Join(errs...)
}

// memTotal reads "Node 0 MemTotal:       528000000 kB".
func memTotal(root *rootfs.Root, rel string) (uint64, error) {
	name := root.Path(rel)
	b, err := root.ReadFile(rel, sysattr.MaxSize)
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) >= 4 && f[2] == "MemTotal:" {
			v, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: bad MemTotal %q", name, f[3])
			}
			mult := uint64(1)
			if len(f) >= 5 && f[4] == "kB" {
				mult = 1024
			}
			return v * mult, nil
		}
	}
	return 0, fmt.Errorf("%s: no MemTotal line", name)
}

func readCPU(root *rootfs.Root, id int) (CPU, error) {
	c := CPU{ID: id, Online: true, CoreID: -1, Socket: -1}
	rel := path.Join(cpuDir, "cpu"+strconv.Itoa(id), "topology")
	dir, err := root.OpenDir(rel)
	if err != nil {
		c.Siblings = cpuset.Of(id)
		return c, fmt.Errorf("cpu %d: %w", id, err)
	}
	defer dir.Close()
	var errs []error
	if c.CoreID, err = dir.Int("core_id"); err != nil {
		errs = append(errs, fmt.Errorf("cpu %d: %w", id, err))
		c.CoreID = -1
	}
	if c.Socket, err = dir.Int("physical_package_id"); err != nil {
		errs = append(errs, fmt.Errorf("cpu %d: %w", id, err))
		c.Socket = -1
	}
	sib, err := readDirList(dir, "thread_siblings_list")
	if errors.Is(err, fs.ErrNotExist) {
		sib, err = readDirList(dir, "core_cpus_list")
	}
	if err != nil || !sib.Contains(id) {
		if err == nil {
			err = fmt.Errorf("%s: siblings %q do not hold the CPU itself", dir.Path("thread_siblings_list"), sib)
		}
		errs = append(errs, fmt.Errorf("cpu %d: %w", id, err))
		sib = cpuset.Of(id)
	}
	c.Siblings = sib
	return c, errors.Join(errs...)
}

// readDirList reads a CPU list attribute of dir.
func readDirList(dir *rootfs.Dir, name string) (cpuset.Set, error) {
	s, err := dir.String(name)
	return parseList(s, err, func() string { return dir.Path(name) })
}

// AllowedCPUs reads Cpus_allowed_list from the root's proc/self/status:
// the CPUs this process (its cgroup's cpuset, its affinity) may use.
func AllowedCPUs(root *rootfs.Root) (cpuset.Set, error) {
	path := root.Path(statusRel)
	b, err := root.ReadFile(statusRel, 1<<20)
	if err != nil {
		return cpuset.Set{}, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := strings.CutPrefix(string(line), "Cpus_allowed_list:"); ok {
			set, err := cpuset.Parse(v)
			if err != nil {
				return cpuset.Set{}, fmt.Errorf("%s: %w", path, err)
			}
			return set, nil
		}
	}
	return cpuset.Set{}, fmt.Errorf("%s: no Cpus_allowed_list line", path)
}

// readCPUInfo takes vendor, model name, family, model and the hypervisor
// flag from the first
// processor block of /proc/cpuinfo. Arm cpuinfo has none of these: the
// fields stay empty and that is not an error.
// cpuinfoPrefix bounds the read of /proc/cpuinfo: more than one processor
// block of any CPU (an x86 block with every flag is under 4 KiB).
const cpuinfoPrefix = 16 << 10

func (t *Topology) readCPUInfo(root *rootfs.Root) (err error) {
	path := root.Path(cpuinfo)
	// Only the first processor block is read: a few kilobytes of a file
	// that has one block per CPU.
	b, err := root.ReadPrefix(cpuinfo, cpuinfoPrefix)
	if err == nil && len(b) == cpuinfoPrefix && !bytes.Contains(b, []byte("\n\n")) {
		b, err = root.ReadFile(cpuinfo, 16<<20) // a first block longer than that
	}
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4<<10), 1<<20)
	known := false // a field every architecture's block has
	defer func() {
		if !known && err == nil {
			err = fmt.Errorf("%s: the first processor block has no vendor_id, CPU implementer or cpu line: CPU vendor and model unknown", path)
		}
	}()
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break // end of the first processor block
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "vendor_id":
			t.Vendor, t.Arch, known = v, "x86_64", true
		case "CPU implementer", "CPU architecture":
			t.Arch, known = "arm64", true
		case "cpu":
			known = true
			if strings.HasPrefix(v, "POWER") {
				t.Arch = "ppc64"
			}
		case "model name":
			t.Model = v
		case "cpu family":
			t.FamilyID, _ = strconv.Atoi(v)
		case "model":
			t.ModelID, _ = strconv.Atoi(v)
		case "flags":
			t.Hypervisor = slices.Contains(strings.Fields(v), "hypervisor")
		}
	}
	return sc.Err()
}
