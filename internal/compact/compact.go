// Package compact encodes plain Go values (structs of numbers, strings,
// slices, arrays and pointers; a type with MarshalText and UnmarshalText
// as its text) in a compact binary form, for files one build of
// gpuaffinity writes and reads itself: the prebuilt example machines and
// the agent's launch cache. Each exported field goes in order, depth
// first; integers as varints, floats as their bits, a string or slice as
// its length (plus one for a slice: 0 is nil, apart from an empty one),
// then its elements; a pointer as 0 (nil) or 1 and its value.
//
// It is what encoding/gob would do here, without gob's cost at start-up
// (a quarter of a millisecond in every process that links it) and with
// nil kept apart from empty; and it decodes a value with dozens of
// struct types in a fraction of encoding/json's time in a fresh process
// (which builds its per-type tables at first use). The form carries no
// field names: a reader must be the same build as the writer, so every
// file holds a header that says which (see Header).
package compact

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed compact encoding")

var (
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// isText reports whether t goes as its text.
func isText(t reflect.Type) bool {
	return t.Implements(textMarshaler) && reflect.PointerTo(t).Implements(textUnmarshaler)
}

// Append appends the encoding of v to b.
func Append(b []byte, v any) ([]byte, error) { return appendValue(b, reflect.ValueOf(v)) }

// Decode decodes data, all of it, into the value v points to.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("compact: Decode into %T, not a non-nil pointer", v)
	}
	d := valueDecoder{data}
	if err := d.value(rv.Elem()); err != nil {
		return err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes past the end", ErrMalformed, len(d.b))
	}
	return nil
}

// appendValue appends v's encoding to b.
func appendValue(b []byte, v reflect.Value) ([]byte, error) {
	if isText(v.Type()) {
		t, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.Type(), err)
		}
		b = binary.AppendUvarint(b, uint64(len(t)))
		return append(b, t...), nil
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(b, v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return binary.AppendUvarint(b, v.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return binary.AppendUvarint(b, math.Float64bits(v.Float())), nil
	case reflect.String:
		b = binary.AppendUvarint(b, uint64(v.Len()))
		return append(b, v.String()...), nil
	case reflect.Slice:
		if v.IsNil() {
			return append(b, 0), nil
		}
		b = binary.AppendUvarint(b, uint64(v.Len())+1)
		fallthrough
	case reflect.Array:
		var err error
		for i := range v.Len() {
			if b, err = appendValue(b, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return b, nil
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, 0), nil
		}
		return appendValue(append(b, 1), v.Elem())
	case reflect.Struct:
		t := v.Type()
		var err error
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				return nil, fmt.Errorf("compact: %s.%s: unexported field", t, t.Field(i).Name)
			}
			if b, err = appendValue(b, v.Field(i)); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("compact: %s: kind %s has no encoding", v.Type(), v.Kind())
}

// valueDecoder reads appendValue's encoding.
type valueDecoder struct{ b []byte }

func (d *valueDecoder) uvarint() (uint64, error) {
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, fmt.Errorf("%w: bad number", ErrMalformed)
	}
	d.b = d.b[n:]
	return x, nil
}

// count reads a length, refusing one longer than what is left to read
// (every element takes at least a byte).
func (d *valueDecoder) count() (int, error) {
	n, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(len(d.b)) {
		return 0, fmt.Errorf("%w: length %d past the end", ErrMalformed, n)
	}
	return int(n), nil
}

func (d *valueDecoder) value(v reflect.Value) error {
	if isText(v.Type()) {
		n, err := d.count()
		if err != nil {
			return err
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText(d.b[:n]); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrMalformed, v.Type(), err)
		}
		d.b = d.b[n:]
		return nil
	}
	switch v.Kind() {
	case reflect.Bool:
		x, err := d.uvarint()
		v.SetBool(x != 0)
		return err
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, n := binary.Varint(d.b)
		if n <= 0 || v.OverflowInt(x) {
			return fmt.Errorf("%w: bad %s", ErrMalformed, v.Type())
		}
		d.b = d.b[n:]
		v.SetInt(x)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		x, err := d.uvarint()
		if err == nil && v.OverflowUint(x) {
			err = fmt.Errorf("%w: bad %s", ErrMalformed, v.Type())
		}
		v.SetUint(x)
		return err
	case reflect.Float32, reflect.Float64:
		x, err := d.uvarint()
		v.SetFloat(math.Float64frombits(x))
		return err
	case reflect.String:
		n, err := d.count()
		if err != nil {
			return err
		}
		v.SetString(string(d.b[:n]))
		d.b = d.b[n:]
		return nil
	case reflect.Slice:
		// The count is the length + 1 (0 is nil): n-1 elements of at
		// least one byte each must fit.
		x, err := d.uvarint()
		if err != nil || x == 0 {
			return err // 0: nil
		}
		if x-1 > uint64(len(d.b)) {
			return fmt.Errorf("%w: length %d past the end", ErrMalformed, x-1)
		}
		n := int(x)
		v.Set(reflect.MakeSlice(v.Type(), n-1, n-1))
		fallthrough
	case reflect.Array:
		for i := range v.Len() {
			if err := d.value(v.Index(i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Pointer:
		x, err := d.uvarint()
		if err != nil || x == 0 {
			return err
		}
		v.Set(reflect.New(v.Type().Elem()))
		return d.value(v.Elem())
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if !t.Field(i).IsExported() {
				return fmt.Errorf("compact: %s.%s: unexported field", t, t.Field(i).Name)
			}
			if err := d.value(v.Field(i)); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("compact: %s: kind %s has no encoding", v.Type(), v.Kind())
}
