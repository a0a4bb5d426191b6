package cufile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
)

// TestMachines holds `cufile`'s output for every fixture machine that
// names an expected file (expect.storage.cufile) to that file, written by
// hand: NVIDIA's default cufile.json with the keys the machine's layout
// decides set as its spec explains. The comparison is of the JSON values
// (cuFile reads values, not layout).
func TestMachines(t *testing.T) {
	n := 0
	for _, name := range fakesys.Machines() {
		want, err := fakesys.Expectation(name)
		if err != nil {
			t.Fatal(err)
		}
		if want.Storage == nil || want.Storage.CuFile == "" {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			root, lib, err := fakesys.BuildMachineMemory(name)
			if err != nil {
				t.Fatal(err)
			}
			node, err := discover.Discover(discover.Options{FS: root, NVML: lib, NVMLSource: "replay"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Render(FromNode(node))
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("..", "internal", "testutil", "fakesys", "testdata", "machines-expect", want.Storage.CuFile)
			wantBytes, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, got)
			}
			if err := json.Unmarshal(wantBytes, &w); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("cufile for %s differs from %s:\n%s", name, file, got)
			}
		})
	}
	if n < 3 {
		t.Errorf("%d machines name an expected cufile.json, want at least 3", n)
	}
}
