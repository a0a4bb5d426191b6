package agent

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// On a GB200 NVL72 tray (internal/testutil/fakesys/testdata/machines/
// gb200-nvl72-tray.yaml: four GPUs registered in cluster
// 5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845, clique 32766) the NFD file names
// the clique in gpuaffinity.io's namespace, and GPU Feature Discovery's
// nvidia.com/gpu.clique only with NFDGFDClique (--nfd-gfd-clique).
func TestAgentNFDClique(t *testing.T) {
	const clique = "5e0c3a7b-9d41-4f28-b6e2-1a9c7f30d845.32766"
	for _, gfd := range []bool{false, true} {
		root := fakesystest.Root(t, "gb200-nvl72-tray")
		nfd := filepath.Join(t.TempDir(), "gpuaffinity.features")
		startAgent(t, Options{Root: root, StateDir: "", NFDFile: nfd, NFDGFDClique: gfd})
		got := lines(t, nfd)
		if !slices.Contains(got, "gpuaffinity.io/nvlink.clique="+clique) {
			t.Errorf("gfd %t: no gpuaffinity.io/nvlink.clique=%s in\n%q", gfd, clique, got)
		}
		if has := slices.Contains(got, "nvidia.com/gpu.clique="+clique); has != gfd {
			t.Errorf("gfd %t: nvidia.com/gpu.clique=%s written %t in\n%q", gfd, clique, has, got)
		}
	}
}
