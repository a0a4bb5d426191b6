// Package nccl renders what NCCL and its network plugins need from a
// topology.Node: the topology XML that NCCL_TOPO_FILE points at (xml*.go)
// and the per-rank environment for NCCL, UCX and libfabric (env*.go);
// for AMD Instinct GPUs, RCCL's file and environment (env_amd.go).
// It does no I/O besides writing to the io.Writer it is given; it never
// reads sysfs or NVML.
package nccl
