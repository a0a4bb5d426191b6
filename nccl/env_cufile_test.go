package nccl

import (
	"slices"
	"testing"
)

// CUFILE_ENV_PATH_JSON is set only when a cufile.json was written, right
// after NCCL_TOPO_FILE, as the last node-level variable (docs/nccl-env.md
// row 12a); on EFA nodes too, where NCCL_TOPO_FILE is not.
func TestEnvCuFileJSON(t *testing.T) {
	const path = "/run/gpuaffinity/cufile.json"
	for _, m := range []string{"dgx-h100", "aws-p5"} {
		n := fixtureNode(t, m)
		envMustUnset(t, envMustBuild(t, n, EnvRequest{Rank: envIntp(0)}), "CUFILE_ENV_PATH_JSON")
		e := envMustBuild(t, n, EnvRequest{Rank: envIntp(0), TopoFile: "/run/gpuaffinity/nccl-topo.xml", CuFileJSON: path})
		envMustGet(t, e, "CUFILE_ENV_PATH_JSON", path)
		i := slices.IndexFunc(e.Vars, func(v Var) bool { return v.Name == "CUFILE_ENV_PATH_JSON" })
		if e.Vars[i+1].Name != "GPUAFFINITY_GPU" {
			t.Errorf("%s: CUFILE_ENV_PATH_JSON is not the last node-level variable: %v", m, e.Vars)
		}
		if m == "dgx-h100" && e.Vars[i-1].Name != "NCCL_TOPO_FILE" {
			t.Errorf("%s: CUFILE_ENV_PATH_JSON does not follow NCCL_TOPO_FILE: %v", m, e.Vars)
		}
	}
}
