package discover

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// Every example machine read from memory (what --demo does) is the node
// read from the same machine written to disk: the in-memory root resolves
// links, lists directories and answers errors as the disk does. Warnings
// name files under each root's own name, the one difference.
func TestMemoryRootIsDiskRoot(t *testing.T) {
	for _, name := range fakesys.Machines() {
		t.Run(name, func(t *testing.T) {
			dir := sharedRoot(t, name)
			disk, err := Discover(Options{Root: dir})
			if err != nil {
				t.Fatal(err)
			}
			fsys, lib, err := fakesys.BuildMachineMemory(name)
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{FS: fsys}
			if lib != nil {
				opts.NVML, opts.NVMLSource = lib, nvml.SourceReplay
			}
			mem, err := Discover(opts)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(disk)
			b, _ := json.Marshal(mem)
			b = bytes.ReplaceAll(b, []byte(fsys.Dir()), []byte(dir))
			if !bytes.Equal(a, b) {
				t.Errorf("memory and disk roots differ:\ndisk   %s\nmemory %s", a, b)
			}
		})
	}
}
