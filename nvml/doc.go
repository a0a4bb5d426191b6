// Package nvml reads what NVIDIA's management library says about a node's
// GPUs, live or replayed, and hands it up as plain data (Result, GPU). It is
// the only package of gpuaffinity that imports go-nvml, and like every
// source it does not import the model (package topology).
//
// Everything is written against go-nvml's own nvml.Interface and
// nvml.Device, so the same code runs on three backends: the live library
// (Open("/")), a replay of an nvml.json file (Open(root), LoadReplay,
// NewReplay; format in ReplayFile and docs/nvml-replay.md), and go-nvml's
// mocks in tests. Record writes an nvml.json from any of them, and
// ConvertProbe turns a capture of the project's NVML probe into one.
// WatchXID streams the GPUs' XID events (NVML event sets) until its
// context ends, on any of the backends.
//
// # Errors are tri-state
//
// Each NVML call has three outcomes, and Read keeps them apart:
//
//   - SUCCESS: the value is used.
//   - ERROR_NOT_SUPPORTED: an answer, not a failure ("this GPU has no NUMA
//     node of its own", "this VM shows no NVLinks"). The field stays at its
//     "unknown" value (nil, 0, false) and no warning is written.
//   - any other Return: a failure. It becomes a warning that names the GPU
//     (index and bus id) and the call. ERROR_GPU_IS_LOST marks the GPU
//     "lost" and ends its reading; a failure of a call the GPU cannot be
//     identified without (handle, PCI info, UUID, name) marks it "error".
//
// Whole-node failures are Result.Err, which wraps ErrLibraryNotFound (no
// driver, or no nvml.json under a root) or ErrUnavailable, and the
// nvml.Return: errors.Is(res.Err, nvml.ERROR_DRIVER_NOT_LOADED) works.
// Return names in warnings and files are go-nvml's constant names
// ("ERROR_GPU_IS_LOST"), the same live and replayed.
package nvml

//go:generate go run ./internal/gennotsupported -o notsupported_gen.go
