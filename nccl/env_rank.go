package nccl

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// LocalRankVars are the variables launchers put the local rank in, in the
// order LocalRankFromEnv consults them: torchrun, Slurm srun, Open MPI,
// MPICH/Intel MPI (Hydra), PMI.
var LocalRankVars = []string{"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}

// ErrLocalRank is wrapped by LocalRankFromEnv's errors.
var ErrLocalRank = errors.New("bad local rank")

// LocalRankFromEnv reads the local rank from the first variable of
// LocalRankVars that is set (non-empty); source names it. Another of them
// set to a different value, or any of them not a non-negative integer, is
// an error. Nothing set answers nil, "", nil.
func LocalRankFromEnv(getenv func(string) string) (rank *int, source string, err error) {
	for _, name := range LocalRankVars {
		v := getenv(name)
		if v == "" {
			continue
		}
		r, err := strconv.Atoi(v)
		if err != nil || r < 0 {
			return nil, "", fmt.Errorf("%w: %s=%q is not a non-negative integer", ErrLocalRank, name, v)
		}
		if rank == nil {
			rank, source = &r, name
			continue
		}
		if r != *rank {
			return nil, "", fmt.Errorf("%w: %s=%d and %s=%q disagree", ErrLocalRank, source, *rank, name, v)
		}
	}
	return rank, source, nil
}

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
