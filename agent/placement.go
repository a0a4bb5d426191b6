package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpuaffinity/gpuaffinity/placement"
	"github.com/gpuaffinity/gpuaffinity/platform"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// maxSwitches is how many site tiers the placement series has labels for
// (tier0 to tier2).
const maxSwitches = 3

func (o PlacementOptions) validate() error {
	switch o.Cloud {
	case "", PlacementOff, PlacementAuto, platform.GCP, platform.OCI:
	default:
		return fmt.Errorf("placement source %q: want %s, %s, %s or %s", o.Cloud, PlacementAuto, PlacementOff, platform.GCP, platform.OCI)
	}
	if len(o.Switches) > maxSwitches {
		return fmt.Errorf("placement switches %q: at most %d (tier 0 to tier %d)", o.Switches, maxSwitches, maxSwitches-1)
	}
	for i, s := range o.Switches {
		if s == "" || len(s) > placement.MaxValueLen || !printable(s) {
			return fmt.Errorf("placement switch %d %q: want a non-empty printable name of at most %d bytes", i, s, placement.MaxValueLen)
		}
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x21 || r == 0x7f {
			return false
		}
	}
	return true
}

// readPlacement is the node's placement for this round: the cloud's
// metadata service where Options.Placement asks for one (bounded by its
// timeout), with the site's switches over its tiers. A failed read keeps
// the placement the last round read from that cloud, and is logged when
// its error changes; nil where there is none.
func (a *Agent) readPlacement(ctx context.Context, n topology.Node) *placement.Placement {
	o := a.opts.Placement
	cloud := o.Cloud
	if cloud == PlacementAuto {
		cloud = string(n.Platform.Cloud)
	}
	var pl *placement.Placement
	switch cloud {
	case platform.GCP, platform.OCI:
		p, err := placement.Read(ctx, cloud, placement.Options{BaseURL: o.BaseURL, Timeout: o.Timeout})
		if err != nil {
			if last := a.placementLast; last != nil && last.Cloud == cloud {
				pl = last
			}
			if msg := err.Error(); msg != a.placementErr {
				a.placementErr = msg
				a.log.Warn("placement not read", "cloud", cloud, "err", err, "keeping_last", pl != nil)
			}
		} else {
			if a.placementErr != "" {
				a.log.Info("placement read again", "cloud", cloud, "source", p.Source)
			}
			a.placementErr = ""
			pl = &p
			a.placementLast = pl
		}
	}
	if len(o.Switches) == 0 {
		return pl
	}
	site := placement.Placement{Cloud: string(n.Platform.Cloud), Tiers: slices.Clone(o.Switches), Source: placement.SourceSite}
	if pl != nil {
		site.Host, site.NVLinkDomain = pl.Host, pl.NVLinkDomain
	}
	return &site
}
