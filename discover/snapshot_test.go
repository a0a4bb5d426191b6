package discover

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/internal/fakesys"
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

// TestSnapshotRoundTrip: a snapshot of a root, read back with --root,
// gives the same topo JSON, as a directory and as a tar.gz; a scrubbed
// one gives the same pairs.
func TestSnapshotRoundTrip(t *testing.T) {
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
