package gres

import (
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/clip"
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
	// Foreign is set when the node is left alone because it carries
	// someone else's drain reason (or a drained State whose Reason could
	// not be read): it stays drained whatever the verdict, and the
	// caller tells the operator so. Callers decide on it, never on Why's
	// text.
	Foreign bool
}

// PlanNodeAction decides the drain or resume of Slurm node name from the
// health verdict (healthy, and summary, the first failure) and the
// output of `scontrol show node -o <name>` (ParseReason). An unhealthy
// node is drained (with drain) with reason "gpuaffinity: <summary>"; a
// healthy one is resumed (with resume) only when its drain reason is
// gpuaffinity's. A node that carries someone else's reason (an admin's
// drain, Slurm's "Prolog error" or "Not responding"), or whose State is
// drained while no Reason field could be read, is left alone both ways:
// draining it would replace that reason with ours, which a later healthy
// run would then resume.
func PlanNodeAction(name string, healthy bool, summary, show string, drain, resume bool) NodeAction {
	r, has := ParseReason(show)
	if !has && drained(show) {
		has, r = true, "(unreadable)"
	}
	// Our reasons never hold "Reason=": one that does is someone else's
	// text that quotes ours (see ParseReason).
	ours := has && strings.HasPrefix(r, ReasonPrefix) && !strings.Contains(r, "Reason=")
	switch {
	case !healthy && !drain, healthy && !resume:
		return NodeAction{Why: "leave: not asked"}
	case !healthy && has && !ours:
		return NodeAction{Why: "leave: unhealthy, but drained by someone else (Reason=" + r + ")", Foreign: true}
	case !healthy:
		reason := clip.Bytes(ReasonPrefix+" "+summary, maxReason)
		return NodeAction{Args: []string{"update", "nodename=" + name, "state=drain", "reason=" + reason}, Why: "drain: " + summary}
	case ours:
		return NodeAction{Args: []string{"update", "nodename=" + name, "state=resume"}, Why: "resume: healthy, drained by gpuaffinity (Reason=" + r + ")"}
	case has:
		return NodeAction{Why: "leave: healthy, but drained by someone else (Reason=" + r + ")", Foreign: true}
	}
	return NodeAction{Why: "leave: healthy and not drained"}
}

// nodeFields are the keys of `scontrol show node` in the order Slurm
// prints them (src/api/node_info.c slurm_sprint_node_table; the power
// and sensor keys of older releases sit where those printed them,
// before Reason). Reason, Comment and Extra are free text, and in the
// one-line form (-o) fields are joined by single spaces, so a field
// starts only at " Key=" for a key listed here that Slurm prints after
// the current field: text such as "Reason=x" inside a Comment (printed
// after Reason) or inside the Reason itself stays part of that value.
var nodeFields = []string{
	"NodeName", "Arch", "CpuBind", "CoresPerSocket",
	"CPUAlloc", "CPUEfctv", "CPUErr", "CPUTot", "CPULoad",
	"AvailableFeatures", "ActiveFeatures", "Features", "Gres", "GresDrain", "GresUsed",
	"NodeAddr", "NodeHostName", "BcastAddr", "Port", "Version", "OS",
	"RealMemory", "AllocMem", "FreeMem", "Sockets", "Boards",
	"CoreSpecCount", "CPUSpecList", "MemSpecLimit", "RestrictedCoresPerGPU",
	"State", "ThreadsPerCore", "TmpDisk", "Weight", "Owner", "MCS_label",
	"NextState", "Partitions", "BootTime", "SlurmdStartTime",
	"LastBusyTime", "ResumeAfterTime", "CfgTRES", "AllocTRES",
	"CapWatts", "CurrentWatts", "AveWatts", "LowestJoules", "ConsumedJoules",
	"ExtSensorsJoules", "ExtSensorsWatts", "ExtSensorsTemp",
	"Reason", "Comment", "Extra", "InstanceId", "InstanceType", "ReservationName",
}

var fieldRank = func() map[string]int {
	m := make(map[string]int, len(nodeFields))
	for i, k := range nodeFields {
		m[k] = i + 1
	}
	return m
}()

// nodeField returns the value of field key in `scontrol show node -o`
// output: its first line, one node's fields joined by single spaces.
func nodeField(show, key string) (string, bool) {
	line, _, _ := strings.Cut(strings.TrimLeft(show, " \t\r\n"), "\n")
	line = strings.TrimRight(line, " \t\r")
	want := fieldRank[key]
	cur, start := 0, -1 // rank of the field being read; start of key's value
	for i := 0; i < len(line); {
		// i starts a space-separated token; "Key=" there may start a field.
		if j := strings.IndexByte(line[i:], '='); j > 0 {
			if r := fieldRank[line[i:i+j]]; r > cur {
				if start >= 0 {
					return line[start : i-1], true
				}
				if r > want {
					return "", false
				}
				cur = r
				if r == want {
					start = i + j + 1
				}
			}
		}
		sp := strings.IndexByte(line[i:], ' ')
		if sp < 0 {
			break
		}
		i += sp + 1
	}
	if start >= 0 {
		return line[start:], true
	}
	return "", false
}

// ParseReason returns the Reason field of `scontrol show node -o <name>`
// output (see nodeFields for how fields are told apart), and whether the
// node has one.
func ParseReason(show string) (string, bool) {
	return nodeField(show, "Reason")
}

// drained reports whether the State field carries Slurm's DRAIN flag
// (IDLE+DRAIN, DOWN+DRAIN, DRAINED, DRAINING).
func drained(show string) bool {
	st, _ := nodeField(show, "State")
	return strings.Contains(st, "DRAIN")
}

// ShortName is the Slurm node name of a host name: its first label.
func ShortName(host string) string {
	name, _, _ := strings.Cut(host, ".")
	return name
}
