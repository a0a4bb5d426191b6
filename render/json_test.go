package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// cmpNode compares Nodes: cpuset.Set by members (its fields are
// unexported), and a nil list equal to an empty one (JSON writes both as
// []).
var cmpNode = []cmp.Option{
	cmp.Comparer(func(a, b cpuset.Set) bool { return a.Equal(b) }),
	cmpopts.EquateEmpty(),
}

// TestJSONRoundTrip reads every fixture's JSON back into a Node.
func TestJSONRoundTrip(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			want := fx.node()
			var buf bytes.Buffer
			if err := JSON(&buf, want); err != nil {
				t.Fatal(err)
			}
			var got topology.Node
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			// JSON strings are UTF-8: encoding/json writes each invalid
			// byte as U+FFFD.
			for i, w := range want.Warnings {
				want.Warnings[i] = validUTF8(w)
			}
			if diff := cmp.Diff(want, got, cmpNode...); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func validUTF8(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			b.WriteRune(utf8.RuneError)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// nullable lists the keys whose null means "unknown" in the contract;
// every other value, lists above all, must not be null.
var nullable = map[string]bool{"numa_node": true, "node": true, "gpu_numa_id": true, "nvml_index": true, "minor": true, "socket": true,
	// gpus[].health: nil where NVML is absent or answers NOT_SUPPORTED.
	"persistence": true, "ecc_uncorrected_volatile": true, "ecc_uncorrected_aggregate": true,
	"remapped_rows_correctable": true, "remapped_rows_uncorrectable": true, "remap_pending": true,
	"remap_failure": true, "retired_pages": true, "retired_pages_pending": true, "fabric_state": true,
	"fabric_status": true, "recovery_action": true, "pcie_replay": true,
	// storage.gds: nil where the parameter or driver file is absent.
	"nvme_multipath": true, "open_kernel_module": true,
	// gpus[].fabric and .platform: nil outside an NVLink fabric or where
	// NVML does not say; fabric.status before completion, the v4 health
	// fields from a v1-only driver; nvlink_fabric.imex: no driver major,
	// no IMEX config, an unreadable node list or no SERVER_PORT.
	"fabric": true, "platform": true, "status": true, "health_mask": true, "health_summary": true,
	"device_major": true, "config": true, "nodes": true, "server_port": true}

// TestJSONNoNullLists walks the JSON of every fixture (the empty one has
// nil everywhere) and fails on a null anywhere but a nullable key.
func TestJSONNoNullLists(t *testing.T) {
	for _, fx := range fixtures {
		var buf bytes.Buffer
		if err := JSON(&buf, fx.node()); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasSuffix(buf.Bytes(), []byte("}\n")) || bytes.HasSuffix(buf.Bytes(), []byte("\n\n")) {
			t.Errorf("%s: output does not end in exactly one newline", fx.name)
		}
		if !bytes.HasPrefix(buf.Bytes(), []byte("{\n  \"schema\": ")) {
			t.Errorf("%s: not indented by two spaces, or schema not first", fx.name)
		}
		var v any
		if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		walkNulls(t, fx.name, "", v)
	}
}

func walkNulls(t *testing.T, fixture, key string, v any) {
	switch x := v.(type) {
	case nil:
		if !nullable[key] {
			t.Errorf("%s: %q is null", fixture, key)
		}
	case map[string]any:
		for k, e := range x {
			walkNulls(t, fixture, k, e)
		}
	case []any:
		for _, e := range x {
			walkNulls(t, fixture, key, e)
		}
	}
}

// TestJSONLeavesNodeAlone checks that normalising nil lists works on a
// copy: the caller's Node keeps its nil slices.
func TestJSONLeavesNodeAlone(t *testing.T) {
	n := vmNode()
	before := vmNode()
	if err := JSON(&bytes.Buffer{}, n); err != nil {
		t.Fatal(err)
	}
	if n.GPUs[0].NVLinks != nil || n.CPU.Sockets != nil || n.NICs[0].Ports != nil {
		t.Error("JSON replaced nil slices in the caller's Node")
	}
	if diff := cmp.Diff(before, n, cmp.Comparer(func(a, b cpuset.Set) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("JSON changed its argument (-before +after):\n%s", diff)
	}
}

// TestJSONSchemaDefault: a Node without a schema is written with the
// current one, so every file names its contract.
func TestJSONSchemaDefault(t *testing.T) {
	var buf bytes.Buffer
	if err := JSON(&buf, topology.Node{}); err != nil {
		t.Fatal(err)
	}
	var got struct{ Schema string }
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Schema != topology.Schema {
		t.Errorf("schema = %q, want %q", got.Schema, topology.Schema)
	}
}
