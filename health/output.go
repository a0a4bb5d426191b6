package health

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// WriteText prints one line per check and a summary line.
func WriteText(w io.Writer, r Report) error {
	var b strings.Builder
	for _, x := range r.Results {
		fmt.Fprintf(&b, "%-4s  %-19s %s\n", strings.ToUpper(string(x.Verdict)), x.ID, x.Reason)
		if x.Verdict == Fail || x.Verdict == Warn {
			for _, d := range x.Details[min(1, len(x.Details)):] {
				fmt.Fprintf(&b, "      %-19s %s\n", "", d)
			}
			if x.Hint != "" {
				fmt.Fprintf(&b, "      %-19s hint: %s\n", "", x.Hint)
			}
		}
	}
	if r.Healthy {
		fmt.Fprintf(&b, "healthy (profile %s)\n", r.Profile)
	} else {
		fmt.Fprintf(&b, "unhealthy (profile %s): %d failed\n", r.Profile, len(r.Failed()))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the report as indented JSON (schema gpuaffinity.health/v1).
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// NHCLine is the LBNL NHC failure line for the first failure, "" when
// healthy: byte for byte what NHC's die() prints ("ERROR:  $NAME:  Health
// check failed:  $*", two spaces after each colon, NAME nhc), the message
// in its checks' form ("check_name:  reason"), so the regexes sites keep
// for NHC's lines match it.
func NHCLine(r Report) string {
	if s := r.Summary(); s != "" {
		return "ERROR:  nhc:  Health check failed:  " + NHCCheckName + ":  " + s
	}
	return ""
}

// NHCCheckName names gpuaffinity's checks in NHC's lines.
const NHCCheckName = "check_gpuaffinity"

// NPDMaxMessage is node-problem-detector's default max_output_length.
const NPDMaxMessage = 80

// NPDMessage is the node-problem-detector plugin message, at most 80 bytes.
func NPDMessage(r Report) string {
	msg := "gpuaffinity: healthy"
	if s := r.Summary(); s != "" {
		msg = s
	}
	return Truncate(msg, NPDMaxMessage)
}

// Truncate cuts s to at most n bytes on a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// NFDFeatures is a Node Feature Discovery local feature file:
// gpuaffinity.io/healthy, /fabric (the compute NICs' fabric, "none"
// without one) and /aligned (topo.aligned passed). A non-zero expires
// heads it with NFD's "# +expiry-time=" directive (RFC 3339, UTC): NFD
// drops the labels after it, so a writer that stops (a dead or removed
// agent) does not leave gpuaffinity.io/healthy=true behind.
func NFDFeatures(r Report, n topology.Node, expires time.Time) string {
	fabric := "none"
	for _, c := range n.NICs {
		if c.Role == topology.RoleCompute {
			fabric = string(c.Fabric)
			break
		}
	}
	aligned := false
	for _, x := range r.Results {
		if x.ID == "topo.aligned" {
			aligned = x.Verdict == Pass
		}
	}
	var head string
	if !expires.IsZero() {
		head = "# +expiry-time=" + expires.UTC().Format(time.RFC3339) + "\n"
	}
	return fmt.Sprintf("%s# written by gpuaffinity check at %s\ngpuaffinity.io/healthy=%t\ngpuaffinity.io/fabric=%s\ngpuaffinity.io/aligned=%t\n",
		head, r.Time.Format("2006-01-02T15:04:05Z"), r.Healthy, fabric, aligned)
}
