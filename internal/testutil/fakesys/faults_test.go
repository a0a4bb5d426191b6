package fakesys

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/procfs/sysfs"

	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// TestFaultMachineNVML reads the fault machine's nvml.json as the agent
// does and checks each fault against dgx-h100-faults.yaml: GPU 2's link 5
// down with its counts (every other link active with 0s), GPU 4's pending
// remap, GPU 7 lost at its handle, GPU 1's XIDs.
func TestFaultMachineNVML(t *testing.T) {
	root := machineRoot(t, "dgx-h100-faults")
	lib := loadReplay(t, root)
	res := nvml.Read(lib)
	if len(res.GPUs) != 8 {
		t.Fatalf("Read: %d GPUs, want 8", len(res.GPUs))
	}
	// GPU 7 (0000:df:00.0 in dgx-h100) fell off the bus before its handle.
	if g := res.GPUs[7]; g.State != nvml.StateLost || g.Err != "DeviceGetHandleByIndex: ERROR_GPU_IS_LOST" || g.BusID != "" {
		t.Errorf("GPU 7 = %s %q bus %q, want lost at DeviceGetHandleByIndex", g.State, g.Err, g.BusID)
	}
	if diff := cmp.Diff([]string{"GPU 7: DeviceGetHandleByIndex: ERROR_GPU_IS_LOST"}, res.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	u := func(v uint64) *uint64 { return &v }
	for _, g := range res.GPUs[:7] {
		if g.State != nvml.StateOK || len(g.NVLinks) != 18 {
			t.Errorf("GPU %d: state %s, %d links; want ok, 18", g.Index, g.State, len(g.NVLinks))
			continue
		}
		for _, l := range g.NVLinks {
			want := nvml.NVLink{Link: l.Link, Active: true, Version: 4, RemoteType: nvml.RemoteNVSwitch, RemoteBusID: l.RemoteBusID,
				CRCFlitErrors: u(0), CRCDataErrors: u(0), ReplayErrors: u(0), RecoveryErrors: u(0)}
			if g.Index == 2 && l.Link == 5 {
				want = nvml.NVLink{Link: 5, CRCFlitErrors: u(12), CRCDataErrors: u(1), ReplayErrors: u(3), RecoveryErrors: u(2)}
			}
			if diff := cmp.Diff(want, l); diff != "" {
				t.Errorf("GPU %d link %d (-want +got):\n%s", g.Index, l.Link, diff)
			}
		}
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6} {
		if h := res.GPUs[i].Health; *h.RemapPending || *h.RemappedRowsUncorrectable != 0 {
			t.Errorf("GPU %d: remap pending %v, uncorrectable %d; want the dgx-h100 defaults", i, *h.RemapPending, *h.RemappedRowsUncorrectable)
		}
	}
	h := res.GPUs[4].Health
	if !*h.RemapPending || *h.RemappedRowsUncorrectable != 1 || *h.RemappedRowsCorrectable != 0 || *h.RemapFailure {
		t.Errorf("GPU 4 remapped rows: pending %v unc %d corr %d failure %v; want pending, 1 uncorrectable",
			*h.RemapPending, *h.RemappedRowsUncorrectable, *h.RemappedRowsCorrectable, *h.RemapFailure)
	}

	// XIDs: GPU 1 (0000:43:00.0) delivers 48, 94, 94; GPU 7 is not watched.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []nvml.XIDEvent
	var warnings []string
	err := nvml.WatchXID(ctx, lib, func(e nvml.XIDEvent) {
		got = append(got, e)
		if len(got) == 3 {
			cancel()
		}
	}, nvml.XIDWarnings(func(s string) { warnings = append(warnings, s) }))
	if err != nil {
		t.Fatalf("WatchXID: %v", err)
	}
	want := []nvml.XIDEvent{{GPU: 1, BusID: "0000:43:00.0", XID: 48}, {GPU: 1, BusID: "0000:43:00.0", XID: 94}, {GPU: 1, BusID: "0000:43:00.0", XID: 94}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(nvml.XIDEvent{}, "Time")); diff != "" {
		t.Errorf("XID events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"GPU 7: DeviceGetHandleByIndex: ERROR_GPU_IS_LOST"}, warnings); diff != "" {
		t.Errorf("WatchXID warnings (-want +got):\n%s", diff)
	}
}

// TestFaultMachinePort reads the down port with procfs, as node_exporter
// does: the state, the counters and hw_counters of the spec, the other
// hw_counters 0 and lifespan 10 ms; a healthy port of the base keeps its
// defaults.
func TestFaultMachinePort(t *testing.T) {
	fs, err := sysfs.NewFS(filepath.Join(machineRoot(t, "dgx-h100-faults"), "sys"))
	if err != nil {
		t.Fatal(err)
	}
	class, err := fs.InfiniBandClass()
	if err != nil {
		t.Fatal(err)
	}
	down := class["mlx5_4"].Ports[1]
	if down.State != "DOWN" || down.StateID != 1 || down.PhysState != "Polling" || down.PhysStateID != 2 {
		t.Errorf("mlx5_4/1 state %d: %s, phys %d: %s; want 1: DOWN, 2: Polling", down.StateID, down.State, down.PhysStateID, down.PhysState)
	}
	c := down.Counters
	// procfs turns the data counters (4-byte words) into octets.
	for name, tc := range map[string]struct {
		got  *uint64
		want uint64
	}{
		"symbol_error":     {c.SymbolError, 117},
		"link_downed":      {c.LinkDowned, 3},
		"port_rcv_data":    {c.PortRcvData, 4 * 9876543210},
		"port_xmit_data":   {c.PortXmitData, 4 * 1234567890},
		"port_rcv_packets": {c.PortRcvPackets, 24681357},
		"port_rcv_errors":  {c.PortRcvErrors, 0},
	} {
		if tc.got == nil || *tc.got != tc.want {
			t.Errorf("counters/%s = %v, want %d", name, tc.got, tc.want)
		}
	}
	hw := down.HwCounters
	for name, tc := range map[string]struct {
		got  *uint64
		want uint64
	}{
		"out_of_sequence":   {hw.OutOfSequence, 41},
		"duplicate_request": {hw.DuplicateRequest, 7},
		"rnr_nak_retry_err": {hw.RnrNakRetryErr, 19},
		"lifespan":          {hw.Lifespan, 10},
		"out_of_buffer":     {hw.OutOfBuffer, 0},
		"np_cnp_sent":       {hw.NpCnpSent, 0},
	} {
		if tc.got == nil || *tc.got != tc.want {
			t.Errorf("hw_counters/%s = %v, want %d", name, tc.got, tc.want)
		}
	}
	up := class["mlx5_0"].Ports[1]
	if up.State != "ACTIVE" || up.PhysState != "LinkUp" || up.Rate != 400e9/8 || *up.Counters.SymbolError != 0 || *up.HwCounters.OutOfSequence != 0 {
		t.Errorf("mlx5_0/1 = %s %s rate %v, want the dgx-h100 defaults", up.State, up.PhysState, up.Rate)
	}
}

// TestHwCountersDefault: an mlx5 port gets the mlx5 set, a port of another
// driver only what the spec gives it.
func TestHwCountersDefault(t *testing.T) {
	spec := strings.Replace(minimal, "netdevs: [{name: eth0}]", `netdevs: [{name: eth0}]
            rdma: {name: mlx5_0, ports: [{port: 1, link_layer: Ethernet, hw_counters: {out_of_buffer: 5}}]}
          - bdf: "0000:11:00.2"
            kind: nic
            vendor: "0x1d0f"
            device: "0xefa1"
            driver: efa
            netdevs: [{name: eth1}]
            rdma: {name: efa_0, ports: [{port: 1, link_layer: Unspecified, hw_counters: {rdma_read_bytes: 8}}]}`, 1)
	root := buildSpec(t, "tiny.yaml", spec)
	list := func(dev string) []string {
		entries, err := os.ReadDir(filepath.Join(root, "sys/class/infiniband", dev, "ports/1/hw_counters"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	if diff := cmp.Diff(mlx5HwCounters, list("mlx5_0")); diff != "" {
		t.Errorf("mlx5_0 hw_counters (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_buffer")); string(b) != "5\n" {
		t.Errorf("mlx5_0 out_of_buffer = %q, want 5", b)
	}
	if diff := cmp.Diff([]string{"rdma_read_bytes"}, list("efa_0")); diff != "" {
		t.Errorf("efa_0 hw_counters (-want +got):\n%s", diff)
	}
}

// TestExtends: the fault machine is dgx-h100 plus its faults, and nothing
// else changes.
func TestExtends(t *testing.T) {
	base, err := Machine("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Machine("dgx-h100-faults")
	if err != nil {
		t.Fatal(err)
	}
	if s.Extends != "dgx-h100" || s.Name != "dgx-h100-faults" || len(s.Sources) <= len(base.Sources) || s.Expect.GPUGPU != "" {
		t.Errorf("extends %q name %q, %d sources (base %d), gpu_gpu %q", s.Extends, s.Name, len(s.Sources), len(base.Sources), s.Expect.GPUGPU)
	}
	// Undo the faults; the rest must be the base.
	for _, f := range s.Functions() {
		if g := f.Device.GPU; g != nil {
			g.Lost, g.NVLinksDown, g.NVLinkErrors, g.XIDs, g.Health = false, nil, nil, nil, nil
		}
		if r := f.Device.RDMA; r != nil && r.Name == "mlx5_4" {
			r.Ports[0].State, r.Ports[0].PhysState, r.Ports[0].Counters, r.Ports[0].HwCounters = "", "", nil, nil
			r.Ports[0].Rate = "400 Gb/sec (4X NDR)"
			f.Device.Netdevs[0].Operstate = ""
		}
	}
	s.Name, s.Description, s.Sources, s.Extends, s.Expect = base.Name, base.Description, base.Sources, "", base.Expect
	if diff := cmp.Diff(base, s); diff != "" {
		t.Errorf("dgx-h100-faults without its faults differs from dgx-h100 (-base +got):\n%s", diff)
	}
}

// faulty is a small extending spec the table below breaks one way at a time.
const faulty = `
name: faulty
description: test
sources: [here]
extends: dgx-h100
faults:
  gpus:
    - index: 2
      nvlinks_down: [5]
      nvlink_errors: {5: {crc_flit: 1}}
  rdma_ports:
    - {device: mlx5_4, port: 1, state: "1: DOWN", counters: {symbol_error: 1}}
expect:
  pairs: [{gpu: 0, nics: [mlx5_0], class: PIX}]
`

func TestExtendsRejects(t *testing.T) {
	if _, err := Parse("faulty.yaml", []byte(faulty)); err != nil {
		t.Fatalf("the valid extending spec: %v", err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"gpu the base lacks", "index: 2", "index: 8", "dgx-h100 has no GPU 8"},
		{"gpu index missing", "- index: 2\n", "- lost: true\n", "faults.gpus[0]: index is missing"},
		{"gpu twice", "  rdma_ports:", "    - {index: 2, lost: true}\n  rdma_ports:", "GPU 2 is addressed twice"},
		{"rdma device the base lacks", "device: mlx5_4", "device: mlx5_99", "dgx-h100 has no RDMA mlx5_99 port 1"},
		{"rdma port the base lacks", "port: 1,", "port: 2,", "no RDMA mlx5_4 port 2"},
		{"port twice", "counters: {symbol_error: 1}}", "counters: {symbol_error: 1}}\n    - {device: mlx5_4, port: 1}", "mlx5_4 port 1 is addressed twice"},
		{"unknown key beside extends", "description: test", "description: test\nhostname: x", "hostname"},
		{"unknown fault key", "nvlinks_down: [5]", "nvlinks_down: [5]\n      nvlink_down: [6]", "nvlink_down"},
		{"unknown counter key", "crc_flit: 1", "crc_flt: 1", "crc_flt"},
		{"unknown fabric key", "nvlinks_down: [5]", "fabric: {cluster_id: 1}", "cluster_id"},
		{"unknown imex key", "  rdma_ports:", "  imex: {channel: [0]}\n  rdma_ports:", "channel"},
		{"unknown port counter", "symbol_error: 1", "symbol_errors: 1", `"symbol_errors" is not a counters/ file`},
		{"link past nvlinks", "nvlinks_down: [5]", "nvlinks_down: [18]", "gpu 2: nvlinks_down: link 18 is not one of its NVLinks"},
		{"errors on a link past nvlinks", "{5: {crc_flit: 1}}", "{20: {crc_flit: 1}}", "gpu 2: nvlink_errors: link 20"},
		{"down twice", "nvlinks_down: [5]", "nvlinks_down: [5, 5]", "lists link 5 twice"},
		{"xid 0", "nvlinks_down: [5]", "xids: [0]", "0 is not an XID"},
		{"unknown base", "extends: dgx-h100", "extends: dgx-h900", `extends "dgx-h900"`},
		{"capture base", "extends: dgx-h100", "extends: h200-vm", `extends "h200-vm"`},
		{"chained", "extends: dgx-h100", "extends: dgx-h100-faults", "which extends dgx-h100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(faulty, tc.old) {
				t.Fatalf("test case does not apply: %q not in the spec", tc.old)
			}
			_, err := Parse("faulty.yaml", []byte(strings.Replace(faulty, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("Parse accepted a bad spec")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "faulty.yaml") {
				t.Errorf("error %q does not name the file and %q", err, tc.want)
			}
		})
	}
	// Validation errors wrap ErrSpec.
	_, err := Parse("faulty.yaml", []byte(strings.Replace(faulty, "index: 2", "index: 8", 1)))
	if !errors.Is(err, ErrSpec) {
		t.Errorf("error %v does not wrap ErrSpec", err)
	}
}

// TestGPUFaultsInSpec: lost, nvlinks_down, nvlink_errors and xids work in
// a full spec's gpu block too.
func TestGPUFaultsInSpec(t *testing.T) {
	spec := gpuSpec(`gpu: {index: 0, nvlinks: 4, max_links: 6, nvlinks_down: [1, 3],
              nvlink_errors: {3: {replay: 9}}, xids: [79]}
          - bdf: "0000:11:01.0"
            kind: gpu
            gpu: {index: 1, nvlinks: 18, lost: true}`)
	root := buildSpec(t, "faults.yaml", spec)
	lib := loadReplay(t, root)
	res := nvml.Read(lib)
	if len(res.GPUs) != 2 || res.GPUs[1].State != nvml.StateLost {
		t.Fatalf("Read: %+v", res.GPUs)
	}
	u := func(v uint64) *uint64 { return &v }
	zero := func(l nvml.NVLink) nvml.NVLink {
		l.CRCFlitErrors, l.CRCDataErrors, l.ReplayErrors, l.RecoveryErrors = u(0), u(0), u(0), u(0)
		return l
	}
	sw := func(n int) nvml.NVLink {
		return zero(nvml.NVLink{Link: n, Active: true, Version: 4, RemoteType: nvml.RemoteNVSwitch, RemoteBusID: []string{"0000:ff:00.0", "0000:ff:01.0", "0000:ff:02.0", "0000:ff:03.0"}[n%4]})
	}
	// Links 4 and 5 (up to max_links) answer NOT_SUPPORTED and are not listed.
	want := []nvml.NVLink{sw(0), zero(nvml.NVLink{Link: 1}), sw(2),
		{Link: 3, CRCFlitErrors: u(0), CRCDataErrors: u(0), ReplayErrors: u(9), RecoveryErrors: u(0)}}
	if diff := cmp.Diff(want, res.GPUs[0].NVLinks); diff != "" {
		t.Errorf("GPU 0 links (-want +got):\n%s", diff)
	}
	var xids []uint64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := nvml.WatchXID(ctx, lib, func(e nvml.XIDEvent) { xids = append(xids, e.XID); cancel() }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{79}, xids); diff != "" {
		t.Errorf("XIDs (-want +got):\n%s", diff)
	}
}

// TestExtendsFabricIMEX: gb200-nvl72-fabric-failed is gb200-nvl72-tray
// with GPU 2's fabric registration failed and no IMEX channel node, and
// nothing else changed; NVML replays GPU 2's answer as the spec writes it,
// the others keep the tray's, and the root has the driver's major but no
// channel node.
func TestExtendsFabricIMEX(t *testing.T) {
	base, err := Machine("gb200-nvl72-tray")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Machine("gb200-nvl72-fabric-failed")
	if err != nil {
		t.Fatal(err)
	}
	if s.IMEX == nil || s.IMEX.Major != 234 || len(s.IMEX.Channels) != 0 || len(s.IMEX.Peers) != 18 {
		t.Errorf("imex = %+v, want the base's major and peers, no channels", s.IMEX)
	}
	var g2 *GPU
	for _, f := range s.Functions() {
		if g := f.Device.GPU; g != nil && g.Index == 2 {
			g2 = g
		}
	}
	wantFabric := &GPUFabric{ClusterUUID: "", CliqueID: 0, HealthMask: 21929, HealthSummary: 2}
	if diff := cmp.Diff(wantFabric, g2.Fabric); diff != "" {
		t.Errorf("GPU 2 fabric (-want +got):\n%s", diff)
	}
	// Undo the faults; the rest must be the base.
	for _, f := range s.Functions() {
		if g := f.Device.GPU; g != nil && g.Index == 2 {
			g.Health = nil
			g.Fabric = &GPUFabric{ClusterUUID: "5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845", CliqueID: 32766, HealthMask: 20906, HealthSummary: 1}
		}
	}
	s.IMEX.Channels = []int{0}
	s.Name, s.Description, s.Sources, s.Extends, s.Expect = base.Name, base.Description, base.Sources, "", base.Expect
	if diff := cmp.Diff(base, s); diff != "" {
		t.Errorf("gb200-nvl72-fabric-failed without its faults differs from gb200-nvl72-tray (-base +got):\n%s", diff)
	}

	root := machineRoot(t, "gb200-nvl72-fabric-failed")
	res := nvml.Read(loadReplay(t, root))
	if len(res.GPUs) != 4 {
		t.Fatalf("Read: %d GPUs, want 4", len(res.GPUs))
	}
	i := func(v int) *int { return &v }
	u := func(v uint32) *uint32 { return &v }
	for _, g := range res.GPUs {
		want := &nvml.Fabric{State: 3, Status: i(0), ClusterUUID: "5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845", CliqueID: 32766, HealthMask: u(20906), HealthSummary: i(1)}
		if g.Index == 2 {
			want = &nvml.Fabric{State: 3, Status: i(23), HealthMask: u(21929), HealthSummary: i(2)}
		}
		if diff := cmp.Diff(want, g.Fabric); diff != "" {
			t.Errorf("GPU %d fabric (-want +got):\n%s", g.Index, diff)
		}
	}
	devices, err := os.ReadFile(filepath.Join(root, "proc/devices"))
	if err != nil || !strings.Contains(string(devices), "234 nvidia-caps-imex-channels\n") {
		t.Errorf("proc/devices = %q (%v), want major 234 for nvidia-caps-imex-channels", devices, err)
	}
	if ents, err := os.ReadDir(filepath.Join(root, "dev/nvidia-caps-imex-channels")); err == nil && len(ents) > 0 {
		t.Errorf("channel nodes %v, want none", ents)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/nvidia-imex/nodes_config.cfg")); err != nil {
		t.Errorf("IMEX node list: %v, want the base's", err)
	}
}

// TestIMEXFaultOnBaseWithout: an imex fault on a base without imex starts
// from none; set fields only.
func TestIMEXFaultOnBaseWithout(t *testing.T) {
	spec := strings.Replace(faulty, "  rdma_ports:", "  imex: {major: 500, node_major: 499, channels: [0, 1]}\n  rdma_ports:", 1)
	s, err := Parse("faulty.yaml", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&IMEX{Major: 500, NodeMajor: 499, Channels: []int{0, 1}}, s.IMEX); diff != "" {
		t.Errorf("imex (-want +got):\n%s", diff)
	}
	spec = strings.Replace(faulty, "nvlinks_down: [5]", "fabric: {clique_id: 7}", 1)
	if s, err = Parse("faulty.yaml", []byte(spec)); err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Functions() {
		if g := f.Device.GPU; g != nil && g.Index == 2 {
			if diff := cmp.Diff(&GPUFabric{CliqueID: 7}, g.Fabric); diff != "" {
				t.Errorf("GPU 2 fabric from none (-want +got):\n%s", diff)
			}
		}
	}
}

// TestNVMLInitFault: faults.nvml_init replaces the base's nvml.init and
// nothing else of it; the replayed nvmlInit then fails with that answer.
// A base without nvml has nothing to fail.
func TestNVMLInitFault(t *testing.T) {
	spec := strings.Replace(faulty, "  rdma_ports:", "  nvml_init: ERROR_LIBRARY_NOT_FOUND\n  rdma_ports:", 1)
	s, err := Parse("faulty.yaml", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	base, err := Machine("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	want := *base.NVML
	want.Init = "ERROR_LIBRARY_NOT_FOUND"
	if s.NVML == nil || *s.NVML != want {
		t.Errorf("nvml %+v, want %+v", s.NVML, want)
	}
	if base.NVML.Init != "" {
		t.Errorf("the base's nvml changed: %+v", base.NVML)
	}
	r, rf, err := buildMachineTree("gb200-nvl72-tray-no-nvml")
	if err != nil || r == nil || rf == nil {
		t.Fatalf("build: %v (replay %v)", err, rf != nil)
	}
	if res := nvml.Read(nvml.NewReplay(*rf)); res.Available || res.Err == nil || !strings.Contains(res.Err.Error(), "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("replayed NVML: available %v, err %v", res.Available, res.Err)
	}

	const noNVML = `name: no-nvml-base
description: test
extends: amd-mi300x
faults: {nvml_init: ERROR_LIBRARY_NOT_FOUND}
expect: {roles: {}}
`
	if _, err := Parse("faulty.yaml", []byte(noNVML)); err == nil || !strings.Contains(err.Error(), "has no nvml to fail") {
		t.Errorf("nvml_init on a base without nvml: %v", err)
	}
}
