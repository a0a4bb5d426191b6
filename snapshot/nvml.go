package snapshot

import (
	"fmt"
	"path/filepath"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	gpunvml "github.com/gpuaffinity/gpuaffinity/nvml"
)

// nvml records the NVML answers into nvml.json: from opts.NVML, else, for a
// root other than "/", from the root's nvml.json as nvml.Open loads it (the
// way --root reads it), else not at all.
func (c *collector) nvml() error {
	lib := c.opts.NVML
	source := "Options.NVML"
	if lib == nil {
		if rootfs.IsLive(c.opts.Root) {
			return nil
		}
		var err error
		lib, source, err = gpunvml.Open(c.opts.Root)
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if lib == nil {
			return nil
		}
		source = filepath.Join(c.opts.Root, gpunvml.ReplayFileName)
	}
	f, err := gpunvml.Record(lib)
	if err != nil {
		if f.Version == 0 {
			return fmt.Errorf("record nvml from %s: %w", source, err)
		}
		// Record documents the file as complete when only Shutdown failed.
		c.warn("%s: %v", source, err)
	}
	data, err := gpunvml.EncodeReplay(f)
	if err != nil {
		return err
	}
	if c.scrub != nil {
		data = []byte(c.scrub.uuids(string(data)))
	}
	c.tree.addFile(gpunvml.ReplayFileName, data)
	c.rep.NVML = source
	return nil
}
