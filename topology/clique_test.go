package topology

import (
	"strings"
	"testing"
)

// nvl72Node is a GB200 NVL72 compute tray's four GPUs as NVML reports
// them once the fabric registered them: one cluster UUID for the rack's
// NVLink domain and one clique (the example value of a real GB200 node's
// nvidia.com/gpu.clique label, shared/research/frontier.md 3.4:
// 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766).
func nvl72Node() Node {
	var n Node
	for i := range 4 {
		n.GPUs = append(n.GPUs, GPU{Index: i, Fabric: &GPUFabric{
			State: FabricCompleted, Status: new(int),
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
		edit func(n *Node)
		want string
	}{
		{name: "every GPU attached", want: want},
		// GFD leaves a GPU that is not attached out; the others still name
		// the clique (the fabric checks fail the node for the one).
		{name: "one registration failed", want: want, edit: func(n *Node) {
			n.GPUs[2].Fabric.Status = func() *int { v := 999; return &v }() // NVML_ERROR_UNKNOWN
		}},
		{name: "one still registering", want: want, edit: func(n *Node) {
			n.GPUs[1].Fabric = &GPUFabric{State: FabricInProgress}
		}},
		{name: "one outside the fabric", want: want, edit: func(n *Node) { n.GPUs[3].Fabric = nil }},
		// Two cliques on one tray: no one value to give, as GFD warns
		// "Clique IDs are non-unique" and sets none.
		{name: "split cliques", edit: func(n *Node) { n.GPUs[3].Fabric.CliqueID = 1 }},
		{name: "two cluster UUIDs", edit: func(n *Node) {
			n.GPUs[0].Fabric.ClusterUUID = "00000000-0000-0000-0000-000000000001"
		}},
		// A DGX H100 or B200: NVSwitch fabric, all-zero cluster UUID.
		{name: "single-node NVSwitch", edit: func(n *Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric.ClusterUUID, n.GPUs[i].Fabric.CliqueID = "", 0
			}
		}},
		{name: "no GPU attached", edit: func(n *Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric.State = FabricNotStarted
			}
		}},
		{name: "no GPU", edit: func(n *Node) { n.GPUs = nil }},
		// A hand-written --topo-file is no NVML answer: a value that is no
		// label value (here one that would add a line to the file) is
		// left out.
		{name: "not a label value", edit: func(n *Node) {
			for i := range n.GPUs {
				n.GPUs[i].Fabric.ClusterUUID = "x\ngpuaffinity.io/healthy=true"
			}
		}},
		{name: "longer than 63 characters", edit: func(n *Node) {
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
