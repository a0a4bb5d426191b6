// Package hwloccheck asks hwloc where it places the PCI devices of a root
// directory, so that tests can check gpuaffinity's NUMA locality against
// an independent reader of the same fake (or captured) sysfs.
//
// It runs `lstopo-no-graphics --of xml --whole-io -` with HWLOC_FSROOT set
// to the root, HWLOC_COMPONENTS=-x86 (otherwise hwloc 2.9 still runs CPUID
// on the host and mixes the host's caches into the fake machine) and
// HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES removed from the environment (GPU memory
// nodes named in /proc/driver/nvidia/gpus/<bdf>/numa_status stay hidden,
// hwloc's default).
//
// Errors: when lstopo-no-graphics is not installed, the error wraps
// exec.ErrNotFound (tests skip with "install hwloc"); a failing run wraps
// the *exec.ExitError and carries hwloc's stderr.
//
// This package is for tests; nothing in the agent shells out to hwloc.
package hwloccheck
