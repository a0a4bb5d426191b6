package launch

import (
	"errors"
	"fmt"
	"strconv"
)

// LocalRankVars are the variables launchers put the local rank in, in the
// order LocalRankFromEnv consults them (env and exec read them
// here; the commands' help and warnings name this list): torchrun, Slurm srun, Open MPI,
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
