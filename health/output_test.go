package health

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// nvl72Node is a GB200 NVL72 compute tray's four GPUs as NVML reports
// them once the fabric registered them: one cluster UUID for the rack's
// NVLink domain and one clique (the example value of a real GB200 node's
// nvidia.com/gpu.clique label, shared/research/frontier.md 3.4:
// 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766).
func nvl72Node() topology.Node {
	var n topology.Node
	for i := range 4 {
		n.GPUs = append(n.GPUs, topology.GPU{Index: i, Fabric: &topology.GPUFabric{
			State: topology.FabricCompleted, Status: ptr(0),
			ClusterUUID: "9277d399-0674-44a9-b64e-d85bb19ce2b0", CliqueID: 32766,
		}})
	}
	return n
}

// The feature file: gpuaffinity.io's labels, the clique in our namespace
// by default, GFD's own key only where asked for.
func TestNFDFeaturesClique(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	rep := Report{Time: at, Healthy: true, Results: []Result{{ID: "topo.aligned", Verdict: Pass}}}
	n := nvl72Node()
	n.NICs = []topology.NIC{{Role: topology.RoleCompute, Fabric: topology.FabricInfiniBand}}
	head := "# +expiry-time=2025-06-01T12:30:00Z\n# written by gpuaffinity check at 2025-06-01T12:00:00Z\n" +
		"gpuaffinity.io/healthy=true\ngpuaffinity.io/fabric=infiniband\ngpuaffinity.io/aligned=true\n"
	clique := "gpuaffinity.io/nvlink.clique=9277d399-0674-44a9-b64e-d85bb19ce2b0.32766\n"
	gfd := "nvidia.com/gpu.clique=9277d399-0674-44a9-b64e-d85bb19ce2b0.32766\n"

	if d := cmp.Diff(head+clique, NFDFeatures(rep, n, at.Add(30*time.Minute))); d != "" {
		t.Errorf("default (-want +got):\n%s", d)
	}
	if d := cmp.Diff(head+clique+gfd, NFDOptions{GFDClique: true}.Features(rep, n, at.Add(30*time.Minute))); d != "" {
		t.Errorf("GFDClique (-want +got):\n%s", d)
	}
	// A DGX H100 has no clique label, with or without GFD's key.
	for i := range n.GPUs {
		n.GPUs[i].Fabric.ClusterUUID = ""
	}
	if d := cmp.Diff(head, NFDOptions{GFDClique: true}.Features(rep, n, at.Add(30*time.Minute))); d != "" {
		t.Errorf("single-node NVSwitch (-want +got):\n%s", d)
	}
}

// The fixtures, discovered: the tray's four GPUs share one clique; with
// GPU 2's registration failed the other three still name it (GFD's rule);
// a DGX B200 (single-node NVSwitch, all-zero cluster UUID) has none.
func TestNVLinkCliqueFixtures(t *testing.T) {
	for machine, want := range map[string]string{
		"gb200-nvl72-tray":          "5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845.32766",
		"gb200-nvl72-fabric-failed": "5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845.32766",
		"dgx-b200":                  "",
		"dgx-h100":                  "",
	} {
		t.Run(machine, func(t *testing.T) {
			if got := topology.NVLinkClique(discoverRoot(t, fakesystest.Root(t, machine))); got != want {
				t.Errorf("topology.NVLinkClique = %q, want %q", got, want)
			}
		})
	}
}
