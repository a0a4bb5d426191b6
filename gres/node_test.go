package gres

import (
	"slices"
	"strings"
	"testing"
)

func TestPlanNodeAction(t *testing.T) {
	// `scontrol show node -o` lines (Slurm's order: State … Reason,
	// Comment, Extra).
	const (
		ours   = "NodeName=gpu-01 Arch=x86_64 CoresPerSocket=56 OS=Linux 6.8.0-45-generic #45-Ubuntu SMP State=IDLE+DRAIN ThreadsPerCore=2 CurrentWatts=0 AveWatts=0 Reason=gpuaffinity: nic.port_state: mlx5_0 down [root@2026-12-01T00:00:00] Comment=see ticket 42\n"
		admin  = "NodeName=gpu-01 State=IDLE+DRAIN ThreadsPerCore=2 Reason=replace DIMM [admin@2026-12-01T00:00:00]\n"
		prolog = "NodeName=gpu-01 Arch=x86_64 Reason=Prolog error [slurm@2026-12-01T00:00:00]\n"
		clean  = "NodeName=gpu-01 State=IDLE ThreadsPerCore=2 CurrentWatts=0 AveWatts=0\n"
		// An admin's drain whose Comment or Reason quotes an old
		// gpuaffinity reason: still the admin's.
		quotedInComment = "NodeName=gpu-01 State=IDLE+DRAIN Reason=admin: replacing DIMM [admin@2026-12-01T00:00:00] Comment=ticket 42 Reason=gpuaffinity: old\n"
		commentFirst    = "NodeName=gpu-01 State=IDLE+DRAIN Comment=ticket 42 Reason=gpuaffinity: old Reason=admin: replacing DIMM [admin@2026-12-01T00:00:00]\n"
		quotedInReason  = "NodeName=gpu-01 State=IDLE+DRAIN Reason=admin: DIMM, was Reason=gpuaffinity: old [admin@2026-12-01T00:00:00]\n"
		quotedInOS      = "NodeName=gpu-01 OS=Linux Reason=gpuaffinity: x State=DRAINED Reason=admin: DIMM [admin@2026-12-01T00:00:00]\n"
		drainedNoReason = "NodeName=gpu-01 State=IDLE+DRAIN ThreadsPerCore=2\n"
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
		{"healthy, admin's Comment quotes our reason", true, quotedInComment, true, true, nil, "someone else"},
		{"unhealthy, admin's Comment quotes our reason", false, quotedInComment, true, true, nil, "someone else"},
		{"healthy, Comment ahead of Reason", true, commentFirst, true, true, nil, "someone else"},
		{"unhealthy, Comment ahead of Reason", false, commentFirst, true, true, nil, "someone else"},
		{"healthy, admin's Reason quotes ours", true, quotedInReason, true, true, nil, "someone else"},
		{"healthy, Reason= in an earlier field", true, quotedInOS, true, true, nil, "someone else"},
		{"healthy, drained with no readable Reason", true, drainedNoReason, true, true, nil, "someone else"},
	} {
		act := PlanNodeAction("gpu-01", tc.healthy, "gpu.visible: NVML Init failed", tc.show, tc.drain, tc.resume)
		if !slices.Equal(act.Args, tc.want) || !strings.Contains(act.Why, tc.why) {
			t.Errorf("%s: %q (%s), want %q (%s)", tc.name, act.Args, act.Why, tc.want, tc.why)
		}
		if act.Foreign != (tc.why == "someone else") {
			t.Errorf("%s: Foreign = %v (%s)", tc.name, act.Foreign, act.Why)
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

func TestParseReason(t *testing.T) {
	for _, tc := range []struct {
		show, want string
		has        bool
	}{
		{"NodeName=n State=IDLE+DRAIN Reason=gpuaffinity: a b [root@t] Comment=c d Extra=e\n", "gpuaffinity: a b [root@t]", true},
		{"NodeName=n Reason=first line         second line [root@t]", "first line         second line [root@t]", true},
		{"NodeName=n State=IDLE Comment=ticket 42 Reason=gpuaffinity: old\n", "", false},
		{"NodeName=n Reason=x Reason=y Extra=z", "x Reason=y", true},
		{"NodeName=n Reason=", "", true},
		{"NodeName=n State=IDLE\nNodeName=m Reason=gpuaffinity: other node\n", "", false},
		{"NodeName=n Gres=gpu:8 Reason=x=y Comment=", "x=y", true},
		{"", "", false},
	} {
		if got, has := ParseReason(tc.show); got != tc.want || has != tc.has {
			t.Errorf("ParseReason(%q) = %q, %v; want %q, %v", tc.show, got, has, tc.want, tc.has)
		}
	}
}

// FuzzParseReason: ParseReason never panics, and what it returns is a
// substring of its input's first non-blank line that holds no later
// field.
func FuzzParseReason(f *testing.F) {
	for _, s := range []string{
		"NodeName=n State=IDLE+DRAIN Reason=gpuaffinity: a [root@t] Comment=c Reason=d",
		"NodeName=n Comment=ticket 42 Reason=gpuaffinity: old Reason=admin",
		"Reason=", " Reason=x\nReason=y", "=Reason= Reason==", "\nReason=0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, show string) {
		r, has := ParseReason(show)
		if !has && r != "" {
			t.Fatalf("no reason, but %q", r)
		}
		line, _, _ := strings.Cut(strings.TrimLeft(show, " \t\r\n"), "\n")
		if !strings.Contains(line, r) {
			t.Fatalf("%q not in %q", r, line)
		}
		for _, k := range []string{" Comment=", " Extra=", " InstanceId=", " InstanceType=", " ReservationName="} {
			if has && strings.Contains(r, k) && !strings.Contains(line[:strings.Index(line, r)], k) {
				// a later field inside Reason only when one came first
				t.Fatalf("%q holds %s", r, k)
			}
		}
		PlanNodeAction("n", true, "s", show, true, true)
		PlanNodeAction("n", false, "s", show, true, true)
	})
}
