package nccl

import (
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

const mnnvlUUID = "9277d399-0674-44a9-b64e-d85bb19ce2b0"

// mnnvlNode is a hand-built GB200 compute tray: 4 GPUs registered with
// success in one NVLink domain and clique, IMEX channel 0 made with the
// driver's major 234.
func mnnvlNode() topology.Node {
	var n topology.Node
	for i := range 4 {
		n.GPUs = append(n.GPUs, topology.GPU{Index: i, BusID: []string{"0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"}[i],
			Fabric: &topology.GPUFabric{State: topology.FabricCompleted, Status: envIntp(0), ClusterUUID: mnnvlUUID, CliqueID: 32766}})
	}
	n.NVLinkFabric = topology.NVLinkFabric{MultiNode: true,
		Domains: []topology.NVLinkDomain{{ClusterUUID: mnnvlUUID, CliqueID: 32766, GPUs: []int{0, 1, 2, 3}}},
		IMEX: topology.IMEX{DeviceMajor: envIntp(234),
			Channels: []topology.IMEXChannel{{Number: 0, Path: "/dev/nvidia-caps-imex-channels/channel0"}}}}
	return n
}

// mnnvlWarnings are the warnings of e that speak of multi-node NVLink.
func mnnvlWarnings(e Env) []string {
	var out []string
	for _, w := range e.Warnings {
		if strings.Contains(w, "multi-node NVLink") {
			out = append(out, w)
		}
	}
	return out
}

// NCCL decides MNNVL, NVLS and cuMem itself (src/init.cc, src/mnnvl.cc):
// env sets none of them by default, healthy or not.
func TestEnvMNNVLNothingByDefault(t *testing.T) {
	for name, edit := range map[string]func(*topology.Node){
		"healthy":     func(*topology.Node) {},
		"no imex":     func(n *topology.Node) { n.NVLinkFabric.IMEX.Channels = nil },
		"single-node": func(n *topology.Node) { n.NVLinkFabric.MultiNode = false },
	} {
		n := mnnvlNode()
		edit(&n)
		e := envMustBuild(t, n, EnvRequest{})
		for _, v := range []string{"NCCL_MNNVL_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE"} {
			if got, ok := e.Get(v); ok {
				t.Errorf("%s: %s=%s set without --no-mnnvl", name, v, got)
			}
		}
	}
	if w := mnnvlWarnings(envMustBuild(t, mnnvlNode(), EnvRequest{})); len(w) > 0 {
		t.Errorf("healthy tray warns: %q", w)
	}
}

func TestEnvMNNVLWarnings(t *testing.T) {
	cases := []struct {
		name string
		edit func(*topology.Node)
		want []string // substrings of one warning each
	}{
		// A GPU whose state is not COMPLETED: NCCL's check turns MNNVL off
		// without an error.
		{"in progress", func(n *topology.Node) {
			n.GPUs[2].Fabric.State, n.GPUs[2].Fabric.Status = topology.FabricInProgress, nil
		}, []string{"fabric is not ready (GPU 2: fabric registration in progress): NCCL turns multi-node NVLink off", "goes over the network", "--no-mnnvl"}},
		{"no fabric info", func(n *topology.Node) { n.GPUs[1].Fabric = nil }, []string{"GPU 1: no fabric info"}},
		{"no cluster UUID", func(n *topology.Node) {
			n.GPUs[0].Fabric.Status, n.GPUs[0].Fabric.ClusterUUID = envIntp(23), ""
		}, []string{"GPU 0: no cluster UUID", "ncclMnnvlCheck"}},
		// Completed in the cluster with an error status: NCCL does not
		// look at the status, tries MNNVL and fails.
		{"status failed", func(n *topology.Node) { n.GPUs[3].Fabric.Status = envIntp(23) }, []string{
			"fabric registration failed (GPU 3: fabric registration completed with error (NVML return 23))",
			"system error (ncclSystemError)", "--no-mnnvl"}},
		{"no channel", func(n *topology.Node) { n.NVLinkFabric.IMEX.Channels = []topology.IMEXChannel{} }, []string{
			"without a usable IMEX channel (no channel node in /dev/nvidia-caps-imex-channels)",
			"fails every communicator that spans nodes with a system error (ncclSystemError",
			"mkdir -p /dev/nvidia-caps-imex-channels && mknod /dev/nvidia-caps-imex-channels/channel0 c 234 0",
			"after every reboot", "--no-mnnvl (NCCL_MNNVL_ENABLE=0"}},
		{"stale channel", func(n *topology.Node) {
			n.NVLinkFabric.IMEX.Channels[0].Problem = "major 235, but the driver's nvidia-caps-imex-channels major is 234 (a node left from an earlier boot)"
		}, []string{"(/dev/nvidia-caps-imex-channels/channel0: major 235"}},
		{"no driver device", func(n *topology.Node) {
			n.NVLinkFabric.IMEX.DeviceMajor, n.NVLinkFabric.IMEX.Channels = nil, nil
		}, []string{"the driver registered no nvidia-caps-imex-channels device", "c <major from /proc/devices> 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := mnnvlNode()
			c.edit(&n)
			e := envMustBuild(t, n, EnvRequest{})
			for _, s := range c.want {
				envWarned(t, e, s)
			}
			envMustUnset(t, e, "NCCL_MNNVL_ENABLE")
			// Asked for, MNNVL is off and nothing is left to warn of.
			e = envMustBuild(t, n, EnvRequest{NoMNNVL: true})
			envMustGet(t, e, "NCCL_MNNVL_ENABLE", "0")
			if w := mnnvlWarnings(e); len(w) > 0 {
				t.Errorf("--no-mnnvl still warns: %q", w)
			}
			// So it is where the caller's environment has it off already.
			e = envMustBuild(t, n, EnvRequest{Preset: func(name string) (string, bool) { return "0", name == "NCCL_MNNVL_ENABLE" }})
			envMustUnset(t, e, "NCCL_MNNVL_ENABLE")
			if w := mnnvlWarnings(e); len(w) > 0 {
				t.Errorf("NCCL_MNNVL_ENABLE=0 preset still warns: %q", w)
			}
		})
	}
}

// A single-node NVSwitch system (no cluster UUID) is no MNNVL node: no
// warning, whatever its IMEX state; --no-mnnvl still sets the variable
// (it is harmless there, and was asked for).
func TestEnvMNNVLSingleNode(t *testing.T) {
	n := mnnvlNode()
	n.NVLinkFabric.MultiNode = false
	n.NVLinkFabric.IMEX = topology.IMEX{}
	for i := range n.GPUs {
		n.GPUs[i].Fabric.ClusterUUID = ""
	}
	if w := mnnvlWarnings(envMustBuild(t, n, EnvRequest{})); len(w) > 0 {
		t.Errorf("single-node NVSwitch warns: %q", w)
	}
	envMustGet(t, envMustBuild(t, n, EnvRequest{NoMNNVL: true}), "NCCL_MNNVL_ENABLE", "0")
}

// NCCL_MNNVL_ENABLE comes after the fabric variables, before the
// per-rank ones (docs/nccl-env.md row 11a).
func TestEnvMNNVLOrder(t *testing.T) {
	n := fixtureNode(t, "gb200-nvl72-tray")
	e := envMustBuild(t, n, EnvRequest{Rank: envIntp(0), NoMNNVL: true, TopoFile: "/run/x.xml"})
	idx := map[string]int{}
	for i, v := range e.Vars {
		idx[v.Name] = i
	}
	if !(idx["NCCL_IB_HCA"] < idx["NCCL_MNNVL_ENABLE"] && idx["NCCL_MNNVL_ENABLE"] < idx["NCCL_TOPO_FILE"] && idx["NCCL_TOPO_FILE"] < idx["GPUAFFINITY_GPU"]) {
		t.Errorf("order %v", e.Vars)
	}
}

// The fixtures: the healthy GB200 tray gets no MNNVL variable and no
// warning; the tray whose GPU 2 failed registration (all-zero cluster
// UUID) and has no IMEX channel node gets both warnings.
func TestEnvMNNVLFixtures(t *testing.T) {
	e := envMustBuild(t, fixtureNode(t, "gb200-nvl72-tray"), EnvRequest{})
	envMustUnset(t, e, "NCCL_MNNVL_ENABLE")
	if w := mnnvlWarnings(e); len(w) > 0 {
		t.Errorf("gb200-nvl72-tray warns: %q", w)
	}
	e = envMustBuild(t, fixtureNode(t, "gb200-nvl72-fabric-failed"), EnvRequest{})
	envMustUnset(t, e, "NCCL_MNNVL_ENABLE")
	envWarned(t, e, "fabric is not ready (GPU 2: no cluster UUID)")
	envWarned(t, e, "without a usable IMEX channel (no channel node in /dev/nvidia-caps-imex-channels)")
	envWarned(t, e, "mknod /dev/nvidia-caps-imex-channels/channel0 c 234 0")
	if w := mnnvlWarnings(e); len(w) != 2 {
		t.Errorf("gb200-nvl72-fabric-failed: %d MNNVL warnings, want 2: %q", len(w), w)
	}
}
