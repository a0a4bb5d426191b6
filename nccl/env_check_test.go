package nccl

import (
	"strings"
	"testing"
)

// TestCheckEnv holds variables to env's answer on the DGX H100 fixture
// (compute mlx5_0,3,4,5,6,9,10,11; storage mlx5_1,2,7,8; enp4s0f0 holds
// the default route; GPU 0's NIC mlx5_0), read with NCCL's list rules:
// '^' excludes, '=' matches exactly, else a name is a prefix.
func TestCheckEnv(t *testing.T) {
	n := fixtureNode(t, "dgx-h100")
	for _, tc := range []struct {
		name, value, status, problem string
	}{
		{"NCCL_IB_HCA", "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1", EnvOK, ""},
		{"NCCL_IB_HCA", "^=mlx5_1,mlx5_2,mlx5_7,mlx5_8", EnvOK, ""},
		// Without '=', "mlx5_1" is a prefix: it excludes mlx5_10 and mlx5_11 too.
		{"NCCL_IB_HCA", "^mlx5_1,mlx5_2,mlx5_7,mlx5_8", EnvWrong, "leaves out compute port(s) mlx5_10:1,mlx5_11:1"},
		{"NCCL_IB_HCA", "mlx5_0", EnvWrong, "leaves out compute port(s) mlx5_3:1,"},
		{"NCCL_IB_HCA", "mlx5", EnvWrong, "selects mlx5_1 (storage), mlx5_2 (storage), mlx5_7 (storage), mlx5_8 (storage)"},
		{"NCCL_IB_HCA", "=mlx5_0:2", EnvWrong, "selects no RDMA device of this node"},
		{"NCCL_IB_HCA", "", EnvUnset, "NCCL then uses every RDMA device, mlx5_1 (storage)"},
		{"NCCL_SOCKET_IFNAME", "^docker,lo", EnvOK, ""},
		{"NCCL_SOCKET_IFNAME", "enp", EnvOK, ""},
		{"NCCL_SOCKET_IFNAME", "=enp4", EnvWrong, "does not select enp4s0f0"},
		{"UCX_NET_DEVICES", "mlx5_0:1", EnvOK, ""},
		{"UCX_NET_DEVICES", "all", EnvWrong, "all: every device"},
		{"UCX_NET_DEVICES", "mlx5_0:1,mlx5_99:1", EnvWrong, "names mlx5_99:1, not a device of this node"},
		{"UCX_NET_DEVICES", "mlx5_3:1", EnvWrong, "names mlx5_3:1 of mlx5_3 (compute), not one of the GPU's NICs"},
		{"CUDA_VISIBLE_DEVICES", "0,1", EnvOK, ""},
		{"CUDA_VISIBLE_DEVICES", "GPU-dgxh100-0000-0000-0000-000000000000", EnvOK, ""},
		{"CUDA_VISIBLE_DEVICES", "1", EnvWrong, "selects GPU(s) 1, but the process drives GPU 0"},
	} {
		env := map[string]string{}
		if tc.status != EnvUnset {
			env[tc.name] = tc.value
		}
		checks := CheckEnv(n, CheckRequest{GPUs: []int{0}, Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		found := false
		for _, c := range checks {
			if c.Name != tc.name {
				continue
			}
			found = true
			if c.Status != tc.status || !strings.Contains(c.Problem, tc.problem) || (tc.problem == "" && c.Problem != "") {
				t.Errorf("%s=%q: %s %q, want %s %q", tc.name, tc.value, c.Status, c.Problem, tc.status, tc.problem)
			}
		}
		if !found {
			t.Errorf("%s: not checked", tc.name)
		}
	}
	// In a pod or Slurm job, ordinals are left unchecked; UUIDs are not.
	lookup := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == "CUDA_VISIBLE_DEVICES" }
	}
	for v, want := range map[string]string{"1": EnvUnchecked, "GPU-dgxh100-0000-0000-0000-000000000001": EnvWrong} {
		c := CheckEnv(n, CheckRequest{GPUs: []int{0}, Lookup: lookup(v), Confined: true})[0]
		if c.Status != want {
			t.Errorf("confined CUDA_VISIBLE_DEVICES=%s: %s, want %s", v, c.Status, want)
		}
	}
}
