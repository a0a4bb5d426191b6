package placement

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/platform"
)

// GCPPhysicalHostPath is the metadata path of a GCE VM's physical host.
const GCPPhysicalHostPath = "/computeMetadata/v1/instance/attributes/physical_host"

// readGCP reads GCPPhysicalHostPath with the Metadata-Flavor header the
// metadata server requires. The attribute is absent (404) on VMs outside
// compact placement or dense reservations.
func readGCP(ctx context.Context, opts Options) (Placement, error) {
	body, u, err := get(ctx, platform.GCP, opts, GCPPhysicalHostPath, http.Header{"Metadata-Flavor": {"Google"}})
	if err != nil {
		return Placement{}, err
	}
	block, sub, host, err := parsePhysicalHost(string(body))
	if err != nil {
		return Placement{}, fmt.Errorf("placement: gcp: GET %s: %w", u, err)
	}
	return Placement{
		Cloud:    platform.GCP,
		Tiers:    []string{sub, block},
		Block:    block,
		SubBlock: sub,
		Host:     host,
		Source:   u,
	}, nil
}

// parsePhysicalHost splits a physical_host value "/<block>/<subblock>/<host>"
// into its three segments, each checked by ValidValue. Nothing is trimmed:
// no whitespace, no trailing slash, no extra segments. Pure, no I/O.
func parsePhysicalHost(v string) (block, subBlock, host string, err error) {
	rest, ok := strings.CutPrefix(v, "/")
	if !ok {
		return "", "", "", fmt.Errorf("physical_host %q: want /<block>/<subblock>/<host>", clip(v))
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("physical_host %q: %d segments, want /<block>/<subblock>/<host>", clip(v), len(parts))
	}
	for i, name := range []string{"block", "subblock", "host"} {
		if why := ValidValue(parts[i]); why != "" {
			return "", "", "", fmt.Errorf("physical_host %q: %s: %s", clip(v), name, why)
		}
	}
	return parts[0], parts[1], parts[2], nil
}

// clip shortens a hostile value before it goes into an error message;
// %q escapes control characters.
func clip(s string) string {
	const n = 80
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
