package render

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// TestDocsNameEveryField reads docs/topology-json.md, the JSON contract,
// and fails for each JSON field of topology.Node (at any depth) that it
// does not document, so that a field added to the model is added to the
// contract too.
func TestDocsNameEveryField(t *testing.T) {
	doc, err := os.ReadFile("../docs/topology-json.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, path := range jsonFields(reflect.TypeFor[topology.Node](), "", map[reflect.Type]bool{}) {
		// Nested fields are documented in their top-level field's section,
		// relative to it: "link.width" for pci_devices[].link.width.
		_, rel, _ := strings.Cut(path, ".")
		if !strings.Contains(text, "`"+path+"`") && (rel == "" || !strings.Contains(text, "`"+rel+"`")) {
			t.Errorf("docs/topology-json.md does not document %s", path)
		}
	}
}

// jsonFields lists the JSON paths of t's fields: "nics[].ports[].rate_gbps".
func jsonFields(t reflect.Type, prefix string, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		// A pointer is an object or null: only lists get "[]".
		if t.Kind() == reflect.Slice && prefix != "" && !strings.HasSuffix(prefix, "[]") {
			prefix += "[]"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out = append(out, path)
		out = append(out, jsonFields(f.Type, path, seen)...)
	}
	return out
}
