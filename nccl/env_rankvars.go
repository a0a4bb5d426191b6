package nccl

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// RanksPerGPU is the ranks per GPU req maps local ranks with: its
// RanksPerGPU when set; else, where the process sees every GPU of the
// node (no CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES or
// HIP_VISIBLE_DEVICES) and they are AMD GPUs split alike into k > 1
// compute partitions, k (topology.PartitionsPerGPU: HIP numbers the
// partitions, so local rank r is HIP device r); else 1.
func RanksPerGPU(n topology.Node, req EnvRequest) int {
	if req.RanksPerGPU > 0 {
		return req.RanksPerGPU
	}
	sel, err := topology.ProcessGPUs(n, req.CUDAVisibleDevices, req.Preset)
	if err != nil || sel.Source != "" {
		return 1
	}
	return topology.PartitionsPerGPU(n, sel)
}

// rank adds the per-rank variables of GPU g.
func (b *envBuilder) rank(g topology.GPU, req EnvRequest) {
	n := b.n
	b.set("GPUAFFINITY_GPU", strconv.Itoa(g.Index))
	if g.IsAMD() {
		b.hipDevices(g, req)
	}
	nics := envPairNICs(n, g.Index)
	b.set("GPUAFFINITY_NICS", strings.Join(nics, ","))

	// The GPU's CPUs and node are its resolved Locality (one answer for
	// every command), cut to the CPUs this process may use.
	b.env.Warnings = append(b.env.Warnings, n.GPUWarnings(g)...)
	loc, allowed := g.Locality, n.CPU.Allowed
	cpus := loc.CPUs.Intersect(allowed)
	switch {
	case !cpus.IsEmpty():
	case loc.CPUs.IsEmpty():
		cpus = allowed
		b.warn("GPU %d: its CPUs are unknown (locality %s): GPUAFFINITY_CPUS is every allowed CPU", g.Index, loc.Source)
	default:
		cpus = allowed
		b.warn("GPU %d: none of its CPUs (%s, from %s) are allowed (%s): GPUAFFINITY_CPUS is every allowed CPU",
			g.Index, envCPUList(loc.CPUs), loc.Source, envCPUList(allowed))
	}
	if !cpus.IsEmpty() {
		b.set("GPUAFFINITY_CPUS", cpus.String())
	} else {
		b.warn("GPU %d: no allowed CPU known: GPUAFFINITY_CPUS not set", g.Index)
	}
	if loc.Node != nil {
		b.set("GPUAFFINITY_NUMA", strconv.Itoa(*loc.Node))
	} else {
		b.warn("GPU %d: no single NUMA node (locality %s, nodes %s): GPUAFFINITY_NUMA not set", g.Index, loc.Source, envCPUList(cpuset.Of(loc.NUMANodes...)))
	}

	var ucx []string
	for _, name := range nics {
		nic, ok := envNIC(n, name)
		if !ok || (nic.Fabric != topology.FabricInfiniBand && nic.Fabric != topology.FabricRoCE) || nic.RDMADevice == "" {
			continue
		}
		for _, p := range nic.Ports {
			if p.StateID == 4 && envListable(nic.Name, ",:") {
				ucx = append(ucx, nic.Name+":"+strconv.Itoa(p.Port))
			}
		}
	}
	if len(ucx) > 0 {
		b.set("UCX_NET_DEVICES", strings.Join(ucx, ","))
	} else if slices.ContainsFunc(nics, func(name string) bool {
		nic, ok := envNIC(n, name)
		return ok && (nic.Fabric == topology.FabricInfiniBand || nic.Fabric == topology.FabricRoCE)
	}) {
		b.warn("GPU %d: its NICs %s have no ACTIVE port: UCX_NET_DEVICES not set", g.Index, strings.Join(nics, ","))
	}
}

// envPairNICs returns the NICs paired with GPU index gpu.
func envPairNICs(n topology.Node, gpu int) []string {
	for _, p := range n.Pairs {
		if p.GPU == gpu {
			return p.NICs
		}
	}
	return nil
}

func envNIC(n topology.Node, name string) (topology.NIC, bool) {
	for _, nic := range n.NICs {
		if nic.Name == name {
			return nic, true
		}
	}
	return topology.NIC{}, false
}

func envCPUList(s cpuset.Set) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}
