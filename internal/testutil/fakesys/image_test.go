package fakesys

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// TestImagesMatchSpecs holds every embedded image to what its spec (or
// capture) builds now: the same directories, files, contents and links,
// and the same NVML answers, down to the nvml.json they print. It fails
// after a spec or the builder changes until go generate ./internal/testutil/fakesys
// writes the images again.
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
			gz, err := imageFS.ReadFile("images/" + name + ".img.gz")
			if err != nil {
				t.Fatalf("no image: %v (run go generate ./internal/testutil/fakesys)", err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			m, irf, err := decodeImage(name, raw)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(raw, want) {
				t.Errorf("images/%s.img.gz differs from what its spec builds: run go generate ./internal/testutil/fakesys", name)
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

// A damaged image is an error, never a panic or a partial machine.
func TestDecodeImageMalformed(t *testing.T) {
	r, rf, err := buildMachineTree("grace-hopper")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := encodeImage(r, rf)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := decodeImage("x", raw); err != nil {
		t.Fatalf("the whole image: %v", err)
	}
	for _, n := range []int{0, len(imageMagic) - 1, len(imageMagic), len(imageMagic) + 1, len(raw) / 3, len(raw) / 2, len(raw) - 1} {
		if _, _, err := decodeImage("x", raw[:n]); !errors.Is(err, errImage) {
			t.Errorf("cut at byte %d: %v; want errImage", n, err)
		}
	}
	for _, i := range []int{len(imageMagic) + 2, len(imageMagic) + 5, len(raw) / 4} {
		bad := bytes.Clone(raw)
		bad[i] ^= 0xff
		if _, _, err := decodeImage("x", bad); err == nil {
			// Some flips land in a name or a content and still decode;
			// those must still be a well-formed tree.
			continue
		}
	}
	if _, _, err := decodeImage("x", append(bytes.Clone(raw), 0)); !errors.Is(err, errImage) {
		t.Errorf("trailing byte: %v; want errImage", err)
	}
}

// FuzzDecodeImage: any input decodes or fails with errImage, without a
// panic.
func FuzzDecodeImage(f *testing.F) {
	r, rf, err := buildMachineTree("smt-off-2s")
	if err != nil {
		f.Fatal(err)
	}
	raw, err := encodeImage(r, rf)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte(imageMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, _, err := decodeImage("x", data); err != nil && !errors.Is(err, errImage) {
			t.Fatalf("error %v does not wrap errImage", err)
		}
	})
}
