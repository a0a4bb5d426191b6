package main

import (
	"strings"
	"testing"
)

// On the GB200 tray whose GPU 2 failed registration and which has no
// IMEX channel node: env prints no MNNVL variable, warns on stderr (each
// warning once, also with --all-ranks), and --no-mnnvl sets
// NCCL_MNNVL_ENABLE=0 and drops the warnings.
func TestEnvCmdMNNVL(t *testing.T) {
	envCleanEnv(t)
	for _, args := range [][]string{{"--local-rank", "2"}, {"--all-ranks"}} {
		out, stderr, err := envRun(t, append([]string{"--demo", "gb200-nvl72-fabric-failed"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.Contains(out, "NCCL_MNNVL_ENABLE") || strings.Contains(out, "NCCL_NVLS_ENABLE") || strings.Contains(out, "NCCL_CUMEM_ENABLE") {
			t.Errorf("%v: MNNVL variable without --no-mnnvl:\n%s", args, out)
		}
		for _, w := range []string{
			"gpuaffinity: warning: multi-node NVLink node, but the fabric is not ready (GPU 2: no cluster UUID)",
			"gpuaffinity: warning: multi-node NVLink node without a usable IMEX channel",
			"mknod /dev/nvidia-caps-imex-channels/channel0 c 234 0",
		} {
			if strings.Count(stderr, w) != 1 {
				t.Errorf("%v: stderr has %q %d times:\n%s", args, w, strings.Count(stderr, w), stderr)
			}
		}
	}
	out, stderr, err := envRun(t, "--demo", "gb200-nvl72-fabric-failed", "--local-rank", "0", "--no-mnnvl")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "export NCCL_MNNVL_ENABLE='0'\n") {
		t.Errorf("--no-mnnvl: no NCCL_MNNVL_ENABLE=0:\n%s", out)
	}
	if strings.Contains(stderr, "multi-node NVLink") {
		t.Errorf("--no-mnnvl still warns:\n%s", stderr)
	}
	// The healthy tray: nothing of MNNVL either way.
	out, stderr, err = envRun(t, "--demo", "gb200-nvl72-tray", "--local-rank", "0")
	if err != nil || strings.Contains(out, "MNNVL") || strings.Contains(stderr, "multi-node NVLink") {
		t.Errorf("gb200-nvl72-tray: %v\n%s\n%s", err, out, stderr)
	}
}
