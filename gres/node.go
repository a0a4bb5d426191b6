package gres

import (
	"strings"
	"unicode/utf8"
)

// ReasonPrefix starts every drain reason gpuaffinity sets: only a node
// drained with it is resumed.
const ReasonPrefix = "gpuaffinity:"

// maxReason bounds the drain reason (Slurm keeps the whole string, but a
// reason is read in one sinfo -R column).
const maxReason = 200

// NodeAction is what `check --slurm-drain/--slurm-resume` tells Slurm:
// the scontrol arguments to run (none when Args is nil) and why.
type NodeAction struct {
	Args []string
	// Why says what was decided, for logs: "drain: ...", "leave: ...".
	Why string
}

// PlanNodeAction decides the drain or resume of Slurm node name from the
// health verdict (healthy, and summary, the first failure) and the
// output of `scontrol show node <name>`. An unhealthy node is drained
// (with drain) with reason "gpuaffinity: <summary>"; a healthy one is
// resumed (with resume) only when its drain reason is gpuaffinity's. A
// node that carries someone else's reason (an admin's drain, Slurm's
// "Prolog error" or "Not responding") is left alone both ways: draining
// it would replace that reason with ours, which a later healthy run would
// then resume.
func PlanNodeAction(name string, healthy bool, summary, show string, drain, resume bool) NodeAction {
	r, has := ParseReason(show)
	ours := has && strings.HasPrefix(r, ReasonPrefix)
	switch {
	case !healthy && !drain, healthy && !resume:
		return NodeAction{Why: "leave: not asked"}
	case !healthy && has && !ours:
		return NodeAction{Why: "leave: unhealthy, but drained by someone else (Reason=" + r + ")"}
	case !healthy:
		reason := truncate(ReasonPrefix+" "+summary, maxReason)
		return NodeAction{Args: []string{"update", "nodename=" + name, "state=drain", "reason=" + reason}, Why: "drain: " + summary}
	case ours:
		return NodeAction{Args: []string{"update", "nodename=" + name, "state=resume"}, Why: "resume: healthy, drained by gpuaffinity (Reason=" + r + ")"}
	case has:
		return NodeAction{Why: "leave: healthy, but drained by someone else (Reason=" + r + ")"}
	}
	return NodeAction{Why: "leave: healthy and not drained"}
}

// ParseReason finds Reason= in `scontrol show node` output; it runs to
// the end of its line.
func ParseReason(show string) (string, bool) {
	for line := range strings.SplitSeq(show, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "Reason="); ok {
			return v, true
		}
		if i := strings.Index(line, " Reason="); i >= 0 {
			return line[i+len(" Reason="):], true
		}
	}
	return "", false
}

// ShortName is the Slurm node name of a host name: its first label.
func ShortName(host string) string {
	name, _, _ := strings.Cut(host, ".")
	return name
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
