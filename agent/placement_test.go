package agent

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/placement"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// readPlacement across rounds: a GCP VM reads its physical host from the
// metadata server; when the server fails, the last placement stays and
// the failure is logged once, not every round; it is logged again as
// recovered; the site's switches replace the tiers and keep the host;
// auto on bare metal and off read nothing.
func TestReadPlacement(t *testing.T) {
	var fail atomic.Bool
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != placement.GCPPhysicalHostPath || r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if fail.Load() {
			http.Error(w, "backend error", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "/blk1/sub2/host3")
	}))
	defer srv.Close()
	var logs bytes.Buffer
	a := &Agent{
		opts: Options{Placement: PlacementOptions{Cloud: PlacementAuto, BaseURL: srv.URL, Timeout: 2 * time.Second}},
		log:  slog.New(slog.NewTextHandler(&logs, nil)),
	}
	gcp := topology.Node{Platform: topology.Platform{Cloud: "gcp"}}
	ctx := context.Background()

	pl := a.readPlacement(ctx, gcp)
	if pl == nil || !slices.Equal(pl.Tiers, []string{"sub2", "blk1"}) || pl.Host != "host3" || pl.Cloud != "gcp" {
		t.Fatalf("first read: %+v, want tiers [sub2 blk1], host host3", pl)
	}
	fail.Store(true)
	for round := range 3 {
		got := a.readPlacement(ctx, gcp)
		if got == nil || !slices.Equal(got.Tiers, pl.Tiers) || got.Host != "host3" {
			t.Errorf("failed round %d: %+v, want the last placement kept", round, got)
		}
	}
	if n := strings.Count(logs.String(), "placement not read"); n != 1 {
		t.Errorf("%d \"placement not read\" logs over 3 failed rounds, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "500") || !strings.Contains(logs.String(), "keeping_last=true") {
		t.Errorf("the failure log names neither the status nor that the last placement is kept:\n%s", logs.String())
	}
	fail.Store(false)
	if got := a.readPlacement(ctx, gcp); got == nil || got.Host != "host3" {
		t.Errorf("recovered read: %+v", got)
	}
	if !strings.Contains(logs.String(), "placement read again") {
		t.Errorf("no recovery log:\n%s", logs.String())
	}

	a.opts.Placement.Switches = []string{"leaf-7", "spine-2"}
	got := a.readPlacement(ctx, gcp)
	if got == nil || !slices.Equal(got.Tiers, []string{"leaf-7", "spine-2"}) || got.Host != "host3" || got.Source != placement.SourceSite {
		t.Errorf("with site switches: %+v, want tiers [leaf-7 spine-2], host host3, source site", got)
	}

	before := hits.Load()
	a.opts.Placement = PlacementOptions{Cloud: PlacementAuto, BaseURL: srv.URL}
	if got := a.readPlacement(ctx, topology.Node{Platform: topology.Platform{Cloud: "baremetal"}}); got != nil {
		t.Errorf("auto on bare metal: %+v, want none", got)
	}
	a.opts.Placement.Cloud = PlacementOff
	if got := a.readPlacement(ctx, gcp); got != nil {
		t.Errorf("off: %+v, want none", got)
	}
	if hits.Load() != before {
		t.Errorf("auto on bare metal or off asked the metadata server %d times", hits.Load()-before)
	}
}

func TestPlacementOptionsValidate(t *testing.T) {
	for _, o := range []PlacementOptions{
		{Cloud: "aws"},
		{Cloud: "on"},
		{Switches: []string{"a", "b", "c", "d"}},
		{Switches: []string{""}},
		{Switches: []string{"leaf 1"}},
		{Switches: []string{strings.Repeat("s", placement.MaxValueLen+1)}},
	} {
		if err := o.validate(); err == nil {
			t.Errorf("%+v: validated, want an error", o)
		}
	}
	for _, o := range []PlacementOptions{{}, {Cloud: PlacementAuto}, {Cloud: "gcp"}, {Cloud: "oci", Switches: []string{"l", "s", "c"}}} {
		if err := o.validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// On GCP and Azure, whose DMI names only the hypervisor, the VM's type
// comes from the metadata service, once: it joins the placement (GCP) or
// makes one of its own (Azure, which has no placement); a failed read is
// logged once and retried; where DMI names the type nothing is asked.
func TestReadInstanceTypeOnce(t *testing.T) {
	var typeHits atomic.Int32
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.RequestURI() == placement.AzureVMSizePath && r.Header.Get("Metadata") == "true":
			typeHits.Add(1)
			if fail.Load() {
				http.Error(w, "busy", http.StatusTooManyRequests)
				return
			}
			io.WriteString(w, "Standard_ND96isr_H100_v5")
		case r.URL.Path == placement.GCPMachineTypePath:
			typeHits.Add(1)
			io.WriteString(w, "projects/42/machineTypes/a3-megagpu-8g")
		case r.URL.Path == placement.GCPPhysicalHostPath:
			io.WriteString(w, "/b/s/h")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	var logs bytes.Buffer
	a := &Agent{opts: Options{Placement: PlacementOptions{Cloud: PlacementAuto, BaseURL: srv.URL}}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx := context.Background()

	azure := topology.Node{Platform: topology.Platform{Cloud: "azure", ProductName: "Virtual Machine"}}
	fail.Store(true)
	for range 2 {
		if got := a.readPlacement(ctx, azure); got != nil {
			t.Errorf("azure, IMDS failing: %+v, want none", got)
		}
	}
	if n := strings.Count(logs.String(), "instance type not read"); n != 1 {
		t.Errorf("%d \"instance type not read\" logs over 2 failed rounds, want 1:\n%s", n, logs.String())
	}
	fail.Store(false)
	for range 2 {
		got := a.readPlacement(ctx, azure)
		if got == nil || got.InstanceType != "Standard_ND96isr_H100_v5" || len(got.Tiers) != 0 || got.Cloud != "azure" {
			t.Errorf("azure: %+v, want instance type Standard_ND96isr_H100_v5 and no tiers", got)
		}
	}
	if n := typeHits.Load(); n != 3 {
		t.Errorf("vmSize asked %d times, want 3 (two failures, then once)", n)
	}

	g := &Agent{opts: a.opts, log: a.log}
	gcp := topology.Node{Platform: topology.Platform{Cloud: "gcp", ProductName: "Google Compute Engine"}}
	got := g.readPlacement(ctx, gcp)
	if got == nil || got.InstanceType != "a3-megagpu-8g" || !slices.Equal(got.Tiers, []string{"s", "b"}) {
		t.Errorf("gcp: %+v, want machine type a3-megagpu-8g with tiers [s b]", got)
	}
	if g.placementLast.InstanceType != "" {
		t.Errorf("the kept placement was changed in place: %+v", g.placementLast)
	}

	before := typeHits.Load()
	aws := topology.Node{Platform: topology.Platform{Cloud: "aws", InstanceType: "p5.48xlarge"}}
	if got := (&Agent{opts: a.opts, log: a.log}).readPlacement(ctx, aws); got != nil {
		t.Errorf("aws: %+v, want none", got)
	}
	if typeHits.Load() != before {
		t.Error("asked a metadata service for the type of an instance DMI names")
	}
}
