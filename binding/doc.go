// Package binding computes the CPU and memory binding map of a node: for
// each local rank, the CPUs it should run on and the NUMA node(s) its
// memory should come from, next to its GPU. It is a pure function of a
// topology.Node (no I/O); `gpuaffinity cpumap` prints the map and
// `gpuaffinity exec` applies one rank of it.
package binding
