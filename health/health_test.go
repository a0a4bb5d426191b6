package health

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func ptr[T any](v T) *T { return &v }

// healthyRoot builds a fixture root with nvidia_peermem loaded.
func healthyRoot(t *testing.T, machine string) string {
	t.Helper()
	root := fakesystest.Root(t, machine)
	if err := os.MkdirAll(filepath.Join(root, "sys/module/nvidia_peermem"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

func discoverRoot(t *testing.T, root string) topology.Node {
	t.Helper()
	n, err := discover.Discover(discover.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// goodHealth fills every NVML health field with a healthy answer.
func goodHealth(n *topology.Node) {
	for i := range n.GPUs {
		n.GPUs[i].Health = topology.GPUHealth{
			Persistence: ptr(true), ECCUncorrectedVolatile: ptr(uint64(0)),
			RemapPending: ptr(false), RemapFailure: ptr(false),
			RetiredPages: ptr(0), RetiredPagesPending: ptr(false),
			FabricState: ptr(3), FabricStatus: ptr(0), RecoveryAction: ptr(0),
		}
	}
}

func run(t *testing.T, n topology.Node, opts Options) Report {
	t.Helper()
	rep, err := Run(context.Background(), n, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func result(t *testing.T, rep Report, id string) Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no result %s", id)
	return Result{}
}

func TestHealthyNodesPass(t *testing.T) {
	for _, m := range []string{"dgx-h100", "oci-bm-gpu-h100", "azure-nd-h100-v5", "aws-p5"} {
		t.Run(m, func(t *testing.T) {
			root := healthyRoot(t, m)
			n := discoverRoot(t, root)
			goodHealth(&n)
			rep := run(t, n, Options{Root: root, Interval: time.Millisecond})
			for _, r := range rep.Results {
				if r.Verdict == Fail || r.Verdict == Warn {
					t.Errorf("%s: %s %s", r.ID, r.Verdict, r.Reason)
				}
			}
			if !rep.Healthy || len(rep.Results) != len(Checks()) {
				t.Errorf("healthy %v, %d results", rep.Healthy, len(rep.Results))
			}
			for _, id := range []string{"gpu.count", "gpu.visible", "gpu.pcie_link", "gpu.row_remap", "gpu.ecc",
				"gpu.retired_pages", "gpu.recovery_action", "gpu.fabric", "gpu.persistence", "nvlink.active",
				"nic.count", "nic.port_state", "nic.rate", "topo.aligned", "topo.gdr"} {
				if r := result(t, rep, id); r.Verdict != Pass {
					t.Errorf("%s: %s %s", id, r.Verdict, r.Reason)
				}
			}
			if m == "azure-nd-h100-v5" && !strings.Contains(result(t, rep, "topo.aligned").Reason, "note:") {
				t.Errorf("azure undecided NODE pairs want a note: %s", result(t, rep, "topo.aligned").Reason)
			}
		})
	}
}

// TestFailures: each failure is reported by the right check, naming the device.
func TestFailures(t *testing.T) {
	base := healthyRoot(t, "dgx-h100")
	n0 := discoverRoot(t, base)
	gpu3 := n0.GPUs[3].BusID
	cases := []struct {
		id, want string
		verdict  Verdict
		edit     func(t *testing.T, root string, n *topology.Node)
	}{
		{"gpu.count", "7 GPUs on the PCI bus, expected 8", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs = n.GPUs[:7]
		}},
		{"gpu.visible", "GPU 2", Fail, func(t *testing.T, root string, n *topology.Node) { n.GPUs[2].State = topology.GPULost }},
		{"gpu.pcie_link", "GPU 3 (" + gpu3 + ") PCIe link x8 of x16", Fail, func(t *testing.T, root string, n *topology.Node) {
			write(t, root, "sys/bus/pci/devices/"+gpu3+"/current_link_width", "8")
		}},
		{"gpu.row_remap", "GPU 1 (" + n0.GPUs[1].BusID + ") row remapping pending", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[1].Health.RemapPending = ptr(true)
		}},
		{"gpu.row_remap", "row remapping failed", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[1].Health.RemapFailure = ptr(true)
		}},
		{"gpu.ecc", "GPU 5 (" + n0.GPUs[5].BusID + ") has 2 uncorrectable volatile ECC errors", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[5].Health.ECCUncorrectedVolatile = ptr(uint64(2))
		}},
		{"gpu.retired_pages", "page retirement pending", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[0].Health.RetiredPagesPending = ptr(true)
		}},
		{"gpu.retired_pages", "70 retired pages", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[0].Health.RetiredPages = ptr(70)
		}},
		{"gpu.xid", "GPU 3 (" + gpu3 + ") XID 79: GPU has fallen off the bus.", Fail, func(t *testing.T, root string, n *topology.Node) {
			bus := strings.TrimSuffix(gpu3, ".0")
			write(t, root, "dev/kmsg", "6,1230,5600,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n"+
				"4,1234,5678,-;NVRM: Xid (PCI:"+bus+"): 13, pid=77, name=python, Graphics Exception\n"+
				"4,1235,5679,-;NVRM: Xid (PCI:"+bus+"): 79, pid=1234, name=python, GPU has fallen off the bus.\n SUBSYSTEM=pci\n")
		}},
		{"gpu.xid", "XID 63", Warn, func(t *testing.T, root string, n *topology.Node) {
			write(t, root, "dev/kmsg", "4,1,2,-;NVRM: Xid (PCI:"+strings.TrimSuffix(gpu3, ".0")+"): 63, pid=1, Row Remapper event\n")
		}},
		{"gpu.recovery_action", "needs recovery: node reboot", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[6].Health.RecoveryAction = ptr(2)
		}},
		{"gpu.fabric", "GPU 4 (" + n0.GPUs[4].BusID + "): fabric registration in progress", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[4].Fabric.State, n.GPUs[4].Fabric.Status = topology.FabricInProgress, nil
		}},
		{"gpu.fabric", "completed with error ERROR_UNKNOWN (NVML return 999)", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[4].Fabric.Status = ptr(999)
		}},
		{"gpu.persistence", "persistence mode off", Warn, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[0].Health.Persistence = ptr(false)
		}},
		{"nvlink.active", "GPU 7 (" + n0.GPUs[7].BusID + ") has 17 of 18 NVLinks active (down: 4)", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[7].NVLinks[4].Active = false
		}},
		{"nic.count", "7 compute NICs, expected 8", Fail, func(t *testing.T, root string, n *topology.Node) {
			for i := range n.NICs {
				if n.NICs[i].Name == "mlx5_0" {
					n.NICs[i].Role = topology.RoleOther
				}
			}
		}},
		{"nic.port_state", "NIC mlx5_0 (0000:18:00.0) port 1 is DOWN/", Fail, func(t *testing.T, root string, n *topology.Node) {
			write(t, root, "sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN")
			write(t, root, "sys/class/infiniband/mlx5_0/ports/1/phys_state", "3: Disabled")
		}},
		{"nic.rate", "NIC mlx5_3", Fail, func(t *testing.T, root string, n *topology.Node) {
			write(t, root, "sys/class/infiniband/mlx5_3/ports/1/rate", "200 Gb/sec (4X HDR)")
		}},
		{"nic.firmware", "NIC mlx5_4 runs firmware 28.36.1010, others 28.39.1002", Fail, func(t *testing.T, root string, n *topology.Node) {
			write(t, root, "sys/class/infiniband/mlx5_4/fw_ver", "28.36.1010")
		}},
		{"topo.aligned", "GPU 2 (" + n0.GPUs[2].BusID + ")'s nearest compute NIC", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.Pairs[2].Class = topology.ClassSYS
		}},
		{"topo.gdr", "nvidia_peermem not loaded", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.Kernel = topology.KernelInfo{Modules: []string{"nvidia"}} // no release: no dma-buf fallback either
		}},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			root := healthyRoot(t, "dgx-h100")
			var n topology.Node
			// File edits first, then discovery, then model edits.
			edited := false
			probe := discoverRoot(t, root)
			c.edit(t, root, &probe)
			n = discoverRoot(t, root)
			c.edit(t, root, &n)
			_ = edited
			goodHealthKeep(&n, probe)
			opts := Options{Root: root}
			if c.id == "gpu.count" || c.id == "nic.count" {
				e := Learn(n0)
				opts.Expect = &e
			}
			rep := run(t, n, opts)
			r := result(t, rep, c.id)
			if r.Verdict != c.verdict || !strings.Contains(r.Reason, c.want) {
				t.Errorf("%s = %s %q, want %s containing %q", c.id, r.Verdict, r.Reason, c.verdict, c.want)
			}
			if c.verdict == Fail && (rep.Healthy || r.Hint == "") {
				t.Errorf("healthy %v, hint %q", rep.Healthy, r.Hint)
			}
			for _, o := range rep.Results {
				if o.ID != c.id && o.Verdict == Fail {
					t.Errorf("also failed: %s %s", o.ID, o.Reason)
				}
			}
		})
	}
}

// keep sets *p to d where the edit left it nil.
func keep[T any](p **T, d *T) {
	if *p == nil {
		*p = d
	}
}

// goodHealthKeep fills healthy NVML answers where the edit left none.
func goodHealthKeep(n *topology.Node, _ topology.Node) {
	var g topology.Node
	g.GPUs = make([]topology.GPU, len(n.GPUs))
	goodHealth(&g)
	for i := range n.GPUs {
		h, d := &n.GPUs[i].Health, g.GPUs[i].Health
		keep(&h.Persistence, d.Persistence)
		keep(&h.ECCUncorrectedVolatile, d.ECCUncorrectedVolatile)
		keep(&h.RemapPending, d.RemapPending)
		keep(&h.RemapFailure, d.RemapFailure)
		keep(&h.RetiredPages, d.RetiredPages)
		keep(&h.RetiredPagesPending, d.RetiredPagesPending)
		keep(&h.FabricState, d.FabricState)
		keep(&h.FabricStatus, d.FabricStatus)
		keep(&h.RecoveryAction, d.RecoveryAction)
	}
}

func write(t *testing.T, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(data+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNICErrorCounters(t *testing.T) {
	root := healthyRoot(t, "dgx-h100")
	n := discoverRoot(t, root)
	rep := run(t, n, Options{Root: root, Only: []string{"nic.errors"}})
	if r := rep.Results[0]; r.Verdict != Skip {
		t.Errorf("interval 0: %s %s", r.Verdict, r.Reason)
	}
	bump := func(ctx context.Context, d time.Duration) error {
		write(t, root, "sys/class/infiniband/mlx5_5/ports/1/counters/symbol_error", "7")
		write(t, root, "sys/class/infiniband/mlx5_5/ports/1/counters/link_downed", "1")
		return nil
	}
	rep = run(t, n, Options{Root: root, Only: []string{"nic.errors"}, Interval: time.Second, Sleep: bump})
	if r := rep.Results[0]; r.Verdict != Fail || !strings.Contains(r.Reason, "NIC mlx5_5 port 1: symbol_error +7, link_downed +1") {
		t.Errorf("counters: %s %s", r.Verdict, r.Reason)
	}
}

func TestTimeout(t *testing.T) {
	root := healthyRoot(t, "dgx-h100")
	n := discoverRoot(t, root)
	stuck := func(ctx context.Context, d time.Duration) error { time.Sleep(2 * time.Second); return nil }
	rep := run(t, n, Options{Root: root, Only: []string{"nic.errors"}, Interval: time.Second, Sleep: stuck, Timeout: 50 * time.Millisecond})
	if r := rep.Results[0]; r.Verdict != Fail || !strings.HasPrefix(r.Reason, "timed out") {
		t.Errorf("stuck check: %s %s", r.Verdict, r.Reason)
	}
}

func TestProfiles(t *testing.T) {
	root := healthyRoot(t, "dgx-h100")
	write(t, root, "sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN")
	n := discoverRoot(t, root)
	for _, c := range []struct {
		p       Profile
		multi   bool
		healthy bool
	}{{Pretrain, false, false}, {Finetune, false, true}, {Finetune, true, false}, {Inference, true, true}} {
		rep := run(t, n, Options{Root: root, Profile: c.p, MultiNode: c.multi})
		r := result(t, rep, "nic.port_state")
		if rep.Healthy != c.healthy || (c.healthy && (r.Verdict != Warn || !r.Downgraded)) {
			t.Errorf("%s multi=%v: healthy %v, %s", c.p, c.multi, rep.Healthy, r.Verdict)
		}
	}
	// GPU failures stay failures in every profile.
	n.GPUs[0].Health.ECCUncorrectedVolatile = ptr(uint64(1))
	if rep := run(t, n, Options{Root: root, Profile: Inference}); rep.Healthy {
		t.Error("inference: ECC error must fail")
	}
	if _, err := Run(context.Background(), n, Options{Profile: "train"}); err == nil {
		t.Error("bad profile: want an error")
	}
}

func TestSelection(t *testing.T) {
	root := healthyRoot(t, "dgx-h100")
	write(t, root, "sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN") // GPU 0's NIC
	n := discoverRoot(t, root)
	n.GPUs[0].Health.RemapPending = ptr(true)
	rep := run(t, n, Options{Root: root, GPUs: []int{1, 2}})
	if !rep.Healthy {
		t.Errorf("GPUs 1,2 healthy, got %s", rep.Summary())
	}
	if r := result(t, rep, "nic.count"); r.Verdict != Pass || !strings.Contains(r.Reason, "2 compute NICs") {
		t.Errorf("nic.count: %s", r.Reason)
	}
	rep = run(t, n, Options{Root: root, GPUs: []int{0}})
	if rep.Healthy || len(rep.Failed()) != 2 {
		t.Errorf("GPU 0: %+v", rep.Failed())
	}
	if _, err := Run(context.Background(), n, Options{GPUs: []int{9}}); err == nil {
		t.Error("GPU 9: want an error")
	}
}

// topo.gdr reads discovery's Node.Kernel and Node.Driver, no file: the
// root given does not exist.
func TestGDRRules(t *testing.T) {
	n0 := discoverRoot(t, fakesystest.Root(t, "dgx-h100"))
	if !slices.Contains(n0.Kernel.Modules, "nvidia_peermem") || n0.Kernel.Release == "" {
		t.Fatalf("the DGX fixture loads nvidia_peermem and names its kernel: %+v", n0.Kernel)
	}
	for _, c := range []struct {
		name    string
		kernel  topology.KernelInfo
		driver  string
		verdict Verdict
		want    string
	}{
		{"peermem", topology.KernelInfo{Release: "5.4.0-100-generic", Modules: []string{"nvidia", "nvidia_peermem"}}, "470.256.02", Pass, "nvidia_peermem loaded"},
		{"no peermem, no kernel", topology.KernelInfo{Modules: []string{"nvidia"}}, "550.54.15", Fail, "kernel version is unknown"},
		{"dma-buf", topology.KernelInfo{Release: "6.8.0-45-generic"}, "550.54.15", Pass, "dma-buf: driver 550.54.15"},
		{"old kernel", topology.KernelInfo{Release: "5.4.0-100-generic"}, "550.54.15", Fail, "kernel 5.4 is older than 5.12"},
		{"535 on 5.4", topology.KernelInfo{Release: "5.4.0-100-generic", Modules: []string{"nvidia", "nvidia_uvm"}}, "535.183.01", Fail, "kernel 5.4 is older than 5.12"},
		{"535 on 6.5", topology.KernelInfo{Release: "6.5.0-1024-oem", Modules: []string{"nvidia", "nvidia_uvm"}}, "535.183.01", Pass, "kernel 6.5"},
		{"old driver", topology.KernelInfo{Release: "6.5.0-1024-oem"}, "470.256.02", Fail, "older than R515"},
		{"no driver", topology.KernelInfo{Release: "6.5.0-1024-oem"}, "", Fail, "driver version is unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := n0
			n.Kernel = c.kernel
			n.Driver = topology.DriverInfo{Version: c.driver, Source: "nvml"}
			r := run(t, n, Options{Root: "/nonexistent", Only: []string{"topo.gdr"}}).Results[0]
			if r.Verdict != c.verdict || !strings.Contains(r.Reason, c.want) {
				t.Errorf("%s %q, want %s containing %q", r.Verdict, r.Reason, c.verdict, c.want)
			}
		})
	}
}

// fakeReader is a Reader of chosen port counters and kernel log.
type fakeReader struct {
	mu       sync.Mutex
	counters map[string]map[string]uint64 // "mlx5_0/1": name: value
	kmsg     string
	kmsgErr  error
	reads    int // PortCounters calls
}

func (f *fakeReader) PortCounters(dev string, port int, names []string) (map[string]uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	c, ok := f.counters[fmt.Sprintf("%s/%d", dev, port)]
	if !ok {
		return nil, fmt.Errorf("%s port %d: no counters: %w", dev, port, fs.ErrNotExist)
	}
	out := map[string]uint64{}
	for _, name := range names {
		if v, ok := c[name]; ok {
			out[name] = v
		}
	}
	return out, nil
}

func (f *fakeReader) KernelLog(context.Context) ([]byte, error) { return []byte(f.kmsg), f.kmsgErr }

func (f *fakeReader) set(key, name string, v uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counters[key][name] = v
}

// nic.errors sees a counter increase through a replaced Reader; no file
// is read (the root does not exist).
func TestNICErrorsReader(t *testing.T) {
	n := discoverRoot(t, fakesystest.Root(t, "dgx-h100"))
	zero := func() map[string]uint64 {
		return map[string]uint64{"symbol_error": 0, "link_downed": 0, "excessive_buffer_overrun_errors": 0, "local_link_integrity_errors": 0}
	}
	f := &fakeReader{counters: map[string]map[string]uint64{}}
	for _, c := range n.NICs {
		if c.Role == topology.RoleCompute {
			for _, p := range c.Ports {
				f.counters[fmt.Sprintf("%s/%d", c.RDMADevice, p.Port)] = zero()
			}
		}
	}
	if len(f.counters) != 8 {
		t.Fatalf("%d compute ports, want 8", len(f.counters))
	}
	quiet := func(context.Context, time.Duration) error { return nil }
	opts := Options{Root: "/nonexistent", Reader: f, Only: []string{"nic.errors"}, Interval: time.Second, Sleep: quiet}
	if r := run(t, n, opts).Results[0]; r.Verdict != Pass || !strings.Contains(r.Reason, "8 ports") {
		t.Errorf("quiet counters: %s %s", r.Verdict, r.Reason)
	}
	if f.reads != 16 {
		t.Errorf("%d counter reads, want 2 per port", f.reads)
	}
	opts.Sleep = func(context.Context, time.Duration) error {
		f.set("mlx5_3/1", "link_downed", 2)
		f.set("mlx5_3/1", "local_link_integrity_errors", 5)
		return nil
	}
	if r := run(t, n, opts).Results[0]; r.Verdict != Fail || r.Reason != "NIC mlx5_3 port 1: link_downed +2, local_link_integrity_errors +5 in 1s" {
		t.Errorf("increase: %s %q", r.Verdict, r.Reason)
	}
	// A decrease (a counter reset) is no error; a port without counters
	// is left out.
	delete(f.counters, "mlx5_0/1")
	opts.Sleep = func(context.Context, time.Duration) error { f.set("mlx5_3/1", "link_downed", 0); return nil }
	if r := run(t, n, opts).Results[0]; r.Verdict != Pass || !strings.Contains(r.Reason, "7 ports") {
		t.Errorf("reset and a port without counters: %s %s", r.Verdict, r.Reason)
	}
	f.counters = map[string]map[string]uint64{}
	if r := run(t, n, opts).Results[0]; r.Verdict != Skip {
		t.Errorf("no counters anywhere: %s %s", r.Verdict, r.Reason)
	}
}

// gpu.xid reads the kernel log through the Reader.
func TestXIDReader(t *testing.T) {
	n := discoverRoot(t, fakesystest.Root(t, "dgx-h100"))
	bus := strings.TrimSuffix(n.GPUs[2].BusID, ".0")
	f := &fakeReader{kmsg: "4,1235,5679,-;NVRM: Xid (PCI:" + bus + "): 79, pid=1234, name=python, GPU has fallen off the bus.\n"}
	opts := Options{Root: "/nonexistent", Reader: f, Only: []string{"gpu.xid"}}
	if r := run(t, n, opts).Results[0]; r.Verdict != Fail || !strings.Contains(r.Reason, "GPU 2 ("+n.GPUs[2].BusID+") XID 79") {
		t.Errorf("XID 79: %s %q", r.Verdict, r.Reason)
	}
	f.kmsg = ""
	if r := run(t, n, opts).Results[0]; r.Verdict != Pass {
		t.Errorf("quiet log: %s %q", r.Verdict, r.Reason)
	}
	f.kmsgErr = fs.ErrNotExist
	if r := run(t, n, opts).Results[0]; r.Verdict != Skip || !strings.Contains(r.Reason, "no kernel log") {
		t.Errorf("no log: %s %q", r.Verdict, r.Reason)
	}
	f.kmsgErr = fs.ErrPermission
	if r := run(t, n, opts).Results[0]; r.Verdict != Skip || !strings.Contains(r.Reason, "CAP_SYSLOG") {
		t.Errorf("no permission: %s %q", r.Verdict, r.Reason)
	}
}

// The default Reader reads <root>/dev/kmsg and names it when absent.
func TestDefaultReaderKmsg(t *testing.T) {
	root := t.TempDir()
	if _, err := NewReader(root, "", nil).KernelLog(context.Background()); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(root, "dev/kmsg")) {
		t.Errorf("missing kmsg: %v", err)
	}
	write(t, root, "dev/kmsg", "6,1,2,-;hello")
	if b, err := NewReader(root, "", nil).KernelLog(context.Background()); err != nil || string(b) != "6,1,2,-;hello\n" {
		t.Errorf("kmsg: %q, %v", b, err)
	}
	n := discoverRoot(t, fakesystest.Root(t, "h200-vm"))
	if r := run(t, n, Options{Root: root + "/none", Only: []string{"gpu.xid"}}).Results[0]; r.Verdict != Skip || r.Reason != "no kernel log at "+root+"/none/dev/kmsg" {
		t.Errorf("missing kmsg: %s %q", r.Verdict, r.Reason)
	}
}

func TestNoNVLinkOrNVMLHealthSkips(t *testing.T) {
	n := discoverRoot(t, fakesystest.Root(t, "h200-vm"))
	rep := run(t, n, Options{Root: "/nonexistent"})
	for _, id := range []string{"nvlink.active", "gpu.xid", "nic.port_state"} {
		if r := result(t, rep, id); r.Verdict != Skip {
			t.Errorf("%s: %s %s", id, r.Verdict, r.Reason)
		}
	}
}

func TestLearnYAMLRoundTrip(t *testing.T) {
	n := discoverRoot(t, fakesystest.Root(t, "dgx-h100"))
	b, err := Learn(n).YAML()
	if err != nil {
		t.Fatal(err)
	}
	e, err := ParseExpect(b, "e.yaml")
	if err != nil || *e != Learn(n) {
		t.Fatalf("round trip: %v\n%s", err, b)
	}
	for _, want := range []string{"count: 8", "model: NVIDIA H100 80GB HBM3", "nvlinks_per_gpu: 18", "compute_count: 8", "rate_gbps: 400", "firmware: 28.39.1002"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("learned YAML lacks %q:\n%s", want, b)
		}
	}
	if _, err := ParseExpect([]byte("gpus:\n  cuont: 8\n"), "e.yaml"); err == nil || !strings.HasPrefix(err.Error(), "e.yaml: ") {
		t.Errorf("unknown key: want an error naming the file, got %v", err)
	}
	// A key given twice is an error, not the last one silently kept.
	if _, err := ParseExpect([]byte("gpus:\n  count: 8\n  count: 4\n"), "e.yaml"); err == nil || !strings.HasPrefix(err.Error(), "e.yaml: ") {
		t.Errorf("duplicate key: want an error naming the file, got %v", err)
	}
	// A version that reads as a number keeps its text.
	if e, err := ParseExpect([]byte("nics:\n  firmware: 28.10\n"), "e.yaml"); err != nil || e.NICs.Firmware != "28.10" {
		t.Errorf("firmware 28.10: %+v, %v", e, err)
	}
}

func TestParseKmsg(t *testing.T) {
	ev := ParseKmsg([]byte("6,1,2,-;NVRM: Xid (PCI:0000:9A:00): 48, pid=1, DBE\n[  5.1] NVRM: Xid (PCI:0000:1b:00): 94, pid=2, Contained\n SUBSYSTEM=pci\n"))
	if len(ev) != 2 || ev[0].BusID != "0000:9a:00.0" || ev[0].XID != 48 || ev[1].XID != 94 {
		t.Errorf("%+v", ev)
	}
}

func TestOutputs(t *testing.T) {
	rep := Report{Profile: Pretrain, Results: []Result{
		{ID: "gpu.count", Verdict: Pass, Reason: "8 GPUs"},
		{ID: "gpu.xid", Verdict: Fail, Reason: "GPU 3 (0000:9a:00.0) XID 79: GPU has fallen off the bus. " + strings.Repeat("é", 40), Hint: "reboot"},
	}}
	if l := NHCLine(rep); !strings.HasPrefix(l, "ERROR:  nhc:  Health check failed:  check_gpuaffinity:  gpu.xid: GPU 3") {
		t.Errorf("nhc %q", l)
	}
	if m := NPDMessage(rep); len(m) > 80 || !strings.HasPrefix(m, "gpu.xid: GPU 3") {
		t.Errorf("npd %q (%d bytes)", m, len(m))
	}
	if NHCLine(Report{Healthy: true}) != "" || NPDMessage(Report{Healthy: true}) != "gpuaffinity: healthy" {
		t.Error("healthy lines")
	}
}

// A root without a PCI bus in sysfs (discover sets NoPCIBus): the gate
// fails, saying what it could not see, rather than reading "no GPU found"
// as a node without GPUs.
func TestNoPCIBus(t *testing.T) {
	root := healthyRoot(t, "dgx-h100")
	if err := os.RemoveAll(filepath.Join(root, "sys/bus/pci")); err != nil {
		t.Fatal(err)
	}
	n := discoverRoot(t, root)
	rep := run(t, n, Options{Root: root})
	if rep.Healthy {
		t.Error("healthy without a PCI bus")
	}
	want(t, result(t, rep, "gpu.count"), Fail, "no PCI bus in sysfs (sys/bus/pci/devices): the GPUs could not be seen")
	want(t, result(t, rep, "nic.count"), Fail, "no PCI bus in sysfs (sys/bus/pci/devices): the compute NICs could not be seen")
}
