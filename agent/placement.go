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
	case "", PlacementOff, PlacementAuto, platform.GCP, platform.OCI, platform.Azure:
	default:
		return fmt.Errorf("placement source %q: want %s, %s, %s, %s or %s", o.Cloud, PlacementAuto, PlacementOff, platform.GCP, platform.OCI, platform.Azure)
	}
	if len(o.Switches) > maxSwitches {
		return fmt.Errorf("placement switches %q: at most %d (tier 0 to tier %d)", o.Switches, maxSwitches, maxSwitches-1)
	}
	for i, s := range o.Switches {
		if why := placement.ValidValue(s); why != "" {
			return fmt.Errorf("placement switch %d %q: %s (want 1 to %d printable ASCII characters, no spaces)", i, s, why, placement.MaxValueLen)
		}
	}
	return nil
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
	case platform.GCP, platform.OCI: // Azure has no placement, only an instance type
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
	if it := a.instanceType(ctx, n, cloud); it != "" {
		p := placement.Placement{Cloud: cloud}
		if pl != nil {
			p = *pl // a copy: pl may be placementLast
		}
		p.InstanceType = it
		pl = &p
	}
	if len(o.Switches) == 0 {
		return pl
	}
	site := placement.Placement{Cloud: string(n.Platform.Cloud), Tiers: slices.Clone(o.Switches), Source: placement.SourceSite}
	if pl != nil {
		site.Host, site.NVLinkDomain, site.InstanceType = pl.Host, pl.NVLinkDomain, pl.InstanceType
	}
	return &site
}

// instanceType is the VM's machine type or size from the metadata
// service, on the clouds whose DMI names only the hypervisor (GCP,
// Azure: placement.ReadInstanceType), so that the fleet compares a VM
// with VMs of its own type; "" where DMI names the type, elsewhere, or
// while the service does not answer (logged once per error). A VM keeps
// its type for life: once read, it is not asked again.
func (a *Agent) instanceType(ctx context.Context, n topology.Node, cloud string) string {
	if n.Platform.InstanceType != "" || (cloud != platform.GCP && cloud != platform.Azure) {
		return ""
	}
	if a.instanceTypeRead != "" {
		return a.instanceTypeRead
	}
	o := a.opts.Placement
	it, err := placement.ReadInstanceType(ctx, cloud, placement.Options{BaseURL: o.BaseURL, Timeout: o.Timeout})
	if err != nil {
		if msg := err.Error(); msg != a.instanceTypeErr {
			a.instanceTypeErr = msg
			a.log.Warn("instance type not read: the fleet groups this VM by DMI's product name", "cloud", cloud, "err", err)
		}
		return ""
	}
	a.instanceTypeErr, a.instanceTypeRead = "", it
	return it
}
