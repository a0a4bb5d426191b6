package health

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/clip"
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
	return clip.Bytes(msg, NPDMaxMessage)
}

// NFDFeatures is a Node Feature Discovery local feature file:
// gpuaffinity.io/healthy, /fabric (the compute NICs' fabric, "none"
// without one), /aligned (topo.aligned passed) and, on a node in a
// multi-node NVLink domain, /nvlink.clique (topology.NVLinkClique). A non-zero
// expires heads it with NFD's "# +expiry-time=" directive (RFC 3339,
// UTC): NFD drops the labels after it, so a writer that stops (a dead or
// removed agent) does not leave gpuaffinity.io/healthy=true behind.
// It is NFDOptions{}.Features.
func NFDFeatures(r Report, n topology.Node, expires time.Time) string {
	return NFDOptions{}.Features(r, n, expires)
}

// NFDOptions choose the labels of an NFD feature file beyond
// gpuaffinity.io's own.
type NFDOptions struct {
	// GFDClique also writes GPU Feature Discovery's own label,
	// nvidia.com/gpu.clique, with the value of gpuaffinity.io/nvlink.clique
	// (NVIDIA/k8s-device-plugin internal/lm/imex.go). Off by default: where
	// GFD runs (the GPU Operator deploys it) it owns the label, and two
	// feature sources writing one label fight over it.
	GFDClique bool
}

// Features is the NFD feature file NFDFeatures describes, with the labels
// o adds.
func (o NFDOptions) Features(r Report, n topology.Node, expires time.Time) string {
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
	var b strings.Builder
	if !expires.IsZero() {
		b.WriteString("# +expiry-time=" + expires.UTC().Format(time.RFC3339) + "\n")
	}
	fmt.Fprintf(&b, "# written by gpuaffinity check at %s\ngpuaffinity.io/healthy=%t\ngpuaffinity.io/fabric=%s\ngpuaffinity.io/aligned=%t\n",
		r.Time.Format("2006-01-02T15:04:05Z"), r.Healthy, fabric, aligned)
	if c := topology.NVLinkClique(n); c != "" {
		b.WriteString("gpuaffinity.io/nvlink.clique=" + c + "\n")
		if o.GFDClique {
			b.WriteString("nvidia.com/gpu.clique=" + c + "\n")
		}
	}
	return b.String()
}
