package health

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/fakesys"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func ptr[T any](v T) *T { return &v }

// healthyRoot builds a fixture root with nvidia_peermem loaded.
func healthyRoot(t *testing.T, machine string) string {
	t.Helper()
	root := fakesys.Root(t, machine)
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
		{"gpu.fabric", "fabric registration in progress", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[4].Health.FabricState = ptr(2)
		}},
		{"gpu.fabric", "completed with error", Fail, func(t *testing.T, root string, n *topology.Node) {
			n.GPUs[4].Health.FabricStatus = ptr(999)
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
			os.RemoveAll(filepath.Join(root, "sys/module/nvidia_peermem"))
			os.Remove(filepath.Join(root, "proc/sys/kernel/osrelease")) // no dma-buf fallback either
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

func TestGDRRules(t *testing.T) {
	root := fakesys.Root(t, "dgx-h100")
	// The DGX fixture loads nvidia_peermem and names its kernel: take
	// both away to walk the rules.
	os.RemoveAll(filepath.Join(root, "sys/module/nvidia_peermem"))
	os.Remove(filepath.Join(root, "proc/sys/kernel/osrelease"))
	n := discoverRoot(t, root)
	gdr := func() Result { return run(t, n, Options{Root: root, Only: []string{"topo.gdr"}}).Results[0] }
	if r := gdr(); r.Verdict != Fail || !strings.Contains(r.Reason, "kernel version is unknown") {
		t.Errorf("no peermem, no kernel: %s", r.Reason)
	}
	write(t, root, "proc/sys/kernel/osrelease", "6.8.0-45-generic")
	if r := gdr(); r.Verdict != Pass || !strings.Contains(r.Reason, "dma-buf") {
		t.Errorf("dma-buf: %s", r.Reason)
	}
	write(t, root, "proc/sys/kernel/osrelease", "5.4.0-100-generic")
	if r := gdr(); r.Verdict != Fail || !strings.Contains(r.Reason, "older than 5.12") {
		t.Errorf("old kernel: %s", r.Reason)
	}
}

func TestNoNVLinkOrNVMLHealthSkips(t *testing.T) {
	n := discoverRoot(t, fakesys.Root(t, "h200-vm"))
	rep := run(t, n, Options{Root: "/nonexistent"})
	for _, id := range []string{"nvlink.active", "gpu.xid", "nic.port_state"} {
		if r := result(t, rep, id); r.Verdict != Skip {
			t.Errorf("%s: %s %s", id, r.Verdict, r.Reason)
		}
	}
}

func TestLearnYAMLRoundTrip(t *testing.T) {
	n := discoverRoot(t, fakesys.Root(t, "dgx-h100"))
	b, err := Learn(n).YAML()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "e.yaml")
	os.WriteFile(p, b, 0o644)
	e, err := LoadExpect(p)
	if err != nil || *e != Learn(n) {
		t.Fatalf("round trip: %v\n%s", err, b)
	}
	for _, want := range []string{"count: 8", "model: NVIDIA H100 80GB HBM3", "nvlinks_per_gpu: 18", "compute_count: 8", "rate_gbps: 400", "firmware: 28.39.1002"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("learned YAML lacks %q:\n%s", want, b)
		}
	}
	os.WriteFile(p, []byte("gpus:\n  cuont: 8\n"), 0o644)
	if _, err := LoadExpect(p); err == nil {
		t.Error("unknown key: want an error")
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
	if l := NHCLine(rep); !strings.HasPrefix(l, "ERROR: gpuaffinity: Health check failed: gpu.xid: GPU 3") {
		t.Errorf("nhc %q", l)
	}
	if m := NPDMessage(rep); len(m) > 80 || !strings.HasPrefix(m, "gpu.xid: GPU 3") {
		t.Errorf("npd %q (%d bytes)", m, len(m))
	}
	if NHCLine(Report{Healthy: true}) != "" || NPDMessage(Report{Healthy: true}) != "gpuaffinity: healthy" {
		t.Error("healthy lines")
	}
}
