package topology

import (
	"cmp"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"

	"github.com/gpuaffinity/gpuaffinity/internal/k8slabel"
)

// GPUFabric is NVML's GPU fabric info (GetGpuFabricInfo_v4, else v1):
// the GPU's registration with the NVLink fabric and, on multi-node NVLink
// (GB200/GB300 NVL72), the NVLink domain it belongs to. nil in GPU.Fabric
// where the GPU is outside any NVLink fabric (state NOT_SUPPORTED: PCIe
// cards, VMs without NVSwitch) or NVML did not say.
type GPUFabric struct {
	// State: 1 not started, 2 in progress, 3 completed (FabricCompleted).
	State int `json:"state"`
	// Status is the registration's nvml.Return (0 success), set once State
	// is completed.
	Status *int `json:"status"`
	// ClusterUUID is the NVLink domain's UUID; "" while it is all zeroes
	// (single-node NVSwitch systems, or registration not completed).
	ClusterUUID string `json:"cluster_uuid"`
	// CliqueID is the fabric clique within the domain.
	CliqueID uint32 `json:"clique_id"`
	// HealthMask is the v4 healthMask (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*);
	// nil where only the v1 call was available. Health decodes it.
	HealthMask *uint32 `json:"health_mask"`
	// HealthSummary is the v4 healthSummary: 0 not supported, 1 healthy,
	// 2 unhealthy, 3 limited capacity; nil with HealthMask.
	HealthSummary *int `json:"health_summary"`
}

// Fabric registration states (nvmlGpuFabricState_t).
const (
	FabricNotStarted = 1
	FabricInProgress = 2
	FabricCompleted  = 3
)

// Fabric health summaries (NVML_GPU_FABRIC_HEALTH_SUMMARY_*).
const (
	FabricSummaryNotSupported    = 0
	FabricSummaryHealthy         = 1
	FabricSummaryUnhealthy       = 2
	FabricSummaryLimitedCapacity = 3
)

// Clique is the GPU's clique in GPU Feature Discovery's form,
// "<clusterUuid>.<cliqueId>" (nvidia.com/gpu.clique); "" without a
// cluster UUID.
func (f *GPUFabric) Clique() string {
	if f == nil || f.ClusterUUID == "" {
		return ""
	}
	return fmt.Sprintf("%s.%d", f.ClusterUUID, f.CliqueID)
}

// NVLinkClique is the node's NVLink clique as GPU Feature Discovery labels
// it (nvidia.com/gpu.clique, NVIDIA/k8s-device-plugin internal/lm/imex.go):
// "<clusterUuid>.<cliqueId>" of the GPUs attached to a multi-node NVLink
// fabric, those whose registration completed with success and a non-zero
// cluster UUID (go-nvlib's IsFabricAttached, GPUFabric.Ready).
// Like GFD it is "" when no GPU is attached or the attached GPUs disagree
// on the cluster UUID or clique (a split: no one clique to name), and,
// since it becomes a label value (the NFD feature file, the fleet's
// labels), when it is not one (k8slabel.Value without a hash: more than
// 63 characters, or characters a label value cannot hold, which a
// hand-written --topo-file could give). GPUs not attached (a failed
// registration) do not count, as GFD leaves them out: the health gate's
// fabric checks speak for them.
func NVLinkClique(n Node) string {
	clique := ""
	for _, g := range n.GPUs {
		if !g.Fabric.Ready() {
			continue
		}
		c := g.Fabric.Clique()
		if clique != "" && c != clique {
			return ""
		}
		clique = c
	}
	v, _ := k8slabel.Value(clique, false)
	return v
}

// Ready says whether the GPU can take part in multi-node NVLink as NCCL
// decides it (src/mnnvl.cc ncclMnnvlCheck): registration completed with
// success and a non-zero cluster UUID.
func (f *GPUFabric) Ready() bool {
	return f != nil && f.State == FabricCompleted && f.Status != nil && *f.Status == 0 && f.ClusterUUID != ""
}

// FabricField is one field of the fabric health mask.
type FabricField struct {
	// Name is the field as nvml.h names it, lower case: degraded_bw,
	// route_recovery, route_unhealthy, access_timeout_recovery,
	// incorrect_configuration, partition_assigned, gfm_state.
	Name string `json:"name"`
	// Value is the field's value, decoded: "not_supported", "true",
	// "false"; for incorrect_configuration "none" or the reason; for
	// gfm_state "connected" or "disconnected".
	Value string `json:"value"`
	// Bad is set where the value costs the NVLink domain bandwidth or
	// membership.
	Bad bool `json:"bad"`
}

// fabricFields are the health mask's fields: shift, width mask, and the
// value that is bad (0: the field is judged by its own rule).
var fabricFields = []struct {
	name         string
	shift, width uint32
	bad          uint32
}{
	{"degraded_bw", 0, 0x3, 1},
	{"route_recovery", 2, 0x3, 1},
	{"route_unhealthy", 4, 0x3, 1},
	{"access_timeout_recovery", 6, 0x3, 1},
	{"incorrect_configuration", 8, 0xf, 0},
	{"partition_assigned", 12, 0x3, 2},
	{"gfm_state", 14, 0x3, 2},
}

// incorrectConfig names NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_*.
var incorrectConfig = []string{"not_supported", "none", "incorrect_sysguid", "incorrect_chassis_sn",
	"no_partition", "insufficient_nvlinks", "incompatible_gpu_fw", "invalid_location", "gpu_state_invalid"}

// Health decodes the health mask field by field; nil without one.
func (f *GPUFabric) Health() []FabricField {
	if f == nil || f.HealthMask == nil {
		return nil
	}
	m := *f.HealthMask
	out := make([]FabricField, 0, len(fabricFields))
	for _, ff := range fabricFields {
		v := (m >> ff.shift) & ff.width
		field := FabricField{Name: ff.name}
		switch ff.name {
		case "incorrect_configuration":
			if int(v) < len(incorrectConfig) {
				field.Value = incorrectConfig[v]
			} else {
				field.Value = fmt.Sprintf("unknown_%d", v)
			}
			field.Bad = v >= 2
		case "gfm_state":
			field.Value = []string{"not_supported", "connected", "disconnected", "unknown_3"}[v]
			field.Bad = v == ff.bad
		default:
			field.Value = []string{"not_supported", "true", "false", "unknown_3"}[v]
			field.Bad = v == ff.bad
		}
		out = append(out, field)
	}
	return out
}

// GPUPlatform is NVML's platform info (GetPlatformInfo, Blackwell and
// newer): where the GPU sits in its rack. nil where NVML does not say.
type GPUPlatform struct {
	IBGUID        string `json:"ib_guid"`        // hex
	ChassisSerial string `json:"chassis_serial"` // the chassis (rack) serial number
	Slot          int    `json:"slot"`           // slot in the chassis, switch trays included
	Tray          int    `json:"tray"`           // index among the compute trays
	Host          int    `json:"host"`           // node within the slot
	PeerType      int    `json:"peer_type"`      // NVLink peer type the platform reports
	Module        int    `json:"module"`         // the GPU within the node
}

// NVLinkFabric is the node's part of the NVLink fabric: the NVLink
// domains its GPUs registered in, and IMEX, which multi-node NVLink
// memory sharing needs.
type NVLinkFabric struct {
	// Domains group the GPUs with fabric info by cluster UUID and clique,
	// sorted by UUID then clique; a healthy tray has one. GPUs whose
	// registration has not completed, or completed with an error, are in
	// none.
	Domains []NVLinkDomain `json:"domains"`
	// MultiNode is set where some GPU reports a non-zero cluster UUID: the
	// node is part of a multi-node NVLink domain (NVL72 and the like).
	MultiNode bool `json:"multi_node"`
	// IMEX is what the node has of the IMEX channel devices and daemon.
	IMEX IMEX `json:"imex"`
}

// NVLinkDomain is one NVLink domain and clique of this node's GPUs.
type NVLinkDomain struct {
	ClusterUUID string `json:"cluster_uuid"` // "" on single-node NVSwitch systems
	CliqueID    uint32 `json:"clique_id"`
	GPUs        []int  `json:"gpus"` // GPU indices
}

// IMEX is the node's IMEX state (NVIDIA IMEX guide, "IMEX channels"): the
// driver registers the nvidia-caps-imex-channels character device, but
// its nodes /dev/nvidia-caps-imex-channels/channelN are made by the admin
// (or NVreg_CreateImexChannel0, or the DRA driver) after every boot.
type IMEX struct {
	// DeviceMajor is nvidia-caps-imex-channels' major in /proc/devices; nil
	// where the driver has not registered it (no IMEX-capable driver).
	DeviceMajor *int `json:"device_major"`
	// Channels are the channel nodes found, by number.
	Channels []IMEXChannel `json:"channels"`
	// Config is the IMEX daemon's configuration where installed.
	Config *IMEXConfig `json:"config"`
}

// IMEXChannel is one /dev/nvidia-caps-imex-channels/channelN node.
type IMEXChannel struct {
	Number int    `json:"number"`
	Path   string `json:"path"`
	// Problem says why the node cannot be used ("" when it can): not a
	// character device, a major that is not the driver's (a node left from
	// an earlier boot), no read-write access for this process.
	Problem string `json:"problem,omitempty"`
}

// IMEXConfig is the IMEX daemon's configuration file and its node list.
type IMEXConfig struct {
	Path string `json:"path"` // /etc/nvidia-imex/config.cfg
	// NodesConfig is IMEX_NODE_CONFIG_FILE's value.
	NodesConfig string `json:"nodes_config"`
	// Nodes is how many peers NodesConfig lists; nil where it is unreadable.
	Nodes *int `json:"nodes"`
	// ServerPort is SERVER_PORT; nil where unset.
	ServerPort *int `json:"server_port"`
}

// UsableChannels are the channel numbers without a problem.
func (i IMEX) UsableChannels() []int {
	var out []int
	for _, c := range i.Channels {
		if c.Problem == "" {
			out = append(out, c.Number)
		}
	}
	return out
}

// linkFabric fills n.NVLinkFabric.Domains and MultiNode from the GPUs'
// fabric info; IMEX is filled by discovery.
func (n *Node) linkFabric() {
	f := &n.NVLinkFabric
	f.Domains, f.MultiNode = []NVLinkDomain{}, false
	for _, g := range n.GPUs {
		fi := g.Fabric
		if fi == nil || fi.State != FabricCompleted {
			continue
		}
		if fi.ClusterUUID != "" {
			f.MultiNode = true
		}
		if fi.Status == nil || *fi.Status != 0 {
			continue // registered with an error: in no domain
		}
		i := slices.IndexFunc(f.Domains, func(d NVLinkDomain) bool {
			return d.ClusterUUID == fi.ClusterUUID && d.CliqueID == fi.CliqueID
		})
		if i < 0 {
			f.Domains = append(f.Domains, NVLinkDomain{ClusterUUID: fi.ClusterUUID, CliqueID: fi.CliqueID, GPUs: []int{}})
			i = len(f.Domains) - 1
		}
		f.Domains[i].GPUs = append(f.Domains[i].GPUs, g.Index)
	}
	sortfn.Sort(f.Domains, func(a, b NVLinkDomain) int {
		return cmp.Or(cmp.Compare(a.ClusterUUID, b.ClusterUUID), cmp.Compare(a.CliqueID, b.CliqueID))
	})
	if f.IMEX.Channels == nil {
		f.IMEX.Channels = []IMEXChannel{}
	}
}
