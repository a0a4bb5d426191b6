package fakesystest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// JobsRoot builds machine and lays over it the /proc entries of pids and
// the etc/passwd of a recorded jobs overlay (audit/testdata/<name>-jobs:
// its proc/PID directories; and its sys/, KFD's per-process entries of
// an AMD machine, whole), and records NVML's process lists in the
// machine's nvml.json: compute[i] lists the pids on NVML GPU i; every
// other GPU gets empty lists, so no list is "not recorded". A pid of
// compute without a directory in the overlay is a process that ended.
func JobsRoot(tb testing.TB, machine, overlay string, pids []int, compute map[int][]int) string {
	tb.Helper()
	dir := Root(tb, machine)
	src := os.DirFS(overlay)
	if err := os.CopyFS(filepath.Join(dir, "etc"), mustSub(tb, src, "etc")); err != nil {
		tb.Fatal(err)
	}
	for _, pid := range pids {
		p := fmt.Sprintf("proc/%d", pid)
		if err := os.CopyFS(filepath.Join(dir, p), mustSub(tb, src, p)); err != nil {
			tb.Fatal(err)
		}
	}
	// KFD's per-process entries (AMD), where the overlay records them.
	if _, err := fs.Stat(src, "sys"); err == nil {
		if err := os.CopyFS(filepath.Join(dir, "sys"), mustSub(tb, src, "sys")); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, nvml.ReplayFileName)); err != nil && compute == nil {
		return dir // no NVML on the machine (AMD), and no list to record
	}
	lists := map[int][]nvml.ReplayProcess{}
	for i, pids := range compute {
		for _, pid := range pids {
			lists[i] = append(lists[i], nvml.ReplayProcess{PID: uint32(pid), UsedGPUMemory: 1 << 30})
		}
	}
	SetNVMLProcesses(tb, dir, lists, true)
	return dir
}

// SetNVMLProcesses records NVML's process lists in the nvml.json of the
// root dir: compute[i] is GetComputeRunningProcesses of NVML GPU i, with
// an empty graphics list. A GPU compute does not name gets empty lists
// too with all, else keeps what the file had (no answer: the list reads
// ERROR_NOT_SUPPORTED, "not recorded").
func SetNVMLProcesses(tb testing.TB, dir string, compute map[int][]nvml.ReplayProcess, all bool) {
	tb.Helper()
	path := filepath.Join(dir, nvml.ReplayFileName)
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var f nvml.ReplayFile
	if err := json.Unmarshal(raw, &f); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	for i := range f.Devices {
		ps, ok := compute[i]
		if !ok && !all {
			continue
		}
		if ps == nil {
			ps = []nvml.ReplayProcess{}
		}
		f.Devices[i].ComputeProcesses = &nvml.Answer[[]nvml.ReplayProcess]{Value: ps}
		f.Devices[i].GraphicsProcesses = &nvml.Answer[[]nvml.ReplayProcess]{Value: []nvml.ReplayProcess{}}
	}
	if raw, err = nvml.EncodeReplay(f); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		tb.Fatal(err)
	}
}

func mustSub(tb testing.TB, fsys fs.FS, dir string) fs.FS {
	tb.Helper()
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		tb.Fatal(err)
	}
	return sub
}

// JobsOverlay builds machine and lays the recorded jobs overlay dir (a
// directory of audit/testdata: the running processes' /proc entries,
// etc/passwd, KFD's proc entries) over it whole, and patches the
// overlay's NVML process lists (nvml-processes.json: {"compute": {"<NVML
// index>": [processes]}}) into the machine's nvml.json: a GPU the file
// does not name keeps no answer, and its lists read ERROR_NOT_SUPPORTED
// ("not recorded").
func JobsOverlay(tb testing.TB, machine, dir string) string {
	tb.Helper()
	root := Root(tb, machine)
	if err := os.CopyFS(root, os.DirFS(dir)); err != nil {
		tb.Fatal(err)
	}
	procs := filepath.Join(root, "nvml-processes.json")
	data, err := os.ReadFile(procs)
	if os.IsNotExist(err) {
		return root
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Remove(procs); err != nil {
		tb.Fatal(err)
	}
	var lists struct {
		Compute map[string][]nvml.ReplayProcess `json:"compute"`
	}
	if err := json.Unmarshal(data, &lists); err != nil {
		tb.Fatalf("%s: %v", filepath.Join(dir, "nvml-processes.json"), err)
	}
	compute := map[int][]nvml.ReplayProcess{}
	for idx, ps := range lists.Compute {
		i, err := strconv.Atoi(idx)
		if err != nil {
			tb.Fatalf("%s: GPU %q: %v", filepath.Join(dir, "nvml-processes.json"), idx, err)
		}
		compute[i] = ps
	}
	SetNVMLProcesses(tb, root, compute, false)
	return root
}
