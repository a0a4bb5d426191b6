package render

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// TestTableClean: no line of any table ends in spaces or holds a control
// character, whatever the names (the hostile fixture has tabs, newlines
// and terminal escapes in them).
func TestTableClean(t *testing.T) {
	for _, fx := range fixtures {
		var buf bytes.Buffer
		if err := Table(&buf, fx.node()); err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
			if strings.HasSuffix(line, " ") {
				t.Errorf("%s line %d ends in a space: %q", fx.name, i+1, line)
			}
			if strings.IndexFunc(line, unicode.IsControl) >= 0 {
				t.Errorf("%s line %d holds a control character: %q", fx.name, i+1, line)
			}
		}
	}
}

// TestTableAffinity checks the CPU and NUMA Affinity columns: the GPU's
// resolved Locality (topology.ResolveLocality): the numa_node's CPUs where
// it is known, else NVML's affinity and the NUMA nodes it falls in, else
// N/A.
func TestTableAffinity(t *testing.T) {
	n := topology.Node{
		NUMANodes: []topology.NUMANode{{ID: 0, CPUs: cpuset.Range(0, 7)}, {ID: 1, CPUs: cpuset.Range(8, 15)}},
		GPUs: []topology.GPU{
			{Index: 0, NUMANode: intp(1), LocalCPUs: cpuset.Range(8, 15), NVMLCPUAffinity: cpuset.Range(0, 15)},
			{Index: 1, NVMLCPUAffinity: cpuset.Range(0, 15)},
			{Index: 2},
		},
	}
	topology.ResolveLocality(&n)
	var buf bytes.Buffer
	if err := Table(&buf, n); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"GPU0": {"8-15", "1", "N/A"},
		"GPU1": {"0-15", "0-1", "N/A"},
		"GPU2": {"N/A", "N/A", "N/A"},
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if w, ok := want[f[0]]; ok && f[0] == line[:len(f[0])] {
			if got := f[len(f)-3:]; !slices.Equal(got, w) {
				t.Errorf("%s: affinity columns %q, want %q", f[0], got, w)
			}
			delete(want, f[0])
		}
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v\n%s", want, buf.String())
	}
}
