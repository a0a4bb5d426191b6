package health

import (
	"strings"
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

// The clique label follows GPU Feature Discovery's rule (internal/lm/imex.go
// with go-nvlib's IsFabricAttached): the one <clusterUuid>.<cliqueId> of
// the GPUs whose registration completed with success and a non-zero
// cluster UUID, none where they disagree.
func TestNVLinkClique(t *testing.T) {
	const want = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"
	for _, c := range []struct {
		name string
		edit func(n *topology.Node)
		want string
	}{
		{name: "every GPU attached", want: want},
		// GFD leaves a GPU that is not attached out; the others still name
		// the clique (the fabric checks fail the node for the one).
		{name: "one registration failed", want: want, edit: func(n *topology.Node) {
			n.GPUs[2].Fabric.Status = ptr(999) // NVML_ERROR_UNKNOWN
		}},
		{name: "one still registering", want: want, edit: func(n *topology.Node) {
			n.GPUs[1].Fabric = &topology.GPUFabric{State: topology.FabricInProgress}
		}},
		{name: "one outside the fabric", want: want, edit: func(n *topology.Node) { n.GPUs[3].Fabric = nil }},
		// Two cliques on one tray: no one value to give, as GFD warns
		// "Clique IDs are non-unique" and sets none.
		{name: "split cliques", edit: func(n *topology.Node) { n.GPUs[3].Fabric.CliqueID = 1 }},
		{name: "two cluster UUIDs", edit: func(n *topology.Node) {
			n.GPUs[0].Fabric.ClusterUUID = "00000000-0000-0000-0000-000000000001"
		}},
		// A DGX H100 or B200: NVSwitch fabric, all-zero cluster UUID.
		{name: "single-node NVSwitch", edit: func(n *topology.Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric.ClusterUUID, n.GPUs[i].Fabric.CliqueID = "", 0
			}
		}},
		{name: "no GPU attached", edit: func(n *topology.Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric.State = topology.FabricNotStarted
			}
		}},
		{name: "no GPU", edit: func(n *topology.Node) { n.GPUs = nil }},
		// A hand-written --topo-file is no NVML answer: a value that is no
		// label value (here one that would add a line to the file) is
		// left out.
		{name: "not a label value", edit: func(n *topology.Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric.ClusterUUID = "x\ngpuaffinity.io/healthy=true"
			}
		}},
		{name: "longer than 63 characters", edit: func(n *topology.Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric.ClusterUUID = strings.Repeat("a", 60)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := nvl72Node()
			if c.edit != nil {
				c.edit(&n)
			}
			if got := NVLinkClique(n); got != c.want {
				t.Errorf("NVLinkClique = %q, want %q", got, c.want)
			}
		})
	}
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
			if got := NVLinkClique(discoverRoot(t, fakesystest.Root(t, machine))); got != want {
				t.Errorf("NVLinkClique = %q, want %q", got, want)
			}
		})
	}
}
