package discover

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/render"
	"github.com/gpuaffinity/gpuaffinity/snapshot"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func jsonOf(t *testing.T, n topology.Node) string {
	t.Helper()
	var b bytes.Buffer
	if err := render.JSON(&b, n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// archiveMachines are the machines whose snapshot also round-trips as a
// tar.gz and scrubbed: one per kind of tree the archive and the scrubber
// see (bare metal with switches and IB, a VM with EFA, the real capture).
// Every machine round-trips as a directory; the archive and scrub code
// does not depend on the machine, and each extra tree is thousands of
// files written (snapshot's own tests cover the archive format).
var archiveMachines = map[string]bool{"dgx-h100": true, "aws-p5": true, fakesys.H200VM: true}

// TestSnapshotRoundTrip: a snapshot of a root, read back with --root,
// gives the same topo JSON, as a directory and (archiveMachines) as a
// tar.gz; a scrubbed one gives the same pairs.
func TestSnapshotRoundTrip(t *testing.T) {
	for name := range archiveMachines {
		if !slices.Contains(fakesys.Machines(), name) {
			t.Errorf("archiveMachines: no machine %q", name)
		}
	}
	for _, name := range fakesys.Machines() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := sharedRoot(t, name)
			orig := discoverRoot(t, root)
			want := jsonOf(t, orig)

			dir := filepath.Join(t.TempDir(), "snap")
			if _, err := snapshot.WriteDir(snapshot.Options{Root: root}, dir); err != nil {
				t.Fatal(err)
			}
			if got := jsonOf(t, discoverRoot(t, dir)); got != want {
				t.Errorf("directory snapshot differs (-want +got):\n%s", cmp.Diff(want, got))
			}
			if !archiveMachines[name] {
				return
			}

			var tgz bytes.Buffer
			if _, err := snapshot.WriteTarGz(snapshot.Options{Root: root}, &tgz); err != nil {
				t.Fatal(err)
			}
			ext := t.TempDir()
			if err := snapshot.Extract(&tgz, ext); err != nil {
				t.Fatal(err)
			}
			if got := jsonOf(t, discoverRoot(t, ext)); got != want {
				t.Errorf("tar.gz snapshot differs (-want +got):\n%s", cmp.Diff(want, got))
			}

			scrubbed := filepath.Join(t.TempDir(), "scrub")
			if _, err := snapshot.WriteDir(snapshot.Options{Root: root, Scrub: true}, scrubbed); err != nil {
				t.Fatal(err)
			}
			scr := discoverRoot(t, scrubbed)
			if d := cmp.Diff(orig.Pairs, scr.Pairs); d != "" {
				t.Errorf("scrubbed snapshot pairs differ:\n%s", d)
			}
			if orig.Hostname != "" && scr.Hostname == orig.Hostname {
				t.Errorf("hostname %q not scrubbed", orig.Hostname)
			}
		})
	}
}
