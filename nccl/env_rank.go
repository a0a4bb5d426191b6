package nccl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

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

// envRankGPU maps a local rank to its GPU: entry [rank] of
// CUDA_VISIBLE_DEVICES when set (an NVML index or a GPU-UUID prefix),
// else the GPU whose index is rank.
func envRankGPU(n topology.Node, rank int, cvd *string) (*topology.GPU, error) {
	if rank < 0 {
		return nil, fmt.Errorf("%w: local rank %d is negative", ErrRank, rank)
	}
	if len(n.GPUs) == 0 {
		why := "no NVIDIA GPU on the PCI bus"
		if len(n.Unsupported) > 0 {
			a := n.Unsupported[0]
			why = fmt.Sprintf("%d accelerator(s) on the PCI bus are not supported yet (%s %s:%s at %s)",
				len(n.Unsupported), envOr(a.Name, "class "+a.Class), strings.TrimPrefix(a.Vendor, "0x"), strings.TrimPrefix(a.Device, "0x"), a.BusID)
		}
		return nil, fmt.Errorf("%w: local rank %d: this node has no GPU gpuaffinity supports: %s", ErrRank, rank, why)
	}
	if cvd == nil {
		for i := range n.GPUs {
			if n.GPUs[i].Index == rank {
				return &n.GPUs[i], nil
			}
		}
		return nil, fmt.Errorf("%w: local rank %d but this node has %d GPU(s) (indexes 0-%d) and CUDA_VISIBLE_DEVICES is unset",
			ErrRank, rank, len(n.GPUs), len(n.GPUs)-1)
	}
	if strings.TrimSpace(*cvd) == "" {
		return nil, fmt.Errorf("%w: local rank %d: CUDA_VISIBLE_DEVICES is empty, which hides every GPU", ErrRank, rank)
	}
	entries := strings.Split(*cvd, ",")
	if rank >= len(entries) {
		return nil, fmt.Errorf("%w: local rank %d but CUDA_VISIBLE_DEVICES=%q has %d entries", ErrRank, rank, *cvd, len(entries))
	}
	// CUDA stops at the first entry that names no device: every entry up
	// to the rank's must resolve.
	var g *topology.GPU
	for i := 0; i <= rank; i++ {
		var err error
		g, err = envResolveDevice(n, strings.TrimSpace(entries[i]))
		if err != nil {
			if i == rank {
				return nil, fmt.Errorf("local rank %d: CUDA_VISIBLE_DEVICES=%q entry %d: %w", rank, *cvd, i, err)
			}
			return nil, fmt.Errorf("local rank %d: CUDA_VISIBLE_DEVICES=%q entry %d (before the rank's, which CUDA then hides): %w", rank, *cvd, i, err)
		}
	}
	return g, nil
}

// envResolveDevice resolves one CUDA_VISIBLE_DEVICES entry.
func envResolveDevice(n topology.Node, e string) (*topology.GPU, error) {
	switch {
	case e == "":
		return nil, fmt.Errorf("%w: empty entry", ErrRank)
	case strings.HasPrefix(e, "MIG-"):
		return nil, fmt.Errorf("%w: %q: %w", ErrRank, e, ErrMIG)
	case strings.HasPrefix(e, "GPU-"):
		var found *topology.GPU
		for i := range n.GPUs {
			if u := n.GPUs[i].UUID; len(u) >= len(e) && strings.EqualFold(u[:len(e)], e) {
				if found != nil {
					return nil, fmt.Errorf("%w: %q matches the UUIDs of GPU %d and GPU %d", ErrRank, e, found.Index, n.GPUs[i].Index)
				}
				found = &n.GPUs[i]
			}
		}
		if found == nil {
			return nil, fmt.Errorf("%w: %q is the UUID (prefix) of no GPU on this node", ErrRank, e)
		}
		return found, nil
	}
	idx, err := strconv.Atoi(e)
	if err != nil || idx < 0 {
		return nil, fmt.Errorf("%w: %q is neither a GPU index nor a GPU-<uuid>", ErrRank, e)
	}
	for i := range n.GPUs {
		if n.GPUs[i].Index == idx {
			return &n.GPUs[i], nil
		}
	}
	return nil, fmt.Errorf("%w: GPU index %d is not on this node (%d GPU(s))", ErrRank, idx, len(n.GPUs))
}
