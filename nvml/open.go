package nvml

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// Source names, as Open returns them.
const (
	SourceLive   = "live"   // the node's own libnvidia-ml
	SourceReplay = "replay" // ROOT/nvml.json
	SourceNone   = "none"   // no NVML for this root
)

// ReplayFileName is the file, under a root, that replays NVML.
const ReplayFileName = "nvml.json"

// Open picks the NVML source for a --root (DESIGN.md, "The root"):
//
//   - the live root (rootfs.IsLive: "/", or ""): go-nvml's nvml.New(), source "live".
//     nvml.New loads nothing: the library is looked for by Init, which
//     answers ERROR_LIBRARY_NOT_FOUND on a node without the driver (Read
//     turns that into a Result with Available false).
//   - another root with ROOT/nvml.json: LoadReplay, source "replay".
//   - another root without it: (nil, "none", nil). Read(nil) reports NVML
//     as not found.
//
// A root is taken as rootfs.Clean takes it, as every other reader of a
// root does: "" is "/". The error is non-nil only when nvml.json exists but cannot be read or is invalid;
// it names the file.
func Open(root string) (lib nvml.Interface, source string, err error) {
	r, err := rootfs.Open(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, SourceNone, nil
	}
	if err != nil {
		return nil, SourceNone, fmt.Errorf("nvml: replay: %w", err)
	}
	defer r.Close()
	return OpenRoot(r)
}

// OpenRoot is Open for a root already open (an in-memory one included).
func OpenRoot(r *rootfs.Root) (lib nvml.Interface, source string, err error) {
	if r.Live() {
		return nvml.New(), SourceLive, nil
	}
	// The root reader: bounded, non-blocking, regular files only, and a
	// link out of the root (nvml.json -> /dev/zero) is refused.
	data, err := r.ReadFile(ReplayFileName, MaxReplayFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, SourceNone, nil
	}
	lib, err = loadReplay(r.Path(ReplayFileName), data, err)
	if err != nil {
		return nil, SourceNone, err
	}
	return lib, SourceReplay, nil
}
