package main

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"testing"
)

// TestAMDSelectEnv: on amd-mi300x without CUDA_VISIBLE_DEVICES, env maps
// the local rank within ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES
// (rocm.docs.amd.com, "GPU isolation techniques"). By hand from the
// fixture (AMD's topology-mapping.md: GPU k <-> mlx5_k, GPUs 4-7 on CPU
// 1 = CPUs 96-191,288-383): ROCR_VISIBLE_DEVICES=4,5 makes rank 0 GPU 4;
// HIP_VISIBLE_DEVICES=1 counts within it: GPU 5. A ROCr UUID (GPU-, then
// the fixture's default unique_id, FNV-1a 64 of "unique:<bdf>",
// internal/testutil/fakesys/FORMAT.md) of GPU 6 (0000:d5:00.0) selects GPU 6.
func TestAMDSelectEnv(t *testing.T) {
	h := fnv.New64a()
	h.Write([]byte("unique:0000:d5:00.0"))
	uuid6 := fmt.Sprintf("GPU-%016x", h.Sum64())
	for _, tc := range []struct {
		rocr, hip, gpu, nic, cpus string
	}{
		{rocr: "4,5", gpu: "4", nic: "mlx5_4", cpus: "96-191,288-383"},
		{rocr: "4,5", hip: "1", gpu: "5", nic: "mlx5_5", cpus: "96-191,288-383"},
		{rocr: uuid6, gpu: "6", nic: "mlx5_6", cpus: "96-191,288-383"},
	} {
		envCleanEnv(t, "ROCR_VISIBLE_DEVICES", tc.rocr)
		t.Setenv("HIP_VISIBLE_DEVICES", "")
		if tc.hip == "" {
			os.Unsetenv("HIP_VISIBLE_DEVICES")
		} else {
			t.Setenv("HIP_VISIBLE_DEVICES", tc.hip)
		}
		out, stderr, err := envRun(t, "--demo", "amd-mi300x", "--local-rank", "0")
		if err != nil {
			t.Fatalf("ROCR %q HIP %q: %v", tc.rocr, tc.hip, err)
		}
		for _, want := range []string{
			"export GPUAFFINITY_GPU='" + tc.gpu + "'\n",
			"export GPUAFFINITY_HIP_DEVICES='" + tc.gpu + "'\n",
			"export GPUAFFINITY_NICS='" + tc.nic + "'\n",
			"export GPUAFFINITY_CPUS='" + tc.cpus + "'\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("ROCR %q HIP %q: no %q in\n%s", tc.rocr, tc.hip, want, out)
			}
		}
		if !strings.Contains(stderr, "CUDA_VISIBLE_DEVICES is not") {
			t.Errorf("ROCR %q HIP %q: stderr %q", tc.rocr, tc.hip, stderr)
		}
	}
	// CUDA_VISIBLE_DEVICES wins over both.
	envCleanEnv(t, "ROCR_VISIBLE_DEVICES", "4,5", "HIP_VISIBLE_DEVICES", "1", "CUDA_VISIBLE_DEVICES", "2")
	out, _, err := envRun(t, "--demo", "amd-mi300x", "--local-rank", "0")
	if err != nil || !strings.Contains(out, "export GPUAFFINITY_GPU='2'\n") {
		t.Errorf("with CUDA_VISIBLE_DEVICES=2: %v\n%s", err, out)
	}
	// Two entries naming one GPU: an error naming them.
	envCleanEnv(t, "ROCR_VISIBLE_DEVICES", "4,4")
	os.Unsetenv("HIP_VISIBLE_DEVICES")
	if _, _, err := envRun(t, "--demo", "amd-mi300x", "--local-rank", "0"); err == nil || !strings.Contains(err.Error(), "both name GPU 4") {
		t.Errorf("ROCR 4,4: %v", err)
	}
}

// TestAMDSelectEnvNVIDIA: on an NVIDIA node the ROCm variables are not
// read: rank 3 of dgx-h100 is GPU 3.
func TestAMDSelectEnvNVIDIA(t *testing.T) {
	envCleanEnv(t, "ROCR_VISIBLE_DEVICES", "4,5", "HIP_VISIBLE_DEVICES", "1")
	out, _, err := envRun(t, "--demo", "dgx-h100", "--local-rank", "3")
	if err != nil || !strings.Contains(out, "export GPUAFFINITY_GPU='3'\n") {
		t.Errorf("%v\n%s", err, out)
	}
}
