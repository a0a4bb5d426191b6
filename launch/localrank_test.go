package launch

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

func TestLocalRankFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		env    func(string) string
		rank   *int
		source string
		errs   []string
	}{
		{env(), nil, "", nil},
		{env("LOCAL_RANK", "3"), envIntp(3), "LOCAL_RANK", nil},
		{env("SLURM_LOCALID", "0", "OMPI_COMM_WORLD_LOCAL_RANK", "0"), envIntp(0), "SLURM_LOCALID", nil},
		{env("PMI_LOCAL_RANK", "5"), envIntp(5), "PMI_LOCAL_RANK", nil},
		{env("MPI_LOCALRANKID", "2", "PMI_LOCAL_RANK", ""), envIntp(2), "MPI_LOCALRANKID", nil},
		{env("LOCAL_RANK", "1", "SLURM_LOCALID", "2"), nil, "", []string{"LOCAL_RANK=1", `SLURM_LOCALID="2"`, "disagree"}},
		{env("LOCAL_RANK", "x"), nil, "", []string{`LOCAL_RANK="x"`}},
		{env("LOCAL_RANK", "-1"), nil, "", []string{`LOCAL_RANK="-1"`}},
		{env("LOCAL_RANK", "1", "PMI_LOCAL_RANK", "one"), nil, "", []string{`PMI_LOCAL_RANK="one"`}},
	} {
		rank, source, err := LocalRankFromEnv(tc.env)
		if tc.errs != nil {
			if err == nil || !errors.Is(err, ErrLocalRank) {
				t.Errorf("want error %v, got %v", tc.errs, err)
				continue
			}
			for _, w := range tc.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			continue
		}
		if err != nil || source != tc.source || (rank == nil) != (tc.rank == nil) || (rank != nil && *rank != *tc.rank) {
			t.Errorf("got %v %q %v, want %v %q", rank, source, err, tc.rank, tc.source)
		}
	}
}

func envIntp(v int) *int { return &v }

// TestLocalRankVarsOwned fails when a second list of the local-rank
// variables appears in the product code: cmd once held five copies of
// it, and the list itself sat in nccl. A list is told by the variable
// only launchers that set a local rank (and no GPU runtime) use.
func TestLocalRankVarsOwned(t *testing.T) {
	srcfiles.Product(t, "..", func(p, text string) {
		for _, tell := range []string{`"SLURM_LOCALID"`, `"OMPI_COMM_WORLD_LOCAL_RANK"`, `"MPI_LOCALRANKID"`} {
			if strings.Contains(text, tell) {
				t.Errorf("%s names %s: read the local rank with launch.LocalRankFromEnv, name the list with launch.LocalRankVars", p, tell)
			}
		}
	}, "launch/localrank.go")
}
