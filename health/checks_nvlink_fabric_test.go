package health

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// healthyMask is a fabric health mask with every field healthy (nvml.h
// NVML_GPU_FABRIC_HEALTH_MASK_*): degraded_bw, route_recovery,
// route_unhealthy and access_timeout_recovery FALSE (2 each, bits 0-7:
// 0xaa), incorrect_configuration NONE (1 << 8), partition_assigned TRUE
// (1 << 12), gfm_state CONNECTED (1 << 14).
const healthyMask uint32 = 0xaa | 1<<8 | 1<<12 | 1<<14

const trayUUID = "9277d399-0674-44a9-b64e-d85bb19ce2b0" // GFD's example clique UUID (frontier.md §3.4)

// trayNode is a hand-built GB200 compute tray: 4 GPUs registered in one
// NVLink domain and clique (32766), health mask clear, summary healthy,
// IMEX channel 0 made with the driver's major 234 and an IMEX daemon
// config listing 18 nodes.
func trayNode() topology.Node {
	n := topology.Node{CPU: topology.CPUInfo{Arch: "aarch64"}}
	for i, bus := range []string{"0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"} {
		n.GPUs = append(n.GPUs, topology.GPU{Index: i, BusID: bus, Device: "0x2941", Model: "NVIDIA GB200",
			Fabric: &topology.GPUFabric{State: topology.FabricCompleted, Status: ptr(0), ClusterUUID: trayUUID, CliqueID: 32766,
				HealthMask: ptr(healthyMask), HealthSummary: ptr(topology.FabricSummaryHealthy)}})
	}
	n.NVLinkFabric = topology.NVLinkFabric{MultiNode: true,
		Domains: []topology.NVLinkDomain{{ClusterUUID: trayUUID, CliqueID: 32766, GPUs: []int{0, 1, 2, 3}}},
		IMEX: topology.IMEX{DeviceMajor: ptr(234),
			Channels: []topology.IMEXChannel{{Number: 0, Path: "/dev/nvidia-caps-imex-channels/channel0"}},
			Config:   &topology.IMEXConfig{Path: "/etc/nvidia-imex/config.cfg", NodesConfig: "/etc/nvidia-imex/nodes_config.cfg", Nodes: ptr(18)}}}
	return n
}

// hgxNode is a hand-built single-node NVSwitch system (HGX/DGX B200): 8
// GPUs registered with the local fabric manager, no cluster UUID.
func hgxNode() topology.Node {
	var n topology.Node
	for i := range 8 {
		n.GPUs = append(n.GPUs, topology.GPU{Index: i, BusID: fmt.Sprintf("0000:%x0:00.0", i+1),
			NVLinks: []topology.NVLink{{Link: 0, Active: true, RemoteType: topology.RemoteNVSwitch}},
			Fabric: &topology.GPUFabric{State: topology.FabricCompleted, Status: ptr(0),
				HealthMask: ptr(uint32(0)), HealthSummary: ptr(topology.FabricSummaryNotSupported)}})
	}
	n.NVLinkFabric.Domains = []topology.NVLinkDomain{{GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}
	return n
}

func runOnly(t *testing.T, n topology.Node, opts Options, id string) Result {
	t.Helper()
	return runStorage(t, n, opts, id)
}

// mask sets field (shift, width 2 unless it is incorrect_configuration)
// of a healthy mask to v.
func mask(fields map[uint32]uint32) *uint32 {
	m := healthyMask
	for shift, v := range fields {
		width := uint32(0x3)
		if shift == 8 {
			width = 0xf
		}
		m = m&^(width<<shift) | v<<shift
	}
	return &m
}

func TestFabricCheck(t *testing.T) {
	cases := []struct {
		name    string
		node    func() topology.Node
		edit    func(n *topology.Node)
		verdict Verdict
		reason  []string // substrings of the reason
		hint    string   // substring of the hint
	}{
		{"tray healthy", trayNode, func(*topology.Node) {}, Pass,
			[]string{"fabric registration completed on 4 GPUs", "all in NVLink clique " + trayUUID + ".32766", "health mask clear on 4 GPUs"}, ""},
		// The failed tray: registration status failed, the
		// configuration and bandwidth fields of the mask bad, summary
		// unhealthy; every one named, GPU first.
		{"tray GPU 2 failed", trayNode, func(n *topology.Node) {
			f := n.GPUs[2].Fabric
			f.Status, f.ClusterUUID, f.CliqueID = ptr(23), "", 0
			f.HealthMask = mask(map[uint32]uint32{0: 1, 8: 5})
			f.HealthSummary = ptr(topology.FabricSummaryUnhealthy)
		}, Fail, []string{"GPU 2 (0018:01:00.0): fabric registration completed with error ERROR_INSUFFICIENT_RESOURCES (NVML return 23)",
			"health mask degraded_bw=true, incorrect_configuration=insufficient_nvlinks", "health summary unhealthy"}, "NMX-Controller"},
		{"tray GPU in progress", trayNode, func(n *topology.Node) {
			n.GPUs[1].Fabric.State, n.GPUs[1].Fabric.Status = topology.FabricInProgress, nil
		}, Fail, []string{"GPU 1 (0009:01:00.0): fabric registration in progress"}, ""},
		{"tray GPU not started", trayNode, func(n *topology.Node) {
			n.GPUs[3].Fabric.State, n.GPUs[3].Fabric.Status = topology.FabricNotStarted, nil
		}, Fail, []string{"GPU 3 (0019:01:00.0): fabric registration not started"}, ""},
		// GPUs 2 and 3 registered in another clique: the split names both.
		{"tray split", trayNode, func(n *topology.Node) {
			n.GPUs[2].Fabric.CliqueID, n.GPUs[3].Fabric.CliqueID = 7, 7
		}, Fail, []string{"the node's GPUs are in 2 NVLink cliques, want one: GPU 0,1 in " + trayUUID + ".32766; GPU 2,3 in " + trayUUID + ".7"}, "partition"},
		// A GPU that completed with success but without a cluster UUID is
		// in no domain: another clique.
		{"tray GPU without cluster UUID", trayNode, func(n *topology.Node) {
			n.GPUs[0].Fabric.ClusterUUID = ""
		}, Fail, []string{"GPU 0 in no cluster UUID; GPU 1,2,3 in " + trayUUID}, ""},
		{"tray GPU without fabric info", trayNode, func(n *topology.Node) {
			n.GPUs[1].Fabric = nil
		}, Fail, []string{"GPU 1 (0009:01:00.0): no fabric info from NVML on a multi-node NVLink node"}, ""},
		// Limited capacity with no mask field that says why: a warning.
		{"tray limited capacity", trayNode, func(n *topology.Node) {
			n.GPUs[3].Fabric.HealthSummary = ptr(topology.FabricSummaryLimitedCapacity)
		}, Warn, []string{"GPU 3 (0019:01:00.0): fabric health summary limited capacity"}, "limited capacity"},
		// With degraded_bw set, limited capacity is part of a failure.
		{"tray limited capacity degraded", trayNode, func(n *topology.Node) {
			n.GPUs[3].Fabric.HealthMask = mask(map[uint32]uint32{0: 1})
			n.GPUs[3].Fabric.HealthSummary = ptr(topology.FabricSummaryLimitedCapacity)
		}, Fail, []string{"GPU 3 (0019:01:00.0): health mask degraded_bw=true; health summary limited capacity"}, ""},
		// A recovery in progress fails, and the hint says it may pass soon.
		{"tray route recovery", trayNode, func(n *topology.Node) {
			n.GPUs[0].Fabric.HealthMask = mask(map[uint32]uint32{2: 1})
		}, Fail, []string{"GPU 0 (0008:01:00.0): health mask route_recovery=true"}, "run the check again in a minute"},
		{"tray access timeout recovery, route unhealthy, GFM disconnected, no partition", trayNode, func(n *topology.Node) {
			n.GPUs[0].Fabric.HealthMask = mask(map[uint32]uint32{4: 1, 6: 1, 12: 2, 14: 2})
		}, Fail, []string{"route_unhealthy=true, access_timeout_recovery=true, partition_assigned=false, gfm_state=disconnected"}, "recovering"},
		{"tray two GPUs bad", trayNode, func(n *topology.Node) {
			n.GPUs[0].Fabric.Status = ptr(999)
			n.GPUs[2].Fabric.HealthMask = mask(map[uint32]uint32{8: 2})
		}, Fail, []string{"GPU 0 (0008:01:00.0): fabric registration completed with error ERROR_UNKNOWN", "(and 1 more)"}, ""},
		// A mask of 0 (every field not supported) is no health: not "clear".
		{"hgx healthy", hgxNode, func(*topology.Node) {}, Pass, []string{"fabric registration completed on 8 GPUs"}, ""},
		{"hgx healthy mask", hgxNode, func(n *topology.Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric.HealthMask = ptr(uint32(0xaa))
			}
		}, Pass, []string{"fabric registration completed on 8 GPUs; health mask clear on 8 GPUs"}, ""},
		// Single-node NVSwitch keeps the registration rule and adds the mask.
		{"hgx degraded", hgxNode, func(n *topology.Node) {
			n.GPUs[5].Fabric.HealthMask = mask(map[uint32]uint32{0: 1})
		}, Fail, []string{"GPU 5 (0000:60:00.0): health mask degraded_bw=true"}, "nvidia-fabricmanager"},
		{"hgx status", hgxNode, func(n *topology.Node) {
			n.GPUs[7].Fabric.Status = ptr(3)
		}, Fail, []string{"GPU 7 (0000:80:00.0): fabric registration completed with error ERROR_NOT_SUPPORTED (NVML return 3)"}, "nvidia-fabricmanager"},
		// A v1-only driver: no mask, registration alone.
		{"hgx v1", hgxNode, func(n *topology.Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric.HealthMask, n.GPUs[i].Fabric.HealthSummary = nil, nil
			}
		}, Pass, []string{"fabric registration completed on 8 GPUs"}, ""},
		// Nodes without GPU.Fabric: the state and status of GPU.Health.
		{"health fallback", hgxNode, func(n *topology.Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric = nil
				n.GPUs[i].Health.FabricState, n.GPUs[i].Health.FabricStatus = ptr(3), ptr(0)
			}
			n.GPUs[4].Health.FabricState = ptr(2)
		}, Fail, []string{"GPU 4 (0000:50:00.0): fabric registration in progress"}, ""},
		{"pcie", hgxNode, func(n *topology.Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric, n.GPUs[i].NVLinks = nil, nil
			}
		}, Skip, []string{"no NVLink fabric"}, ""},
		{"nvswitch without fabric state", hgxNode, func(n *topology.Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric = nil
			}
		}, Skip, []string{"NVSwitch links but NVML reports no fabric state"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.node()
			c.edit(&n)
			r := runOnly(t, n, Options{}, "gpu.fabric")
			want(t, r, c.verdict, c.reason...)
			if c.name == "hgx healthy" && strings.Contains(r.Reason, "health mask") {
				t.Errorf("reason %q claims a health mask NVML did not report", r.Reason)
			}
			if c.hint != "" && !strings.Contains(r.Hint, c.hint) {
				t.Errorf("hint %q lacks %q", r.Hint, c.hint)
			}
		})
	}
}

// With a GPU selection only the selected GPUs are judged.
func TestFabricCheckSelection(t *testing.T) {
	n := trayNode()
	n.GPUs[3].Fabric.State, n.GPUs[3].Fabric.Status = topology.FabricInProgress, nil
	want(t, runOnly(t, n, Options{GPUs: []int{0, 1}}, "gpu.fabric"), Pass, "completed on 2 GPUs")
	want(t, runOnly(t, n, Options{GPUs: []int{2, 3}}, "gpu.fabric"), Fail, "GPU 3")
}

func TestIMEXCheck(t *testing.T) {
	cases := []struct {
		name    string
		node    func() topology.Node
		edit    func(n *topology.Node)
		verdict Verdict
		reason  []string
		hint    []string
	}{
		{"usable", trayNode, func(*topology.Node) {}, Pass,
			[]string{"IMEX channel 0 usable (driver major 234)", "IMEX daemon config /etc/nvidia-imex/config.cfg lists 18 nodes"}, nil},
		// The daemon's config is informational: it may be run per job.
		{"usable without config", trayNode, func(n *topology.Node) { n.NVLinkFabric.IMEX.Config = nil }, Pass,
			[]string{"IMEX channel 0 usable", "no IMEX daemon config"}, nil},
		{"no channel nodes", trayNode, func(n *topology.Node) { n.NVLinkFabric.IMEX.Channels = []topology.IMEXChannel{} }, Fail,
			[]string{"no usable IMEX channel (no channel node in /dev/nvidia-caps-imex-channels)", "system error", "driver major 234"},
			[]string{"mkdir -p /dev/nvidia-caps-imex-channels && mknod /dev/nvidia-caps-imex-channels/channel0 c 234 0",
				"do not persist across reboots", "NVreg_CreateImexChannel0=1", "DRA driver"}},
		{"stale node", trayNode, func(n *topology.Node) {
			n.NVLinkFabric.IMEX.Channels[0].Problem = "major 235, but the driver's nvidia-caps-imex-channels major is 234 (a node left from an earlier boot)"
		}, Fail, []string{"no usable IMEX channel (/dev/nvidia-caps-imex-channels/channel0: major 235, but the driver's"},
			[]string{"c 234 0", "remove a node left from an earlier boot"}},
		// One usable channel is enough; the others are named.
		{"one of two", trayNode, func(n *topology.Node) {
			n.NVLinkFabric.IMEX.Channels = append(n.NVLinkFabric.IMEX.Channels,
				topology.IMEXChannel{Number: 1, Path: "/dev/nvidia-caps-imex-channels/channel1", Problem: "not a character device"})
		}, Pass, []string{"IMEX channel 0 usable", "not usable: /dev/nvidia-caps-imex-channels/channel1: not a character device"}, nil},
		{"no driver device", trayNode, func(n *topology.Node) {
			n.NVLinkFabric.IMEX.DeviceMajor = nil
			n.NVLinkFabric.IMEX.Channels = []topology.IMEXChannel{}
		}, Fail, []string{"the driver registered no nvidia-caps-imex-channels device"}, []string{"mknod"}},
		{"single node", hgxNode, func(*topology.Node) {}, Skip, []string{"not a multi-node NVLink node"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.node()
			c.edit(&n)
			r := runOnly(t, n, Options{}, "gpu.imex")
			want(t, r, c.verdict, c.reason...)
			for _, h := range c.hint {
				if !strings.Contains(r.Hint, h) {
					t.Errorf("hint %q lacks %q", r.Hint, h)
				}
			}
		})
	}
}

// gpu.imex is a fabric-group check: NCCL checks MNNVL only for
// communicators that span nodes (src/init.cc: nNodes > 1), so a
// single-node job does not need IMEX. gpu.fabric stays a GPU check.
func TestIMEXProfiles(t *testing.T) {
	n := trayNode()
	n.NVLinkFabric.IMEX.Channels = []topology.IMEXChannel{}
	n.GPUs[0].Fabric.State, n.GPUs[0].Fabric.Status = topology.FabricInProgress, nil
	for _, c := range []struct {
		opts          Options
		imex, fabric  Verdict
		imexDowngrade bool
	}{
		{Options{Profile: Pretrain}, Fail, Fail, false},
		{Options{Profile: Finetune, MultiNode: true}, Fail, Fail, false},
		{Options{Profile: Finetune}, Warn, Fail, true},
		{Options{Profile: Inference}, Warn, Fail, true},
	} {
		c.opts.Root, c.opts.Only = "/nonexistent", []string{"gpu.fabric", "gpu.imex"}
		rep := run(t, n, c.opts)
		if r := result(t, rep, "gpu.imex"); r.Verdict != c.imex || r.Downgraded != c.imexDowngrade {
			t.Errorf("%s multi-node %v: gpu.imex %s downgraded %v", c.opts.Profile, c.opts.MultiNode, r.Verdict, r.Downgraded)
		}
		if r := result(t, rep, "gpu.fabric"); r.Verdict != c.fabric {
			t.Errorf("%s: gpu.fabric %s", c.opts.Profile, r.Verdict)
		}
	}
}

// Where NVML failed, neither check reads its missing answers as "no
// fabric".
func TestFabricChecksNVMLFailed(t *testing.T) {
	n := trayNode()
	n.NVML = topology.NVMLInfo{Failed: true, Error: "ERROR_DRIVER_NOT_LOADED"}
	for _, id := range []string{"gpu.fabric", "gpu.imex"} {
		want(t, runOnly(t, n, Options{}, id), Skip, "not checked: NVML failed")
	}
}

// TestFabricFixtureVerdicts holds the fixture machines to verdicts written
// by hand from their published layouts:
//
//   - gb200-nvl72-tray: a GB200 NVL72 compute tray (4 GPUs on 2 Grace, one
//     NVLink domain and clique for the rack), IMEX channel 0 made: both pass.
//   - gb200-nvl72-fabric-failed: the same tray where GPU 2's registration
//     failed (status not success), its mask says insufficient_nvlinks and
//     degraded bandwidth, summary unhealthy; no IMEX channel nodes: both fail.
//   - dgx-b200: single-node NVSwitch (8 B200, no cluster UUID, no IMEX):
//     gpu.fabric passes, gpu.imex skips.
//   - aws-p6-b200: HGX B200 VM on NVSwitch: the same as dgx-b200.
//
// A fixture that is not there yet fails, naming it.
func TestFabricFixtureVerdicts(t *testing.T) {
	type verdict struct {
		v      Verdict
		reason []string
		hint   []string
	}
	cases := []struct {
		machine      string
		fabric, imex verdict
	}{
		{"gb200-nvl72-tray",
			verdict{Pass, []string{"fabric registration completed on 4 GPUs", "all in NVLink clique", "health mask clear on 4 GPUs"}, nil},
			verdict{Pass, []string{"IMEX channel 0 usable"}, nil}},
		{"gb200-nvl72-fabric-failed",
			verdict{Fail, []string{"GPU 2 (", "fabric registration completed with error", "incorrect_configuration=insufficient_nvlinks", "degraded_bw=true", "health summary unhealthy"}, []string{"NMX-Controller"}},
			verdict{Fail, []string{"no usable IMEX channel", "system error"}, []string{"mknod /dev/nvidia-caps-imex-channels/channel0 c ", "NVreg_CreateImexChannel0=1"}}},
		{"dgx-b200",
			verdict{Pass, []string{"fabric registration completed on 8 GPUs"}, nil},
			verdict{Skip, []string{"not a multi-node NVLink node"}, nil}},
		{"aws-p6-b200",
			verdict{Pass, []string{"fabric registration completed on 8 GPUs"}, nil},
			verdict{Skip, []string{"not a multi-node NVLink node"}, nil}},
	}
	for _, c := range cases {
		t.Run(c.machine, func(t *testing.T) {
			n := discoverRoot(t, fakesystest.Root(t, c.machine))
			rep := run(t, n, Options{Root: "/nonexistent", Only: []string{"gpu.fabric", "gpu.imex"}})
			for id, w := range map[string]verdict{"gpu.fabric": c.fabric, "gpu.imex": c.imex} {
				r := result(t, rep, id)
				want(t, r, w.v, w.reason...)
				for _, h := range w.hint {
					if !strings.Contains(r.Hint, h) {
						t.Errorf("%s hint %q lacks %q", id, r.Hint, h)
					}
				}
			}
		})
	}
}
