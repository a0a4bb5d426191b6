package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// numaStates are the Status words of numa_status, nv_numa_status_messages
// in open-gpu-kernel-modules kernel-open/nvidia/nv-procfs.c ("invalid" is
// what numa_status_describe prints for a state outside them).
var numaStates = []string{"disabled", "offline", "online_in_progress", "online",
	"online_failed", "offline_in_progress", "offline_failed", "invalid"}

// numaStatus is what the driver's numa_status file says.
type numaStatus struct {
	node   int
	status string
}

// parseNUMAStatus reads numa_status as nv_procfs_read_numa_status prints
// it: "Node:      %d" and "Status:    %s", then, once the GPU is
// initialised, "Address:   %llx" and "Size:      %llx" (ignored here).
// Both the Node and the Status line are required.
func parseNUMAStatus(b []byte) (numaStatus, error) {
	var (
		st             numaStatus
		node, status   string
		hasNode, hasSt bool
	)
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "Node":
			node, hasNode = strings.TrimSpace(v), true
		case "Status":
			status, hasSt = strings.TrimSpace(v), true
		}
	}
	switch {
	case !hasNode:
		return st, errors.New("no Node line")
	case !hasSt:
		return st, errors.New("no Status line")
	case !slices.Contains(numaStates, status):
		return st, fmt.Errorf("Status %q is not one of the driver's states", status)
	}
	id, err := strconv.Atoi(node)
	if err != nil || id < 0 || id >= 1<<16 {
		// -1 is NUMA_NO_NODE: the driver knows no node for the memory.
		return st, fmt.Errorf("Node %q names no NUMA node", node)
	}
	st.node, st.status = id, status
	return st, nil
}

// fillGPUMemoryNodes sets each NVIDIA GPU's memory node source, and its
// memory node where NVML did not answer, from the driver's
// /proc/driver/nvidia/gpus/<bus id>/numa_status. The driver makes that
// file only where the GPU's memory is a NUMA node of its own (coherent
// platforms: Grace with Hopper or Blackwell); its node is fixed at probe
// (the first of the GPU's ACPI proximity domains, nv-pci.c), whatever
// the Status.
//
// NVML's answer wins where both speak: it is the interface NVIDIA
// documents (nvml.h GetNumaNodeId, nvidia-smi's GPU NUMA ID), while
// numa_status is a driver file without a stated format, and in a
// snapshot it can come from another moment than nvml.json. The two
// disagreeing is a warning naming the GPU and the file.
//
// A node whose Status is not "online" holds none (or not all) of the
// GPU's memory: nv-mmap.c maps GPU memory as NUMA pages only while the
// status is online, and the driver onlines it itself once the GPU is
// initialised (or nvidia-persistenced does, EnableUserNUMAManagement). The
// node is still the GPU's (its place in the distance table does not
// change), so it is kept, the status is recorded, and a warning says it
// is no memory node to bind to.
func fillGPUMemoryNodes(root *rootfs.Root, gs []topology.GPU, nodes []topology.NUMANode, warn func(...error)) {
	for i := range gs {
		g := &gs[i]
		if g.GPUNUMAID != nil {
			g.GPUNUMASource = topology.GPUNUMAFromNVML
		}
		rel := path.Join(procGPUs, g.BusID, "numa_status")
		file := "/" + rel
		b, err := root.ReadFile(rel, maxProcFile)
		if errors.Is(err, fs.ErrNotExist) {
			// A GPU NVML answers for has no memory node where
			// GetNumaNodeId says NOT_SUPPORTED: nothing is unknown.
			if g.GPUNUMAID == nil && g.State != topology.GPUOK {
				warnNoDriverDir(root, g.BusID, nodes, warn)
			}
			continue
		}
		if err != nil {
			warn(fmt.Errorf("GPU %s: GPU memory node: read %s: %w", g.BusID, file, err))
			continue
		}
		st, err := parseNUMAStatus(b)
		if err != nil {
			warn(fmt.Errorf("GPU %s: %s: %w; its GPU memory node is not taken from it", g.BusID, file, err))
			continue
		}
		g.GPUNUMAStatus = st.status
		switch {
		case g.GPUNUMAID != nil && *g.GPUNUMAID != st.node:
			warn(fmt.Errorf("GPU %s: NVML GetNumaNodeId says GPU memory node %d, %s says node %d; using NVML's",
				g.BusID, *g.GPUNUMAID, file, st.node))
		case g.GPUNUMAID == nil && !slices.ContainsFunc(nodes, func(n topology.NUMANode) bool { return n.ID == st.node }):
			warn(fmt.Errorf("GPU %s: %s names NUMA node %d, which sysfs does not list; its GPU memory node is not taken from it",
				g.BusID, file, st.node))
			g.GPUNUMAStatus = ""
			continue
		case g.GPUNUMAID == nil:
			id := st.node
			g.GPUNUMAID, g.GPUNUMASource = &id, topology.GPUNUMAFromProcfs
		}
		if st.status != topology.GPUNUMAOnline {
			warn(fmt.Errorf("GPU %s: %s: GPU memory node %d is %s, not online: the GPU's memory is not (all) in it, so it is no memory node to bind to",
				g.BusID, file, st.node, st.status))
		}
	}
}

// warnNoDriverDir warns where neither NVML nor the driver can say whether
// a GPU's memory is a NUMA node though the node has CPU-less nodes with
// memory (Grace's GPU memory, or CXL): the driver's folder for the GPU is
// missing (/proc/driver/nvidia not mounted in a container, a snapshot
// without it). Where the folder is there and holds no numa_status, the
// driver says the GPU's memory is no NUMA node: no warning.
func warnNoDriverDir(root *rootfs.Root, bus string, nodes []topology.NUMANode, warn func(...error)) {
	dir := path.Join(procGPUs, bus)
	if _, err := root.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	var memOnly []string
	for _, n := range nodes {
		if n.CPUs.IsEmpty() && n.MemoryBytes > 0 {
			memOnly = append(memOnly, strconv.Itoa(n.ID))
		}
	}
	if len(memOnly) == 0 {
		return
	}
	warn(fmt.Errorf("GPU %s: GPU memory node unknown: NVML does not name one and /%s is missing; CPU-less NUMA nodes %s may hold GPU memory (Grace)",
		bus, dir, strings.Join(memOnly, ",")))
}
