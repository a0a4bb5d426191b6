package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gpuaffinity/gpuaffinity/platform"
)

// OCIRDMATopologyPath is the IMDS v2 path of a host's RDMA topology.
const OCIRDMATopologyPath = "/opc/v2/host/rdmaTopologyData"

// ociRDMATopology is the body of OCIRDMATopologyPath. Unknown fields are
// ignored; a field of the wrong JSON type is an error.
type ociRDMATopology struct {
	HPCIsland       string `json:"customerHPCIslandId"`
	NetworkBlock    string `json:"customerNetworkBlock"`
	LocalBlock      string `json:"customerLocalBlock"`
	HostID          string `json:"customerHostId"`
	GPUMemoryFabric string `json:"customerGpuMemoryFabric"`
}

// readOCI reads OCIRDMATopologyPath with IMDS v2's required
// Authorization header.
func readOCI(ctx context.Context, opts Options) (Placement, error) {
	body, u, err := get(ctx, platform.OCI, opts, OCIRDMATopologyPath, http.Header{"Authorization": {"Bearer Oracle"}})
	if err != nil {
		return Placement{}, err
	}
	p, err := parseRDMATopology(body)
	if err != nil {
		return Placement{}, fmt.Errorf("placement: oci: GET %s: %w", u, err)
	}
	p.Source = u
	return p, nil
}

// parseRDMATopology maps an rdmaTopologyData object onto a Placement:
// Local Block tier 0, Network Block tier 1, HPC Island tier 2 (all three
// required), customerHostId and customerGpuMemoryFabric optional. An
// object with none of the fields is ErrNotAvailable. Pure, no I/O.
func parseRDMATopology(body []byte) (Placement, error) {
	var t ociRDMATopology
	if err := json.Unmarshal(body, &t); err != nil {
		return Placement{}, fmt.Errorf("rdmaTopologyData: %w", err)
	}
	if t == (ociRDMATopology{}) {
		return Placement{}, fmt.Errorf("rdmaTopologyData: no fields: %w", ErrNotAvailable)
	}
	fields := []struct {
		name     string
		v        string
		optional bool
	}{
		{"customerLocalBlock", t.LocalBlock, false},
		{"customerNetworkBlock", t.NetworkBlock, false},
		{"customerHPCIslandId", t.HPCIsland, false},
		{"customerHostId", t.HostID, true},
		{"customerGpuMemoryFabric", t.GPUMemoryFabric, true},
	}
	for _, f := range fields {
		if f.optional && f.v == "" {
			continue
		}
		if why := ValidValue(f.v); why != "" {
			return Placement{}, fmt.Errorf("rdmaTopologyData: %s %q: %s", f.name, clip(f.v), why)
		}
	}
	return Placement{
		Cloud:        platform.OCI,
		Tiers:        []string{t.LocalBlock, t.NetworkBlock, t.HPCIsland},
		Host:         t.HostID,
		LocalBlock:   t.LocalBlock,
		NetworkBlock: t.NetworkBlock,
		HPCIsland:    t.HPCIsland,
		NVLinkDomain: t.GPUMemoryFabric,
	}, nil
}
