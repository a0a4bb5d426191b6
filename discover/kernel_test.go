package discover

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Node.Kernel is the fixture's kernel release and the loaded modules of
// KernelModules (mlx5_core, which the specs also load, is not one).
func TestKernelInfo(t *testing.T) {
	for _, c := range []struct {
		machine string
		want    topology.KernelInfo
	}{
		{"dgx-h100", topology.KernelInfo{Release: "5.15.0-1042-nvidia", Modules: []string{"ib_core", "nvidia", "nvidia_peermem", "nvidia_uvm"}}},
		{"aws-p5", topology.KernelInfo{Release: "6.8.0-1015-aws", Modules: []string{"efa", "nvidia"}}},
		{"amd-mi300x", topology.KernelInfo{Release: "6.8.0-52-generic", Modules: []string{"amdgpu", "ib_core"}}},
	} {
		t.Run(c.machine, func(t *testing.T) {
			t.Parallel()
			n := discoverRoot(t, sharedRoot(t, c.machine))
			if d := cmp.Diff(c.want, n.Kernel); d != "" {
				t.Errorf("Kernel (-want +got):\n%s", d)
			}
		})
	}
}

// A missing release or module is an answer; an unreadable one is a
// warning naming the file.
func TestKernelInfoBadInput(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	rel := filepath.Join(root, "proc/sys/kernel/osrelease")
	if err := os.Remove(rel); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(root, "sys/module/nvidia_peermem"))
	n := discoverRoot(t, root)
	if n.Kernel.Release != "" || hasWarning(n, "osrelease") || hasWarning(n, "sys/module") {
		t.Errorf("missing files: %+v, warnings %q", n.Kernel, n.Warnings)
	}
	if d := cmp.Diff([]string{"ib_core", "nvidia", "nvidia_uvm"}, n.Kernel.Modules); d != "" {
		t.Errorf("modules (-want +got):\n%s", d)
	}
	// A directory where the release file belongs cannot be read; a file
	// where a module directory belongs is not a loaded module.
	if err := os.Mkdir(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sys/module/efa"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n = discoverRoot(t, root)
	if n.Kernel.Release != "" || !hasWarning(n, "/proc/sys/kernel/osrelease") || !hasWarning(n, "/sys/module/efa") {
		t.Errorf("unreadable files: %+v, warnings %q", n.Kernel, n.Warnings)
	}
	if d := cmp.Diff([]string{"ib_core", "nvidia", "nvidia_uvm"}, n.Kernel.Modules); d != "" {
		t.Errorf("modules (-want +got):\n%s", d)
	}
}
