package hwloccheck

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
)

// Tool is the hwloc program Locality runs.
const Tool = "lstopo-no-graphics"

// Locality returns, for every PCI function hwloc reports under root (keyed
// by its lower-case bus id, "0000:18:00.0"), the NUMA node hwloc gives it:
// the node whose CPUs cover the CPUs of the device's nearest non-I/O
// ancestor, or -1 when that ancestor spans several NUMA nodes (the device
// hangs at machine level).
//
// hwloc places a host bridge by the local_cpus of the first function below
// it, so a device whose ancestor covers exactly one node's CPUs reports
// that node even where sysfs says numa_node -1 (single-node VMs). Where
// CPU-less nodes share a CPU node's locality (Grace-Hopper's memory-only
// nodes, CXL memory) the lowest-numbered candidate, the CPU node, is
// returned.
func Locality(root string) (map[string]int, error) {
	objs, err := PCIObjects(root)
	if err != nil {
		return nil, err
	}
	loc := make(map[string]int, len(objs))
	for _, o := range objs {
		loc[o.BusID] = o.NUMANode
	}
	return loc, nil
}

// PCIObject is one PCI function as hwloc reports it.
type PCIObject struct {
	BusID string // lower case, "0000:18:00.0"
	// Type is hwloc's object type: "Bridge" for a function hwloc
	// recognised as a PCI bridge, "PCIDev" otherwise.
	Type     string
	NUMANode int // as Locality defines it
}

// PCIObjects runs hwloc on root and returns every PCI function it reports,
// in hwloc's order. Errors are as for Locality.
func PCIObjects(root string) ([]PCIObject, error) {
	path, err := exec.LookPath(Tool)
	if err != nil {
		return nil, fmt.Errorf("hwloccheck: %s not found (install hwloc): %w", Tool, err)
	}
	cmd := exec.Command(path, "--of", "xml", "--whole-io", "-")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "HWLOC_")
	}), "HWLOC_FSROOT="+root, "HWLOC_COMPONENTS=-x86")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("hwloccheck: %s with HWLOC_FSROOT=%s: %w: %s", Tool, root, err, strings.TrimSpace(stderr.String()))
	}
	objs, err := parseObjects(out)
	if err != nil {
		return nil, fmt.Errorf("hwloccheck: %s output for %s: %w", Tool, root, err)
	}
	return objs, nil
}

// object is one <object> of hwloc's XML (hwloc2.dtd).
type object struct {
	Type     string   `xml:"type,attr"`
	OSIndex  *int     `xml:"os_index,attr"`
	CPUSet   string   `xml:"cpuset,attr"`
	PCIBusID string   `xml:"pci_busid,attr"`
	Children []object `xml:"object"`
}

type topology struct {
	Objects []object `xml:"object"`
}

// ioTypes are hwloc's I/O and misc object types, which carry no cpuset.
var ioTypes = map[string]bool{"Bridge": true, "PCIDev": true, "OSDev": true, "Misc": true}

type numaNode struct {
	id   int
	cpus cpuset.Set
}

// parseObjects reads lstopo's XML; it does no I/O.
func parseObjects(data []byte) ([]PCIObject, error) {
	var t topology
	if err := xml.Unmarshal(data, &t); err != nil {
		return nil, err
	}
	var nodes []numaNode
	type dev struct {
		bus, typ string
		cpus     cpuset.Set
	}
	var devs []dev
	var walk func(o object, anc cpuset.Set) error
	walk = func(o object, anc cpuset.Set) error {
		if !ioTypes[o.Type] && o.CPUSet != "" {
			set, err := parseBitmap(o.CPUSet)
			if err != nil {
				return fmt.Errorf("%s cpuset: %w", o.Type, err)
			}
			anc = set
			if o.Type == "NUMANode" && o.OSIndex != nil {
				nodes = append(nodes, numaNode{*o.OSIndex, set})
			}
		}
		if (o.Type == "PCIDev" || o.Type == "Bridge") && o.PCIBusID != "" {
			devs = append(devs, dev{strings.ToLower(o.PCIBusID), o.Type, anc})
		}
		for _, c := range o.Children {
			if err := walk(c, anc); err != nil {
				return err
			}
		}
		return nil
	}
	for _, o := range t.Objects {
		if err := walk(o, cpuset.Set{}); err != nil {
			return nil, err
		}
	}
	if len(t.Objects) == 0 {
		return nil, errors.New("no topology objects")
	}
	slices.SortFunc(nodes, func(a, b numaNode) int { return a.id - b.id })
	objs := make([]PCIObject, 0, len(devs))
	for _, d := range devs {
		objs = append(objs, PCIObject{BusID: d.bus, Type: d.typ, NUMANode: nodeOf(d.cpus, nodes)})
	}
	return objs, nil
}

// nodeOf is the lowest NUMA node whose CPUs include all of cpus; -1 if
// none does.
func nodeOf(cpus cpuset.Set, nodes []numaNode) int {
	if cpus.IsEmpty() {
		return -1
	}
	for _, n := range nodes {
		if cpus.Difference(n.cpus).IsEmpty() {
			return n.id
		}
	}
	return -1
}

// parseBitmap reads hwloc's bitmap text: comma-separated 32-bit words,
// most significant first, each "0x"-prefixed; an empty word is zero
// ("0x000000ff,,0xffffffff"). An infinite set ("0xf...f,...") is refused.
func parseBitmap(s string) (cpuset.Set, error) {
	if strings.HasPrefix(s, "0xf...f") {
		return cpuset.Set{}, fmt.Errorf("infinite bitmap %q", s)
	}
	words := strings.Split(s, ",")
	for i, w := range words {
		w = strings.TrimPrefix(w, "0x")
		if w == "" {
			w = "0"
		}
		words[i] = w
	}
	return cpuset.ParseMask(strings.Join(words, ","))
}
