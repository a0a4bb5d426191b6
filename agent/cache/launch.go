package cache

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/compact"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// launchMagic opens LaunchFile; the line goes on with the layout of
// topology.Node it was written with (launchLayout) and a newline.
const launchMagic = "gpuaffinity-launch-node "

// LegacyLaunchFile is the JSON launch view agents before LaunchFile
// wrote; the agent removes it, so an older launcher never reads a stale
// one.
const LegacyLaunchFile = "launch.json"

// ErrOtherBuild is wrapped when LaunchFile was written by a build whose
// topology.Node has another layout (an agent upgraded, or not yet, beside
// its launchers): Load then reads topology.json.
var ErrOtherBuild = errors.New("written by a build with another node layout")

// launchLayout is a digest of topology.Node's layout: every field's name
// and type, depth first. The compact form carries no field names, so a
// reader takes a file only from a build with the same layout. It is a
// constant, not worked out in each launcher (a reflection walk of the
// node's types, 0.17 ms of every env): TestLaunchLayout fails, with
// the new value, when the node changes and it does not.
const launchLayout = "6c53163039bc1bc4"

// layoutDigest works launchLayout out from the types.
func layoutDigest() string {
	var b strings.Builder
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		b.WriteString(t.String())
		b.WriteByte(';')
		if seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				b.WriteString(f.Name)
				b.WriteByte(':')
				walk(f.Type)
			}
		case reflect.Slice, reflect.Array, reflect.Pointer:
			walk(t.Elem())
		}
	}
	walk(reflect.TypeFor[topology.Node]())
	h := fnv.New64a()
	h.Write([]byte(b.String()))
	return strconv.FormatUint(h.Sum64(), 16)
}

// EncodeLaunch is the contents of LaunchFile for n: n.ForLaunch() in
// package compact's form, after a header line naming the layout. Decoding
// it in a fresh launcher process takes a fraction of the time decoding
// the same node from JSON takes (which first builds encoding/json's
// tables for every struct type of the node).
func EncodeLaunch(n topology.Node) ([]byte, error) {
	b := []byte(launchMagic + launchLayout + "\n")
	return compact.Append(b, n.ForLaunch())
}

// DecodeLaunch decodes EncodeLaunch's output (path names it in errors).
func DecodeLaunch(path string, data []byte) (topology.Node, error) {
	line, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return topology.Node{}, fmt.Errorf("decode %s: no header line", path)
	}
	if string(line) != launchMagic+launchLayout {
		return topology.Node{}, fmt.Errorf("%s: %w", path, ErrOtherBuild)
	}
	var n topology.Node
	if err := compact.Decode(rest, &n); err != nil {
		return topology.Node{}, fmt.Errorf("decode %s: %w", path, err)
	}
	if n.Schema != topology.Schema {
		return topology.Node{}, fmt.Errorf("%s: schema %q, want %q", path, n.Schema, topology.Schema)
	}
	return n, nil
}
