package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/binding"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/render"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// FuzzDecodeCache feeds the state-file reader anything: decoding a
// topology.json never panics, and a node it accepts is one env, cpumap and
// the JSON renderer can take (an error, never a panic or a runaway
// allocation).
func FuzzDecodeCache(f *testing.F) {
	dir := f.TempDir()
	if err := fakesys.BuildMachine("h200-vm", dir); err == nil {
		if n, err := discoverForFuzz(dir); err == nil {
			var b bytes.Buffer
			if render.JSON(&b, n) == nil {
				f.Add(b.Bytes())
			}
		}
	}
	f.Add([]byte(`{"schema":"` + topology.Schema + `","gpus":[{"index":0,"locality":{"cpus":"0-3","node":0}}],"cpu":{"allowed":"0-3","online":"0-3"}}`))
	f.Add([]byte(`{"schema":"` + topology.Schema + `","numa_nodes":[{"id":0,"cpus":"0-1048575"}]}`))
	f.Add([]byte(`{"schema":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := cache.Decode(filepath.Join("state", cache.TopologyFile), data)
		if err != nil {
			return
		}
		r := 0
		nccl.BuildEnv(n, nccl.EnvRequest{Rank: &r})
		binding.Compute(n, binding.Options{})
		render.JSON(&bytes.Buffer{}, n)
	})
}

// discoverForFuzz discovers a fixture root for a seed.
func discoverForFuzz(root string) (topology.Node, error) {
	defer os.RemoveAll(root)
	return discover.Discover(discover.Options{Root: root})
}
