package nccl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// AMD Instinct GPUs: RCCL (ROCm/rccl, a fork of NCCL) is the library, and
// it reads NCCL's variables with NCCL's meaning: NCCL_PARAM(name, env, …)
// loads "NCCL_" env, RCCL_PARAM "RCCL_" env (rccl@0cbce2a
// src/include/param.h), NCCL_SOCKET_IFNAME with NCCL's '=' and '^'
// prefixes (src/misc/socket.cc), NCCL_IB_HCA (src/transport/net_ib.cc),
// NCCL_IB_GID_INDEX, NCCL_IB_TC, NCCL_IB_SL, NCCL_IB_TIMEOUT,
// NCCL_IB_QPS_PER_CONNECTION, NCCL_IB_SPLIT_DATA_ON_QPS,
// NCCL_IB_PCI_RELAXED_ORDERING (net_ib.cc), NCCL_TOPO_FILE
// (src/graph/topo.cc ncclTopoGetSystem). So every node-level rule of
// env.go (and env_socket.go, env_roce.go, env_platform.go, env_efa.go,
// env_tcpx.go) holds for an AMD GPU's rank, ConnectX and Pollara
// (ionic_N, an RDMA verbs device like mlx5_N) alike, and UCX's are UCX's.
// What differs is here:
//
//   - CUDA_DEVICE_ORDER is not set: HIP numbers devices in KFD order and
//     does not read it.
//   - No HIP_VISIBLE_DEVICES, as env sets no CUDA_VISIBLE_DEVICES for an
//     NVIDIA rank (docs/nccl-env.md: a single-GPU value moves the rank's
//     device to device 0); no ROCR_VISIBLE_DEVICES either (the runtime
//     below HIP: schedulers and the ROCm container tooling set it, and a
//     HIP list then counts within it). GPUAFFINITY_HIP_DEVICES names the
//     rank's HIP device ordinals for a wrapper that wants to set one.
//   - NCCL_TOPO_FILE: the file is RCCL's (version 2, nccl.XMLDialect) on
//     a node whose GPUs are all AMD; on a node with NVIDIA GPUs too it is
//     NCCL's, which RCCL refuses, so an AMD rank does not get it there.
//   - Warnings: a mixed node (NCCL and RCCL are separate libraries), AMD
//     GPUs that peer over PCIe (HSA_FORCE_FINE_GRAIN_PCIE), a GPU split
//     into compute partitions (CPX), HIP_VISIBLE_DEVICES or
//     ROCR_VISIBLE_DEVICES set by the caller (without
//     CUDA_VISIBLE_DEVICES they select the rank's GPU,
//     topology.ProcessGPUs, but GPUAFFINITY_HIP_DEVICES stays in the
//     numbering of every GPU).

// hipDevicesVar names the rank's HIP device ordinals (AMDGPU.Ordinals):
// on a partitioned node with one rank per partition, the rank's own
// partition's; partitionVar and renderNodeVar then name that partition
// and its DRM render node (what a container runtime or Slurm's
// gres.conf gives the rank).
const (
	hipDevicesVar = "GPUAFFINITY_HIP_DEVICES"
	partitionVar  = "GPUAFFINITY_PARTITION"
	renderNodeVar = "GPUAFFINITY_RENDER_NODE"
)

// vendor decides whose variables the env holds: the rank's GPU's
// library, or without a rank RCCL's only where every GPU is an AMD one.
// On a node with NVIDIA and AMD GPUs it warns that one job cannot span
// both.
func (b *envBuilder) vendor(gpu *topology.GPU) {
	var nv, amd []int
	for _, g := range b.n.GPUs {
		if g.IsAMD() {
			amd = append(amd, g.Index)
		} else {
			nv = append(nv, g.Index)
		}
	}
	b.mixed = len(nv) > 0 && len(amd) > 0
	if gpu != nil {
		b.amd = gpu.IsAMD()
	} else {
		b.amd = len(amd) > 0 && len(nv) == 0
	}
	if !b.mixed {
		return
	}
	b.warn("this node has NVIDIA GPUs (GPU %s) and AMD GPUs (GPU %s): NCCL drives the NVIDIA ones and RCCL the AMD ones; they are separate libraries and one communicator cannot span both, so the local ranks of one job must all be on GPUs of one vendor; each rank gets the variables of its own GPU's library",
		envCPUList(cpuset.Of(nv...)), envCPUList(cpuset.Of(amd...)))
	if gpu == nil {
		b.warn("no local rank on a node with NVIDIA and AMD GPUs: the node-level variables are NCCL's (the NVIDIA GPUs'); give the rank for an AMD GPU's (RCCL's)")
	}
}

// amdNode adds the node-level warnings for RCCL: AMD GPUs that share no
// XGMI hive reach each other over PCIe, where HIP's peer-to-peer needs
// HSA_FORCE_FINE_GRAIN_PCIE=1 (rccl@0cbce2a README.md, "Enabling
// peer-to-peer transport": "In order to enable peer-to-peer access on
// machines with PCIe-connected GPUs, the HSA environment variable
// HSA_FORCE_FINE_GRAIN_PCIE=1 is required"). env does not set it: RCCL
// itself asks for it only where built without hipDeviceMallocUncached
// (its warning sits under #ifndef HIP_UNCACHED_MEMORY, src/init.cc,
// which CMakeLists.txt defines from HIP 5.7.31920 on), and on XGMI nodes
// (MI300X: one fully connected hive) it changes nothing RCCL uses. The
// hive is the GPU's xgmi_hive_id (AMDGPU.HiveID), which the launch view
// keeps.
func (b *envBuilder) amdNode() {
	if !b.amd {
		return
	}
	type group struct {
		hive string
		gpus []int
	}
	var groups []group
	for _, g := range b.n.GPUs {
		if !g.IsAMD() || g.AMD == nil {
			continue // not in KFD: not a device HIP has
		}
		i := slices.IndexFunc(groups, func(x group) bool { return g.AMD.HiveID != "" && x.hive == g.AMD.HiveID })
		if i < 0 {
			groups = append(groups, group{hive: g.AMD.HiveID})
			i = len(groups) - 1
		}
		groups[i].gpus = append(groups[i].gpus, g.Index)
	}
	if len(groups) < 2 {
		return
	}
	var parts []string
	for _, x := range groups {
		what := "no XGMI hive"
		if x.hive != "" {
			what = "XGMI hive " + x.hive
		}
		label := "GPU"
		if len(x.gpus) > 1 {
			label = "GPUs"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", label, envCPUList(cpuset.Of(x.gpus...)), what))
	}
	b.warn("AMD GPUs without an XGMI link between them: %s; peer-to-peer between GPUs of different groups goes over PCIe, which needs HSA_FORCE_FINE_GRAIN_PCIE=1 (RCCL README, \"Enabling peer-to-peer transport\"); not set by gpuaffinity: export it for a job whose ranks span those groups",
		strings.Join(parts, "; "))
}

// hipDevices sets GPUAFFINITY_HIP_DEVICES for an AMD GPU: the HIP device
// ordinals of its KFD nodes (one in SPX mode, one per compute partition
// otherwise), the numbering HIP_VISIBLE_DEVICES counts in when no
// ROCR_VISIBLE_DEVICES filters the devices first.
func (b *envBuilder) hipDevices(g topology.GPU, req EnvRequest) {
	if g.AMD == nil || len(g.AMD.Ordinals) == 0 {
		b.warn("GPU %d (%s) is not a HIP device (state %s: KFD does not list it to this process): %s not set", g.Index, g.BusID, g.State, hipDevicesVar)
		return
	}
	ords := make([]string, len(g.AMD.Ordinals))
	for i, o := range g.AMD.Ordinals {
		ords[i] = strconv.Itoa(o)
	}
	if len(ords) > 1 && b.perGPU == len(ords) && len(g.AMD.Partitions) == len(ords) {
		// One rank per compute partition: the rank's own partition, the
		// HIP device of its slot (partition order is ordinal order).
		p := g.AMD.Partitions[b.slot]
		b.set(hipDevicesVar, strconv.Itoa(p.Ordinal))
		b.set(partitionVar, strconv.Itoa(p.Partition))
		if p.RenderMinor != nil {
			b.set(renderNodeVar, "renderD"+strconv.Itoa(*p.RenderMinor))
		}
		return
	}
	b.set(hipDevicesVar, strings.Join(ords, ","))
	if len(ords) > 1 {
		b.warn("GPU %d is split into %d compute partitions (%s): each is a HIP device of its own and RCCL sees each as a GPU; %s lists all of them (%s), and gpuaffinity maps ranks to whole GPUs: for one rank per partition run %d ranks per GPU (exec --ranks-per-gpu %d) and give each rank its own entry of that list",
			g.Index, len(ords), envOr(g.AMD.ComputePartition, "partitioned"), hipDevicesVar, strings.Join(ords, ","), len(ords), len(ords))
	}
	if req.CUDAVisibleDevices != nil || req.Preset == nil {
		return
	}
	for _, name := range []string{"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"} {
		if v, ok := req.Preset(name); ok {
			b.warn("%s=%q is set and CUDA_VISIBLE_DEVICES is not: rank %d's GPU was taken from the devices it leaves visible (as HIP numbers them), but %s counts every GPU's ordinals, while HIP counts within %s",
				name, v, derefOr(b.env.Rank, -1), hipDevicesVar, name)
		}
	}
}

func derefOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}
