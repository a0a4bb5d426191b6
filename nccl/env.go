package nccl

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
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

// efaRDMAFamilies are the instance families whose EFA does RDMA reads and
// writes (FI_EFA_USE_DEVICE_RDMA=1 is valid there): aws-ofi-nccl's GDR
// platforms (src/platform-aws.cpp) and the EFA documentation.
var efaRDMAFamilies = []string{"p4d", "p4de", "p5", "p6", "trn"}

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

// frontEnds lists front, then the netdevs of the other front-end NICs
// that are up, in NIC order.
func (b *envBuilder) frontEnds(front string) []string {
	out := []string{front}
	for _, nic := range b.n.NICs {
		if nic.Role != topology.RoleFrontend {
			continue
		}
		for _, i := range nic.Interfaces {
			if i.OperState == "up" && !slices.Contains(out, i.Name) && b.listable(i.Name) != "" {
				out = append(out, i.Name)
			}
		}
	}
	return out
}

// platformSetting is one variable a platform publishes for its fabric,
// with where it publishes it.
type platformSetting struct {
	Var
	Source string // where the platform publishes it
}

// ociSettings are OCI's RoCE QoS and queue-pair settings for its GPU
// shapes' RDMA cluster network (oracle-quickstart/oci-hpc
// playbooks/roles/nccl-conf/templates/{h100,h200,b200}, the
// samples/gpu/nccl_run_allreduce*.sbatch jobs).
var ociSettings = []platformSetting{
	{Var{"NCCL_IB_QPS_PER_CONNECTION", "1"}, ociSource},
	{Var{"NCCL_IB_SPLIT_DATA_ON_QPS", "0"}, ociSource},
	{Var{"NCCL_IB_TC", "41"}, ociSource},
	{Var{"NCCL_IB_SL", "0"}, ociSource},
	{Var{"NCCL_IB_TIMEOUT", "22"}, ociSource},
}

const ociSource = "oracle-quickstart/oci-hpc@b5285a6 playbooks/roles/nccl-conf/templates/h100; samples/gpu/nccl_run_allreduce_H100.sbatch@d8df359"

// gibSettings are Google's gIB profile, the values of
// /usr/local/gib/scripts/set_nccl_env.sh as Google's own a3-ultragpu-8g
// NeMo Dockerfile repeats them (GoogleCloudPlatform/cluster-toolkit
// examples/machine-learning/a3-ultragpu-8g); NCCL_NET=gIB from its
// run-nccl-tests.sh.
var gibSettings = []platformSetting{
	{Var{"NCCL_NET", "gIB"}, gibSource},
	{Var{"NCCL_CROSS_NIC", "0"}, gibSource},
	{Var{"NCCL_NET_GDR_LEVEL", "PIX"}, gibSource},
	{Var{"NCCL_P2P_NET_CHUNKSIZE", "131072"}, gibSource},
	{Var{"NCCL_NVLS_CHUNKSIZE", "524288"}, gibSource},
	{Var{"NCCL_IB_ADAPTIVE_ROUTING", "1"}, gibSource},
	{Var{"NCCL_IB_QPS_PER_CONNECTION", "4"}, gibSource},
	{Var{"NCCL_IB_TC", "52"}, gibSource},
	{Var{"NCCL_IB_FIFO_TC", "84"}, gibSource},
}

const gibSource = "GoogleCloudPlatform/cluster-toolkit@4f04afc examples/machine-learning/a3-ultragpu-8g (nccl-tests/run-nccl-tests.sh, the NeMo Dockerfile's copy of set_nccl_env.sh)"

// gibTuners are the tuner configurations of Google's gIB installation by
// GPU: a3-ultragpu (H200) and a4-highgpu (B200).
var gibTuners = map[string]string{
	"H200": "/usr/local/gib/configs/tuner_config_a3u.txtpb",
	"B200": "/usr/local/gib/configs/tuner_config_a4.txtpb",
}

// platform adds the settings the node's platform publishes for its fabric;
// one the caller has set already is left out.
func (b *envBuilder) platform(req EnvRequest, roce []topology.NIC, gib bool) {
	n := b.n
	var settings []platformSetting
	switch {
	case n.Platform.Cloud == topology.CloudOCI && len(roce) > 0:
		settings = ociSettings
	case gib && !slices.Contains(n.NetPlugins, "gIB"):
		b.warn("Google Cloud with RoCE compute NICs, but Google's gIB NCCL plugin is not installed (no /usr/local/gib/scripts/set_nccl_env.sh): NCCL_NET=gIB and Google's profile not set; NCCL uses its own IB transport")
	case gib:
		settings = slices.Clone(gibSettings)
		if t := gibTuner(n); t != "" {
			settings = append(settings, platformSetting{Var{"NCCL_TUNER_CONFIG_PATH", t}, gibSource})
		} else {
			b.warn("gIB: no tuner configuration known for these GPUs (a3-ultragpu H200, a4 B200): NCCL_TUNER_CONFIG_PATH not set")
		}
	}
	for _, st := range settings {
		if req.Preset != nil {
			if _, ok := req.Preset(st.Name); ok {
				continue
			}
		}
		b.set(st.Name, st.Value)
	}
}

// gibTuner is the gIB tuner configuration for the node's GPUs; "" when
// they are none of the known ones or not all alike.
func gibTuner(n topology.Node) string {
	t := ""
	for _, g := range n.GPUs {
		var this string
		for model, path := range gibTuners {
			if strings.Contains(g.Model, model) {
				this = path
			}
		}
		if this == "" || (t != "" && this != t) {
			return ""
		}
		t = this
	}
	return t
}

// frontEnd is the interface for NCCL's bootstrap sockets: the node's
// one answer, topology.SocketInterface (the default route's interface,
// else the front-end NIC's interface that is up and, where addresses are
// known, holds an address). Nothing else is guessed: a bond member or an
// RDMA port's netdev would carry no socket.
func (b *envBuilder) frontEnd() string {
	name, _ := topology.SocketInterface(b.n)
	if name == "" {
		what := "that is up"
		if topology.AddressesKnown(b.n) {
			what += " with an IPv4 address"
		}
		b.warn("no front-end interface found (no default route, and no Ethernet NIC without RDMA %s): NCCL_SOCKET_IFNAME not set", what)
		return ""
	}
	return b.listable(name)
}

// listable returns name, or "" with a warning where NCCL's list syntax
// cannot carry it.
func (b *envBuilder) listable(name string) string {
	if !envListable(name, ",") {
		b.warn("interface name %q contains ',', which NCCL's interface lists cannot express: not used", name)
		return ""
	}
	return name
}

// gidIndex finds the GID index that holds a RoCE v2, IPv4-mapped address
// on every ACTIVE compute RoCE port (the lowest such index).
func (b *envBuilder) gidIndex(nics []topology.NIC) (int, bool) {
	var common []int
	first := true
	var lacking []string
	for _, nic := range nics {
		for _, p := range nic.Ports {
			if p.StateID != 4 {
				continue
			}
			var idx []int
			for _, g := range p.GIDs {
				if g.Type == "RoCE v2" && envIPv4Mapped(g.GID) {
					idx = append(idx, g.Index)
				}
			}
			if len(idx) == 0 {
				lacking = append(lacking, fmt.Sprintf("%s:%d", nic.Name, p.Port))
				continue
			}
			slices.Sort(idx)
			if first {
				common, first = idx, false
				continue
			}
			common = slices.DeleteFunc(common, func(i int) bool { return !slices.Contains(idx, i) })
		}
	}
	switch {
	case len(lacking) > 0:
		b.warn("RoCE port(s) %s have no RoCE v2 GID with an IPv4 address: NCCL_IB_GID_INDEX not set (NCCL picks one itself)", strings.Join(lacking, ", "))
		return 0, false
	case first:
		return 0, false // no active RoCE port; NCCL_IB_HCA already warned
	case len(common) == 0:
		b.warn("the compute RoCE ports hold their RoCE v2 IPv4 GIDs at different indexes: NCCL_IB_GID_INDEX not set (NCCL picks one itself)")
		return 0, false
	}
	return common[0], true
}

// tcpx adds Google's GPUDirect-TCPX (a3-highgpu-8g: one NIC per two GPUs)
// or TCPXO (a3-megagpu-8g: one NIC per GPU) interface variables. Tuning
// is left to Google's own profile.
func (b *envBuilder) tcpx(front string, gve []topology.NIC) {
	n := b.n
	isGVE := map[string]bool{}
	for _, nic := range gve {
		isGVE[nic.Name] = true
	}
	var ifnames []string
	for _, g := range n.GPUs {
		for _, name := range envPairNICs(n, g.Index) {
			nic, ok := envNIC(n, name)
			if !ok || !isGVE[name] {
				continue
			}
			for _, nd := range nic.Netdevs {
				if !slices.Contains(ifnames, nd) && b.listable(nd) != "" {
					ifnames = append(ifnames, nd)
				}
			}
		}
	}
	it := n.Platform.InstanceType
	var prefix, ifVar string
	switch {
	case strings.HasPrefix(it, "a3-megagpu"), it == "" && len(gve) >= len(n.GPUs):
		prefix, ifVar = "NCCL_FASTRAK_CTRL_DEV", "NCCL_FASTRAK_IFNAME"
	case strings.HasPrefix(it, "a3-highgpu"), it == "" && 2*len(gve) == len(n.GPUs):
		prefix, ifVar = "NCCL_GPUDIRECTTCPX_CTRL_DEV", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"
	default:
		b.warn("%d gVNIC data NICs for %d GPUs (instance type %q) match neither GPUDirect-TCPXO (one per GPU) nor TCPX (one per two GPUs): no plugin variables set",
			len(gve), len(n.GPUs), it)
		return
	}
	if front != "" {
		b.set(prefix, front)
	} else {
		b.warn("%s not set: no front-end interface", prefix)
	}
	if len(ifnames) > 0 {
		b.set(ifVar, strings.Join(ifnames, ","))
	} else {
		b.warn("%s not set: no GPU is paired with a gVNIC data NIC", ifVar)
	}
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

// envGVNICs returns the compute NICs that are Google gVNICs (driver gve
// or PCI id 1ae0:0042) without RDMA: GPUDirect-TCPX(O) data NICs.
func envGVNICs(n topology.Node) []topology.NIC {
	var out []topology.NIC
	for _, nic := range envComputeNICs(n, topology.FabricEthernet) {
		if nic.RDMADevice == "" && (nic.Driver == "gve" || (nic.Vendor == "0x1ae0" && nic.Device == "0x0042")) {
			out = append(out, nic)
		}
	}
	return out
}

func envEFARDMA(instanceType string) bool {
	family, _, _ := strings.Cut(strings.ToLower(instanceType), ".")
	for _, f := range efaRDMAFamilies {
		switch f {
		case "p4d", "p4de":
			if family == f {
				return true
			}
		default:
			if strings.HasPrefix(family, f) {
				return true
			}
		}
	}
	return false
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

// envIPv4Mapped reports whether a GID ("0000:...:ffff:0a00:0001") holds an
// IPv4-mapped IPv6 address other than 0.0.0.0.
func envIPv4Mapped(gid string) bool {
	a, err := netip.ParseAddr(gid)
	if err != nil || !a.Is4In6() {
		return false
	}
	return !a.Unmap().IsUnspecified()
}

// envListable reports whether name can stand in a comma list of NCCL's
// (none of the separators in seps, not empty).
func envListable(name, seps string) bool {
	return name != "" && !strings.ContainsAny(name, seps)
}

func envOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

func envCPUList(s cpuset.Set) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}
