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
