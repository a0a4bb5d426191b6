package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/kfd"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// kfdProcDir is where amdkfd lists the processes that opened /dev/kfd:
// one directory per PID (kfd_process.c kfd_procfs_add_process), holding
// pasid, queues/, and per GPU vram_<gpu_id> and sdma_<gpu_id>
// (kfd_procfs_add_sysfs_files; stats_<gpu_id>/ on newer kernels), where
// gpu_id is the KFD topology node's (topology/nodes/N/gpu_id).
const kfdProcDir = "sys/class/kfd/kfd/proc"

// maxKFDProcs bounds the KFD process directories read.
const maxKFDProcs = 1 << 16

// Uses lists the processes using the node's GPUs from every source that
// applies: NVML (lib) where the node has NVIDIA GPUs, KFD under root
// where it has AMD GPUs. unread names each source, or GPU, that could
// not be listed and why. It is List without the GPUs left unlisted.
func Uses(n topology.Node, root *rootfs.Root, lib gonvml.Interface) (uses []Use, unread []string) {
	l := List(n, root, lib)
	return l.Uses, l.Unread
}

// Listing is what the GPU sources listed at one time.
type Listing struct {
	// Uses are the processes listed, one Use per source's entry (Run
	// merges the entries of one PID).
	Uses []Use
	// Unread names each source, or GPU, that could not be listed and
	// why, and an NVML GPU the discovery does not have (its processes
	// left out): what Uses returns as unread. A note on one process (a
	// KFD process holding no VRAM) is its Use's Notes instead.
	Unread []string
	// Unlisted are the GPU.Index values of the node's GPUs whose process
	// list could not be read whole (NVML not available, a failed list
	// call such as ERROR_NO_PERMISSION or ERROR_NOT_SUPPORTED, KFD's proc
	// directory or a process's entry unreadable): a process on them may
	// be missing from Uses, so none of them may be read as "no process".
	// Ascending.
	Unlisted []int
}

// List lists the processes using the node's GPUs as Uses does, and says
// which GPUs' lists are not whole (Listing.Unlisted).
func List(n topology.Node, root *rootfs.Root, lib gonvml.Interface) Listing {
	var nvidia, amd bool
	for _, g := range n.GPUs {
		if g.IsAMD() {
			amd = true
		} else {
			nvidia = true
		}
	}
	var l Listing
	if nvidia {
		nvmlList(n, lib, &l)
	}
	if amd {
		kfdList(n, root, &l)
	}
	slices.Sort(l.Unlisted)
	l.Unlisted = slices.Compact(l.Unlisted)
	return l
}

// NVMLUses lists the processes on the node's NVIDIA GPUs from NVML's
// running compute and graphics processes (nvml.ReadProcesses), tied to
// the node's GPUs by bus id.
func NVMLUses(n topology.Node, lib gonvml.Interface) (uses []Use, unread []string) {
	var l Listing
	nvmlList(n, lib, &l)
	return l.Uses, l.Unread
}

// nvmlList is NVMLUses into l, with the NVIDIA GPUs whose lists failed.
func nvmlList(n topology.Node, lib gonvml.Interface, l *Listing) {
	gpus, err := nvml.ReadProcesses(lib)
	if err != nil {
		l.Unread = append(l.Unread, "NVML: "+err.Error())
		for _, g := range n.GPUs {
			if !g.IsAMD() {
				l.Unlisted = append(l.Unlisted, g.Index)
			}
		}
		return
	}
	byBus := map[string]int{}
	byNVML := map[int]int{}
	for _, g := range n.GPUs {
		if g.IsAMD() {
			continue
		}
		byBus[g.BusID] = g.Index
		if g.NVMLIndex != nil {
			byNVML[*g.NVMLIndex] = g.Index
		}
	}
	seen := map[int]bool{}
	for _, gp := range gpus {
		who := fmt.Sprintf("NVML GPU %d", gp.Index)
		if gp.BusID != "" {
			who += " (" + gp.BusID + ")"
		}
		for _, u := range gp.Unknown {
			l.Unread = append(l.Unread, who+": "+u)
		}
		idx, ok := byBus[gp.BusID]
		if gp.BusID == "" {
			// No bus id (its handle or GetPciInfo failed): the node's
			// GPU of that NVML index, if any, is not listed.
			idx, ok = byNVML[gp.Index]
		}
		if ok {
			seen[idx] = true
			if len(gp.Unknown) > 0 {
				l.Unlisted = append(l.Unlisted, idx)
			}
		}
		if gp.BusID != "" && !ok && len(gp.Processes) > 0 {
			l.Unread = append(l.Unread, who+": not a GPU of the discovered node; its processes are left out")
			continue
		}
		if !ok {
			continue
		}
		for _, p := range gp.Processes {
			l.Uses = append(l.Uses, Use{PID: int(p.PID), GPUs: []int{idx}, Sources: []string{"nvml"}})
		}
	}
	// A GPU of the node NVML no longer lists (lost, renumbered) was not
	// listed.
	for _, g := range n.GPUs {
		if !g.IsAMD() && !seen[g.Index] {
			l.Unlisted = append(l.Unlisted, g.Index)
			l.Unread = append(l.Unread, fmt.Sprintf("NVML: GPU %d (%s) of the discovered node is not among NVML's GPUs: its processes are not listed", g.Index, g.BusID))
		}
	}
}

// KFDUses lists the processes on the node's AMD GPUs from KFD's
// per-process directories, each GPU named by a vram_<gpu_id> file and
// tied to the node's GPU through the KFD topology node with that gpu_id
// (kfd.ReadTopology; GPU.AMD.KFDNodes).
func KFDUses(n topology.Node, root *rootfs.Root) (uses []Use, unread []string) {
	var l Listing
	kfdList(n, root, &l)
	return l.Uses, l.Unread
}

// kfdList is KFDUses into l, with the AMD GPUs whose lists are not
// whole: all of them where the proc directory, or a process's entry,
// could not be read (which GPUs it uses is unknown), the one GPU whose
// vram_ file could not be.
func kfdList(n topology.Node, root *rootfs.Root, l *Listing) {
	allAMD := func() {
		for _, g := range n.GPUs {
			if g.IsAMD() {
				l.Unlisted = append(l.Unlisted, g.Index)
			}
		}
	}
	topo, _ := kfd.ReadTopology(root) // discovery already warned of its errors
	gpuOf := map[uint32]int{}
	for _, kn := range topo.Nodes {
		if kn.GPUID == 0 {
			continue
		}
		for _, g := range n.GPUs {
			if g.AMD != nil && slices.Contains(g.AMD.KFDNodes, kn.ID) {
				gpuOf[kn.GPUID] = g.Index
			}
		}
	}
	ents, err := root.ReadDir(kfdProcDir)
	if errors.Is(err, fs.ErrNotExist) {
		l.Unread = append(l.Unread, "KFD: "+root.Path(kfdProcDir)+" is absent (amdkfd without per-process entries, Linux before 5.7): processes on AMD GPUs are not listed")
		allAMD()
		return
	}
	if err != nil {
		l.Unread = append(l.Unread, "KFD: "+root.Path(kfdProcDir)+": "+why(err))
		allAMD()
		return
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	if len(pids) > maxKFDProcs {
		l.Unread = append(l.Unread, fmt.Sprintf("KFD: %d processes, only the first %d read", len(pids), maxKFDProcs))
		pids = pids[:maxKFDProcs]
		allAMD()
	}
	for _, pid := range pids {
		dir := fmt.Sprintf("%s/%d", kfdProcDir, pid)
		files, err := root.ReadDir(dir)
		if ended(err) {
			continue // the process closed /dev/kfd meanwhile
		}
		if err != nil {
			l.Unread = append(l.Unread, fmt.Sprintf("KFD: %s: %s", root.Path(dir), why(err)))
			allAMD()
			continue
		}
		u := Use{PID: pid, Sources: []string{"kfd"}}
		var opened []int
		for _, f := range files {
			id, ok := strings.CutPrefix(f.Name(), "vram_")
			if !ok {
				continue
			}
			gid, err := strconv.ParseUint(id, 10, 32)
			if err != nil {
				continue
			}
			idx, ok := gpuOf[uint32(gid)]
			if !ok {
				l.Unread = append(l.Unread, fmt.Sprintf("KFD: process %d uses gpu_id %d, which no GPU of the discovered node has", pid, gid))
				continue
			}
			opened = append(opened, idx)
			// ROCr opens every GPU it sees, so a vram_ file says
			// "opened"; the GPUs it drives are those it holds VRAM on.
			b, err := root.ReadFile(dir+"/"+f.Name(), 64)
			if err != nil {
				l.Unread = append(l.Unread, fmt.Sprintf("KFD: %s: %s", root.Path(dir+"/"+f.Name()), why(err)))
				l.Unlisted = append(l.Unlisted, idx)
				continue
			}
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && !slices.Contains(u.GPUs, idx) {
				u.GPUs = append(u.GPUs, idx)
			}
		}
		if len(u.GPUs) == 0 && len(opened) > 0 {
			// A note, not a gap: the process was listed whole.
			u.Notes = append(u.Notes, "KFD: it holds no VRAM on the GPUs it opened: each is counted as driven")
			for _, idx := range opened {
				if !slices.Contains(u.GPUs, idx) {
					u.GPUs = append(u.GPUs, idx)
				}
			}
		}
		if len(u.GPUs) > 0 {
			l.Uses = append(l.Uses, u)
		}
	}
}
