package compact

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// word is a type that goes as its text.
type word struct{ s string }

func (w word) MarshalText() ([]byte, error) { return []byte(strings.ToUpper(w.s)), nil }
func (w *word) UnmarshalText(b []byte) error {
	if strings.ContainsRune(string(b), ' ') {
		return errors.New("a space")
	}
	w.s = strings.ToLower(string(b))
	return nil
}

type inner struct {
	N    int8
	Tags []string
}

type sample struct {
	B      bool
	I      int
	I64    int64
	U16    uint16
	U64    uint64
	F      float64
	S      string
	Bytes  []byte
	Nil    []int
	Empty  []int
	Arr    [3]uint32
	P      *inner
	NilP   *inner
	In     []inner
	PP     **int
	W      word
	Ws     []word
	Nested [][]string
}

func full() sample {
	seven := 7
	p := &seven
	return sample{
		B: true, I: -1 << 40, I64: math.MinInt64, U16: 65535, U64: math.MaxUint64,
		F: -2.5e-300, S: "tab\tnul\x00é", Bytes: []byte{0, 255}, Empty: []int{},
		Arr: [3]uint32{1, 0, math.MaxUint32}, P: &inner{N: -128, Tags: []string{"", "x"}},
		In: []inner{{}, {N: 1, Tags: []string{}}}, PP: &p, W: word{"gpu"},
		Ws: []word{{"a"}, {""}}, Nested: [][]string{nil, {}, {"z"}},
	}
}

// Every value comes back as it went, nil slices and pointers apart from
// empty ones.
func TestRoundTrip(t *testing.T) {
	for _, v := range []sample{{}, full()} {
		b, err := Append(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		var got sample
		if err := Decode(b, &got); err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, v)
		}
	}
}

func TestUnencodable(t *testing.T) {
	type withMap struct{ M map[string]int }
	type withUnexported struct {
		A int
		b int
	}
	type withIface struct{ X any }
	for _, v := range []any{withMap{}, withUnexported{}, withIface{}} {
		if _, err := Append(nil, v); err == nil {
			t.Errorf("Append(%T) succeeded", v)
		}
	}
	var u withUnexported
	if err := Decode([]byte{2, 0}, &u); err == nil {
		t.Error("Decode into a struct with an unexported field succeeded")
	}
	if err := Decode(nil, u); err == nil {
		t.Error("Decode into a non-pointer succeeded")
	}
}

// A cut, a trailing byte or a bad text is ErrMalformed.
func TestMalformed(t *testing.T) {
	b, err := Append(nil, full())
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) {
		var s sample
		if err := Decode(b[:n], &s); !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut at %d of %d: %v; want ErrMalformed", n, len(b), err)
		}
	}
	var s sample
	if err := Decode(append(b, 0), &s); !errors.Is(err, ErrMalformed) {
		t.Errorf("a trailing byte: %v", err)
	}
	var w struct{ W word }
	if err := Decode([]byte{3, 'a', ' ', 'b'}, &w); !errors.Is(err, ErrMalformed) {
		t.Errorf("a bad text: %v", err)
	}
	var small struct{ N int8 }
	if err := Decode([]byte{0x80, 0x02}, &small); !errors.Is(err, ErrMalformed) { // 128
		t.Errorf("an int8 of 128: %v", err)
	}
}

// FuzzDecode: any input decodes or fails with ErrMalformed, without a
// panic, and what decodes encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	b, _ := Append(nil, full())
	f.Add(b)
	z, _ := Append(nil, sample{})
	f.Add(z)
	f.Fuzz(func(t *testing.T, data []byte) {
		var s sample
		err := Decode(data, &s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		again, err := Append(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		// Compared as bytes, not with reflect.DeepEqual: a float's NaN
		// (any bits the input gives) is not equal to itself.
		var s2 sample
		if err := Decode(again, &s2); err != nil {
			t.Fatalf("the re-encoding does not decode: %v", err)
		}
		third, err := Append(nil, s2)
		if err != nil || !bytes.Equal(again, third) {
			t.Fatalf("decode and encode is not a fixed point: %v\n%x\n%x", err, again, third)
		}
		if !math.IsNaN(s.F) && !reflect.DeepEqual(s, s2) {
			t.Fatalf("re-encoding differs:\n%+v\n%+v", s, s2)
		}
	})
}
