package nccl

import (
	"fmt"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// RankGPU is the GPU local rank r drives with k ranks per GPU (0 means
// 1) under CUDA_VISIBLE_DEVICES cvd (nil: unset): topology.VisibleGPUs
// and Selection.Rank, the one mapping env, cpumap, exec and check share.
func RankGPU(n topology.Node, r, k int, cvd *string) (*topology.GPU, error) {
	return rankGPU(n, r, k, func() (topology.Selection, error) { return topology.VisibleGPUs(n, cvd) })
}

// rankGPU is RankGPU in the selection visible gives.
func rankGPU(n topology.Node, r, k int, visible func() (topology.Selection, error)) (*topology.GPU, error) {
	if len(n.GPUs) == 0 {
		why := "no NVIDIA GPU on the PCI bus"
		if w := topology.UnsupportedWarning(n.Unsupported, 0); w != "" {
			why = w
		}
		return nil, fmt.Errorf("%w: local rank %d: this node has no GPU gpuaffinity supports: %s", ErrRank, r, why)
	}
	sel, err := visible()
	if err != nil {
		return nil, fmt.Errorf("%w: local rank %d: %w", ErrRank, r, err)
	}
	idx, _, err := sel.Rank(n, r, k)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRank, err)
	}
	for i := range n.GPUs {
		if n.GPUs[i].Index == idx {
			return &n.GPUs[i], nil
		}
	}
	return nil, fmt.Errorf("%w: local rank %d: GPU %d is not on this node", ErrRank, r, idx)
}
