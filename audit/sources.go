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
// not be listed and why.
func Uses(n topology.Node, root *rootfs.Root, lib gonvml.Interface) (uses []Use, unread []string) {
	var nvidia, amd bool
	for _, g := range n.GPUs {
		if g.IsAMD() {
			amd = true
		} else {
			nvidia = true
		}
	}
	if nvidia {
		u, un := NVMLUses(n, lib)
		uses, unread = append(uses, u...), append(unread, un...)
	}
	if amd {
		u, un := KFDUses(n, root)
		uses, unread = append(uses, u...), append(unread, un...)
	}
	return uses, unread
}

// NVMLUses lists the processes on the node's NVIDIA GPUs from NVML's
// running compute and graphics processes (nvml.ReadProcesses), tied to
// the node's GPUs by bus id.
func NVMLUses(n topology.Node, lib gonvml.Interface) (uses []Use, unread []string) {
	gpus, err := nvml.ReadProcesses(lib)
	if err != nil {
		return nil, []string{"NVML: " + err.Error()}
	}
	byBus := map[string]int{}
	for _, g := range n.GPUs {
		byBus[g.BusID] = g.Index
	}
	for _, gp := range gpus {
		who := fmt.Sprintf("NVML GPU %d", gp.Index)
		if gp.BusID != "" {
			who += " (" + gp.BusID + ")"
		}
		for _, u := range gp.Unknown {
			unread = append(unread, who+": "+u)
		}
		idx, ok := byBus[gp.BusID]
		if gp.BusID != "" && !ok && len(gp.Processes) > 0 {
			unread = append(unread, who+": not a GPU of the discovered node; its processes are left out")
			continue
		}
		for _, p := range gp.Processes {
			uses = append(uses, Use{PID: int(p.PID), GPUs: []int{idx}, Sources: []string{"nvml"}})
		}
	}
	return uses, unread
}

// KFDUses lists the processes on the node's AMD GPUs from KFD's
// per-process directories, each GPU named by a vram_<gpu_id> file and
// tied to the node's GPU through the KFD topology node with that gpu_id
// (kfd.ReadTopology; GPU.AMD.KFDNodes).
func KFDUses(n topology.Node, root *rootfs.Root) (uses []Use, unread []string) {
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
		return nil, []string{"KFD: " + root.Path(kfdProcDir) + " is absent (amdkfd without per-process entries, Linux before 5.7): processes on AMD GPUs are not listed"}
	}
	if err != nil {
		return nil, []string{"KFD: " + root.Path(kfdProcDir) + ": " + why(err)}
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	if len(pids) > maxKFDProcs {
		unread = append(unread, fmt.Sprintf("KFD: %d processes, only the first %d read", len(pids), maxKFDProcs))
		pids = pids[:maxKFDProcs]
	}
	for _, pid := range pids {
		dir := fmt.Sprintf("%s/%d", kfdProcDir, pid)
		files, err := root.ReadDir(dir)
		if ended(err) {
			continue // the process closed /dev/kfd meanwhile
		}
		if err != nil {
			unread = append(unread, fmt.Sprintf("KFD: %s: %s", root.Path(dir), why(err)))
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
				unread = append(unread, fmt.Sprintf("KFD: process %d uses gpu_id %d, which no GPU of the discovered node has", pid, gid))
				continue
			}
			opened = append(opened, idx)
			// ROCr opens every GPU it sees, so a vram_ file says
			// "opened"; the GPUs it drives are those it holds VRAM on.
			b, err := root.ReadFile(dir+"/"+f.Name(), 64)
			if err != nil {
				unread = append(unread, fmt.Sprintf("KFD: %s: %s", root.Path(dir+"/"+f.Name()), why(err)))
				continue
			}
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && !slices.Contains(u.GPUs, idx) {
				u.GPUs = append(u.GPUs, idx)
			}
		}
		if len(u.GPUs) == 0 && len(opened) > 0 {
			unread = append(unread, fmt.Sprintf("KFD: process %d holds no VRAM on the GPUs it opened: each is counted as driven", pid))
			for _, idx := range opened {
				if !slices.Contains(u.GPUs, idx) {
					u.GPUs = append(u.GPUs, idx)
				}
			}
		}
		if len(u.GPUs) > 0 {
			uses = append(uses, u)
		}
	}
	return uses, unread
}
