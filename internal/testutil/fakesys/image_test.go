package fakesys

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/internal/demo"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// TestImagesMatchSpecs holds every embedded image to what its spec (or
// capture) builds now: the same directories, files, contents and links,
// and the same NVML answers, down to the nvml.json they print. It fails
// after a spec or the builder changes until go generate
// ./internal/testutil/fakesys writes the images again.
func TestImagesMatchSpecs(t *testing.T) {
	for _, name := range Machines() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, rf, err := buildMachineTree(name)
			if err != nil {
				t.Fatal(err)
			}
			want, err := encodeImage(r, rf)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := demo.Raw(name)
			if err != nil {
				t.Fatalf("no image: %v (run go generate ./internal/testutil/fakesys)", err)
			}
			m, irf, err := demo.Decode(name, raw)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(raw, want) {
				t.Errorf("internal/demo/images/%s.img.gz differs from what its spec builds: run go generate ./internal/testutil/fakesys", name)
			}
			// What the image decodes to is the tree the spec builds.
			gotTree, err := encodeImage(m.Root(), nil)
			if err != nil {
				t.Fatal(err)
			}
			wantTree, err := encodeImage(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotTree, wantTree) {
				t.Errorf("the image decodes to another tree than its spec builds")
			}
			if (rf == nil) != (irf == nil) {
				t.Fatalf("NVML answers: spec %v, image %v", rf != nil, irf != nil)
			}
			if rf != nil {
				if !reflect.DeepEqual(rf, irf) {
					t.Errorf("the image's NVML answers differ from the spec's")
				}
				a, _ := marshalReplay(name, *rf)
				b, _ := marshalReplay(name, *irf)
				if !bytes.Equal(a, b) {
					t.Errorf("the image's nvml.json differs from the spec's")
				}
				// What the replayers answer, through the same reader.
				// Errors (a replayed nvmlInit failure) compare by their text.
				sameErr := cmp.Comparer(func(a, b error) bool { return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error()) })
				if diff := cmp.Diff(nvml.Read(nvml.NewReplay(*rf)), nvml.Read(nvml.NewReplay(*irf)), sameErr); diff != "" {
					t.Errorf("the image's NVML answers differ from the spec's (-spec +image):\n%s", diff)
				}
			}
		})
	}
}

// TestMachinesHaveImages: --demo offers exactly the machines the specs
// and captures define, one image each (demo.Machines lists the images).
func TestMachinesHaveImages(t *testing.T) {
	specs, images := Machines(), demo.Machines()
	for _, name := range specs {
		if !slices.Contains(images, name) {
			t.Errorf("machine %s has no image: run go generate ./internal/testutil/fakesys", name)
		}
	}
	for _, name := range images {
		if !slices.Contains(specs, name) {
			t.Errorf("internal/demo/images/%s.img.gz has no spec or capture: run go generate ./internal/testutil/fakesys", name)
		}
	}
}

// TestWriteMatchesBuild: what demo.Write puts on disk (snapshot --demo,
// topo's on-disk path) is what BuildMachine writes from the spec: the
// same directories, files with their contents and modes, and links, the
// fault machines included. The image keeps no mode, so a builder that
// wrote a mode of its own (a file only root may read, a FIFO) fails here
// until the image format carries it.
func TestWriteMatchesBuild(t *testing.T) {
	// The capture, the fault machines of each vendor and a plain one:
	// every machine passed when this was written (TestImagesMatchSpecs
	// holds the rest to their trees), and writing all of them twice
	// costs minutes on a loaded machine.
	for _, name := range []string{H200VM, "dgx-h100-faults", "amd-mi300x-faults", "grace-hopper"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			built, written := t.TempDir(), t.TempDir()
			if err := BuildMachine(name, built); err != nil {
				t.Fatal(err)
			}
			if err := demo.Write(name, written); err != nil {
				t.Fatal(err)
			}
			want, got := diskTree(t, built), diskTree(t, written)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("demo.Write differs from BuildMachine (-built +written):\n%s", diff)
			}
		})
	}
}

// diskTree describes every entry under dir: its type and permissions,
// and a file's contents or a link's target.
func diskTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		desc := info.Mode().String()
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(data)
		}
		tree[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}
