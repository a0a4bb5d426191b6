package render

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// JSON writes n in the "gpuaffinity.topology/v1" contract
// (docs/topology-json.md): indented by two spaces, one trailing newline,
// every list written as [] rather than null (a nil pointer still writes
// null: that means "unknown"), and an empty Schema filled in with
// topology.Schema. n itself is not changed. JSON does no I/O but writing
// to w.
func JSON(w io.Writer, n topology.Node) error {
	if n.Schema == "" {
		n.Schema = topology.Schema
	}
	norm := normalize(reflect.ValueOf(n)).Interface()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(norm); err != nil {
		return fmt.Errorf("render json: %w", err)
	}
	return nil
}

// normalize returns a deep copy of v in which every nil slice or map, at
// any depth, is an empty one. Slices and pointers are copied, never written
// through, so the caller's Node is left as it was. Unexported fields (the
// members of a cpuset.Set) are copied as they are: their types marshal
// themselves.
func normalize(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Slice:
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(normalize(v.Index(i)))
		}
		return out
	case reflect.Map:
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), normalize(it.Value()))
		}
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(normalize(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(normalize(v.Field(i)))
			}
		}
		return out
	}
	return v
}
