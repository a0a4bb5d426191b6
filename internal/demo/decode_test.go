package demo

import (
	"bytes"
	"errors"
	"testing"
)

// A damaged image is an error, never a panic or a partial machine.
func TestDecodeMalformed(t *testing.T) {
	raw, err := Raw("grace-hopper")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Decode("x", raw); err != nil {
		t.Fatalf("the whole image: %v", err)
	}
	for _, n := range []int{0, len(Magic) - 1, len(Magic), len(Magic) + 1, len(raw) / 3, len(raw) / 2, len(raw) - 1} {
		if _, _, err := Decode("x", raw[:n]); !errors.Is(err, ErrImage) {
			t.Errorf("cut at byte %d: %v; want ErrImage", n, err)
		}
	}
	for _, i := range []int{len(Magic) + 2, len(Magic) + 5, len(raw) / 4} {
		bad := bytes.Clone(raw)
		bad[i] ^= 0xff
		if _, _, err := Decode("x", bad); err != nil && !errors.Is(err, ErrImage) {
			// Some flips land in a name or a content and still decode;
			// those must still be a well-formed tree.
			t.Errorf("flip at byte %d: %v does not wrap ErrImage", i, err)
		}
	}
	if _, _, err := Decode("x", append(bytes.Clone(raw), 0)); !errors.Is(err, ErrImage) {
		t.Errorf("trailing byte: %v; want ErrImage", err)
	}
}

// FuzzDecode: any input decodes or fails with ErrImage, without a panic.
func FuzzDecode(f *testing.F) {
	raw, err := Raw("smt-off-2s")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, _, err := Decode("x", data); err != nil && !errors.Is(err, ErrImage) {
			t.Fatalf("error %v does not wrap ErrImage", err)
		}
	})
}
