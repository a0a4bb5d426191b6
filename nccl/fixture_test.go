package nccl

import (
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// fixtureNodes caches each fixture machine's discovered Node as JSON
// (building a root dominates test time); fixtureNode hands out a private
// deep copy, so tests may change it.
var fixtureNodes sync.Map // name -> func() ([]byte, error)

func fixtureNode(t *testing.T, name string) topology.Node {
	t.Helper()
	f, _ := fixtureNodes.LoadOrStore(name, sync.OnceValues(func() ([]byte, error) {
		dir, err := os.MkdirTemp("", "nccl-"+name+"-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := fakesys.BuildMachine(name, dir); err != nil {
			return nil, err
		}
		n, err := discover.Discover(discover.Options{Root: dir})
		if err != nil {
			return nil, err
		}
		return json.Marshal(n)
	}))
	data, err := f.(func() ([]byte, error))()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var n topology.Node
	if err := json.Unmarshal(data, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// foundationFixtures are the machines of the foundation and NCCL issues,
// each of which must have hand-written facts and expected env output
// here. Later fixtures (the binding layouts: SMT off, SNC, cgroup limits)
// still go through every invariant and golden test that loops over
// fakesys.Machines().
var foundationFixtures = []string{
	"aws-p4d", "aws-p5", "azure-nd-h100-v5", "dgx-h100", "gcp-a3-mega",
	"grace-hopper", "h200-vm", "oci-bm-gpu-h100",
}
