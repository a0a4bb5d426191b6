package nccl

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// EnvRequest says which local rank BuildEnv renders the environment for.
type EnvRequest struct {
	// Rank is the local rank; nil renders the node-level variables only.
	Rank *int
	// CUDAVisibleDevices is the launcher's CUDA_VISIBLE_DEVICES; nil when
	// unset. The rank's GPU is the one topology.Selection.Rank gives, in
	// topology.ProcessGPUs: on a node whose GPUs are all AMD and without
	// CUDA_VISIBLE_DEVICES, Preset's ROCR_VISIBLE_DEVICES and
	// HIP_VISIBLE_DEVICES select them.
	CUDAVisibleDevices *string
	// RanksPerGPU is how many local ranks share one GPU: rank r drives
	// device r/RanksPerGPU. 0 means 1, or on a node whose GPUs are AMD
	// GPUs split alike into k compute partitions (and no device list
	// narrows them), k: one rank per partition (RanksPerGPU).
	RanksPerGPU int
	// TopoFile is the path NCCL_TOPO_FILE gets: a vendor file in use or
	// the XML gpuaffinity wrote; "" for none.
	TopoFile string
	// CuFileJSON is the path CUFILE_ENV_PATH_JSON gets: the cufile.json
	// gpuaffinity wrote (env --write-cufile); "" for none.
	CuFileJSON string
	// Preset reports the caller's environment. A platform setting
	// (docs/nccl-env.md, "Platform settings") the caller has already set
	// is left out, so its value stands. Nil means nothing is set.
	Preset func(name string) (string, bool)
	// NoPlatform leaves every platform setting out.
	NoPlatform bool
	// NoMNNVL sets NCCL_MNNVL_ENABLE=0 (env --no-mnnvl): NCCL then does
	// not use multi-node NVLink. Without it NCCL decides itself, and a
	// multi-node NVLink node whose fabric or IMEX is not ready gets a
	// warning instead (env_mnnvl.go).
	NoMNNVL bool
}

// Var is one environment variable.
type Var struct{ Name, Value string }

// Env is the environment of one local rank (or of the node when Rank is
// nil): node-level variables in the documented order (docs/nccl-env.md),
// then the per-rank ones.
type Env struct {
	Rank *int
	// GPU is the index of the rank's GPU (GPU.Index: NVML's for an
	// NVIDIA GPU; AMD GPUs are numbered on after them); nil without a
	// rank.
	GPU      *int
	Vars     []Var
	Warnings []string
}

// Get returns the value of the named variable and whether it is set.
func (e Env) Get(name string) (string, bool) {
	for _, v := range e.Vars {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// ErrRank is wrapped by BuildEnv when the rank cannot be mapped to a GPU.
var ErrRank = errors.New("cannot map local rank to a GPU")

// ErrMIG is wrapped when CUDA_VISIBLE_DEVICES names a MIG instance.
var ErrMIG = topology.ErrMIG

// BuildEnv renders the environment of one local rank of node n. It does
// no I/O. The rules are the table of docs/nccl-env.md.
func BuildEnv(n topology.Node, req EnvRequest) (Env, error) {
	b := &envBuilder{n: n, env: Env{Rank: req.Rank}}
	var gpu *topology.GPU
	if req.Rank != nil {
		b.perGPU = RanksPerGPU(n, req)
		g, err := rankGPU(n, *req.Rank, b.perGPU, func() (topology.Selection, error) {
			return topology.ProcessGPUs(n, req.CUDAVisibleDevices, req.Preset)
		})
		if err != nil {
			return Env{}, err
		}
		gpu = g
		idx := g.Index
		b.env.GPU = &idx
		b.slot = *req.Rank % b.perGPU
	}
	b.vendor(gpu)
	b.node(req)
	if gpu != nil {
		b.rank(*gpu, req)
	}
	return b.env, nil
}

// PluginWritesTopology reports whether the node's network plugin writes
// NCCL's topology itself (aws-ofi-nccl on EFA nodes), so that neither
// NCCL_TOPO_FILE nor a written XML should be given to it.
func PluginWritesTopology(n topology.Node) bool {
	return len(envComputeNICs(n, topology.FabricEFA)) > 0
}

type envBuilder struct {
	n   topology.Node
	env Env
	// amd: the variables are RCCL's, for an AMD GPU (env_amd.go): the
	// rank's GPU is an AMD one, or without a rank every GPU of the node
	// is. Otherwise they are NCCL's.
	amd bool
	// mixed: the node has NVIDIA and AMD GPUs.
	mixed bool
	// perGPU is the ranks per GPU the rank was mapped with (RanksPerGPU),
	// slot its place among its GPU's ranks (rank % perGPU).
	perGPU, slot int
}

func (b *envBuilder) set(name, value string) {
	b.env.Vars = append(b.env.Vars, Var{Name: name, Value: value})
}

func (b *envBuilder) warn(format string, args ...any) {
	b.env.Warnings = append(b.env.Warnings, fmt.Sprintf(format, args...))
}

// node adds the node-level variables in table order.
func (b *envBuilder) node(req EnvRequest) {
	n := b.n
	if !b.amd {
		// CUDA's ordinals then follow NVML's. HIP numbers its devices
		// in KFD order and does not read it: never for an AMD GPU.
		b.set("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	}

	ib := envComputeNICs(n, topology.FabricInfiniBand)
	roce := envComputeNICs(n, topology.FabricRoCE)
	gib := n.Platform.Cloud == topology.CloudGCP && len(roce) > 0

	front := b.frontEnd()
	switch {
	case gib && front != "":
		// Google's gIB scripts name both gVNICs (cluster-toolkit
		// a3-ultragpu-8g run-nccl-tests.sh: enp0s19,enp192s20).
		b.set("NCCL_SOCKET_IFNAME", "="+strings.Join(b.frontEnds(front), ","))
	case front != "":
		b.set("NCCL_SOCKET_IFNAME", "="+front)
	}

	efa := envComputeNICs(n, topology.FabricEFA)
	gve := envGVNICs(n)
	ibOrRoCE := envComputeNICs(n, topology.FabricInfiniBand, topology.FabricRoCE)

	if len(ibOrRoCE) == 0 && len(efa) == 0 && len(gve) == 0 {
		b.set("NCCL_IB_DISABLE", "1")
		b.warn("no RDMA compute NIC and no GPUDirect-TCPX(O) NIC on this node: NCCL uses sockets over %s; this node cannot do GPUDirect RDMA",
			envOr(front, "the front-end interface"))
	}

	if len(ibOrRoCE) > 0 {
		var hca []string
		for _, nic := range ibOrRoCE {
			for _, p := range nic.Ports {
				if p.StateID != 4 {
					b.warn("NIC %s port %d is %s (state %d), not ACTIVE: left out of NCCL_IB_HCA", nic.Name, p.Port, envOr(p.State, "in an unknown state"), p.StateID)
					continue
				}
				if !envListable(nic.Name, ",:") {
					b.warn("RDMA device name %q contains ',' or ':', which NCCL_IB_HCA cannot express: left out", nic.Name)
					continue
				}
				hca = append(hca, nic.Name+":"+strconv.Itoa(p.Port))
			}
		}
		if len(hca) > 0 {
			b.set("NCCL_IB_HCA", "="+strings.Join(hca, ","))
		} else {
			b.warn("no compute NIC has an ACTIVE port: NCCL_IB_HCA not set")
		}
	}

	if len(roce) > 0 {
		if idx, ok := b.gidIndex(roce); ok {
			b.set("NCCL_IB_GID_INDEX", strconv.Itoa(idx))
		}
	}

	if !req.NoPlatform {
		b.platform(req, roce, gib)
	}

	if n.Platform.Cloud == topology.CloudAzure && len(ib) > 0 {
		b.set("NCCL_IB_PCI_RELAXED_ORDERING", "1")
		b.set("UCX_IB_PCI_RELAXED_ORDERING", "on")
	}

	if len(efa) > 0 {
		b.set("FI_PROVIDER", "efa")
		if envEFARDMA(n.Platform.InstanceType) {
			b.set("FI_EFA_USE_DEVICE_RDMA", "1")
		} else {
			b.warn("instance type %q is not known to support EFA RDMA (p4d, p4de, p5*, p6*, trn*): FI_EFA_USE_DEVICE_RDMA not set",
				n.Platform.InstanceType)
		}
	}

	if len(gve) > 0 {
		b.tcpx(front, gve)
	}

	b.mnnvl(req)
	b.amdNode()

	if req.TopoFile != "" {
		switch {
		case b.amd && b.mixed:
			b.warn("NCCL_TOPO_FILE not set to %s: on a node with NVIDIA and AMD GPUs the topology file is NCCL's (<system version=\"1\">), which RCCL refuses (\"XML Topology has wrong version\", rccl src/graph/xml.cc): RCCL detects the topology itself", req.TopoFile)
		case len(efa) > 0 && req.TopoFile == n.TopoFile && n.Platform.Cloud == topology.CloudAWS:
			// aws-ofi-nccl's own file for this instance type, which the
			// plugin hands NCCL itself.
		case len(efa) > 0:
			b.warn("NCCL_TOPO_FILE not set to %s: on EFA nodes aws-ofi-nccl writes its own topology", req.TopoFile)
		default:
			b.set("NCCL_TOPO_FILE", req.TopoFile)
		}
	}
	if req.CuFileJSON != "" {
		if b.amd {
			b.warn("CUFILE_ENV_PATH_JSON not set to %s: cuFile (GPUDirect Storage) is NVIDIA's library, and the GPU is an AMD one", req.CuFileJSON)
		} else {
			// cuFile (GPUDirect Storage) reads this file instead of
			// /etc/cufile.json.
			b.set("CUFILE_ENV_PATH_JSON", req.CuFileJSON)
		}
	}
}

// envComputeNICs returns the compute NICs of the given fabrics, in NIC
// (bus) order.
func envComputeNICs(n topology.Node, fabrics ...topology.Fabric) []topology.NIC {
	var out []topology.NIC
	for _, nic := range n.NICs {
		if nic.Role == topology.RoleCompute && slices.Contains(fabrics, nic.Fabric) {
			out = append(out, nic)
		}
	}
	return out
}

func envOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
