// Package topology is the model every gpuaffinity output renders: one Node
// value per machine, holding its NUMA nodes and CPUs, its PCI tree, its
// GPUs and NICs, the path class between every GPU and every NIC or GPU,
// and the GPU→NIC pairs.
//
// The package does no I/O. The discover package fills a Node from the
// sources (sysfs, procfs, NVML, netlink); renderers (topo table, JSON,
// NCCL XML, binding maps, health checks, metrics) only read it. Paths and
// pairs are pure functions of the other fields (Link, Pair), so a Node read
// back from its JSON can be re-paired without touching the machine.
//
// The JSON form of Node is a public contract (schema
// "gpuaffinity.topology/v1", documented in docs/topology-json.md): fields
// may be added, none may change meaning.
package topology
