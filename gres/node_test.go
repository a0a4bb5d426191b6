package gres

import (
	"slices"
	"strings"
	"testing"
)

func TestPlanNodeAction(t *testing.T) {
	const (
		ours   = "NodeName=gpu-01 State=IDLE+DRAIN\n   Reason=gpuaffinity: nic.port_state: mlx5_0 down [root@2026-12-01]\n"
		admin  = "NodeName=gpu-01 State=IDLE+DRAIN\n   Reason=replace DIMM [admin@2026-12-01]\n"
		prolog = "NodeName=gpu-01 Arch=x86_64 Reason=Prolog error [slurm@2026-12-01]\n"
		clean  = "NodeName=gpu-01 State=IDLE\n"
	)
	for _, tc := range []struct {
		name          string
		healthy       bool
		show          string
		drain, resume bool
		want          []string // nil: nothing run
		why           string
	}{
		{"unhealthy drains", false, clean, true, true, []string{"update", "nodename=gpu-01", "state=drain", "reason=gpuaffinity: gpu.visible: NVML Init failed"}, "drain"},
		{"unhealthy, ours: drained again with the new reason", false, ours, true, false, []string{"update", "nodename=gpu-01", "state=drain", "reason=gpuaffinity: gpu.visible: NVML Init failed"}, "drain"},
		{"unhealthy, admin's drain kept", false, admin, true, true, nil, "someone else"},
		{"unhealthy, Slurm's reason kept", false, prolog, true, true, nil, "someone else"},
		{"unhealthy without --slurm-drain", false, clean, false, true, nil, "not asked"},
		{"healthy resumes ours", true, ours, false, true, []string{"update", "nodename=gpu-01", "state=resume"}, "resume"},
		{"healthy leaves admin's drain", true, admin, true, true, nil, "someone else"},
		{"healthy, not drained", true, clean, true, true, nil, "not drained"},
		{"healthy without --slurm-resume", true, ours, true, false, nil, "not asked"},
	} {
		act := PlanNodeAction("gpu-01", tc.healthy, "gpu.visible: NVML Init failed", tc.show, tc.drain, tc.resume)
		if !slices.Equal(act.Args, tc.want) || !strings.Contains(act.Why, tc.why) {
			t.Errorf("%s: %q (%s), want %q (%s)", tc.name, act.Args, act.Why, tc.want, tc.why)
		}
	}
	long := strings.Repeat("é", 300)
	act := PlanNodeAction("n", false, long, clean, true, false)
	if r := act.Args[3]; len(r) > len("reason=")+maxReason || !strings.HasPrefix(r, "reason=gpuaffinity: é") || strings.ContainsRune(r, '\uFFFD') {
		t.Errorf("long reason %d bytes: %q", len(r), r[:20])
	}
	if got := ShortName("gpu-01.cluster.example"); got != "gpu-01" {
		t.Errorf("ShortName = %q", got)
	}
}
