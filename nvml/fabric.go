package nvml

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Fabric is what NVML says of a GPU's registration with the NVLink
// fabric (GetGpuFabricInfo_v4 where the driver has it, else the v1
// GetGpuFabricInfo, which carries no health). It is nil where the GPU is
// outside a fabric (state GPU_FABRIC_STATE_NOT_SUPPORTED) or the call
// failed.
type Fabric struct {
	// State: 1 not started, 2 in progress, 3 completed.
	State int
	// Status is the registration's nvml.Return; NVML sets it once State is
	// completed, nil before.
	Status *int
	// ClusterUUID is the NVLink domain's UUID in canonical form; "" while
	// it is all zeroes (no multi-node NVLink: NCCL's ncclMnnvlCheck needs
	// a non-zero one).
	ClusterUUID string
	// CliqueID is the fabric clique: v4's first unicast-pointer clique
	// entry, the v1 cliqueId.
	CliqueID uint32
	// HealthMask and HealthSummary are v4's; nil from the v1 call.
	HealthMask    *uint32
	HealthSummary *int
}

// Platform is GetPlatformInfo's answer (Blackwell and newer): where the
// GPU sits in its rack. go-nvml asks version 1 of the struct, whose
// fields are in the same places and widths as version 2's; the names here
// are version 2's (nvml.h nvmlPlatformInfo_v2_t).
type Platform struct {
	IBGUID        string // ibGuid: hex, 8 bytes on Blackwell
	ChassisSerial string // chassisSerialNumber (v1 rackGuid): 13 bytes on Blackwell
	Slot          int    // slotNumber: the slot in the chassis, switches included
	Tray          int    // trayIndex: the index among compute trays
	Host          int    // hostId: the node within the slot
	PeerType      int    // peerType: NVLink peer type (switch present or not)
	Module        int    // moduleId: the GPU within the node
}

// Symbols of calls newer drivers have: a live library is asked for them
// before they are called (go-nvml calls a missing one through a null
// pointer).
const (
	symFabricInfoV4 = "nvmlDeviceGetGpuFabricInfo_v4"
	symPlatformInfo = "nvmlDeviceGetPlatformInfo"
)

// readFabric fills g.gpu.Fabric and the Health fields derived from it.
func (g *gpuReader) readFabric(dev nvml.Device) {
	var f Fabric
	if g.opts.has(symFabricInfoV4) {
		info, r := dev.GetGpuFabricInfo_v4()
		if !g.ok("GetGpuFabricInfo_v4", r) || info.State == nvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
			return
		}
		f = Fabric{State: int(info.State), ClusterUUID: clusterUUID(info.ClusterUuid)}
		n := min(int(info.NumCliques), len(info.Cliques))
		for _, c := range info.Cliques[:n] {
			if c.Type == nvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER {
				f.CliqueID = c.Id
				break
			}
		}
		mask, summary := info.HealthMask, int(info.HealthSummary)
		f.HealthMask, f.HealthSummary = &mask, &summary
		if info.State == nvml.GPU_FABRIC_STATE_COMPLETED {
			s := int(info.Status)
			f.Status = &s
		}
	} else {
		info, r := dev.GetGpuFabricInfo()
		if !g.ok("GetGpuFabricInfo", r) || info.State == nvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
			return
		}
		f = Fabric{State: int(info.State), ClusterUUID: clusterUUID(info.ClusterUuid), CliqueID: info.CliqueId}
		if info.State == nvml.GPU_FABRIC_STATE_COMPLETED {
			s := int(info.Status)
			f.Status = &s
		}
	}
	g.gpu.Fabric = &f
	state := f.State
	g.gpu.Health.FabricState, g.gpu.Health.FabricStatus = &state, f.Status
}

// readPlatform fills g.gpu.Platform where the driver has GetPlatformInfo
// and the GPU answers it.
func (g *gpuReader) readPlatform(dev nvml.Device) {
	if !g.opts.has(symPlatformInfo) {
		return
	}
	info, r := dev.GetPlatformInfo()
	if !g.ok("GetPlatformInfo", r) {
		return
	}
	g.gpu.Platform = &Platform{
		IBGUID:        trimmedHex(info.IbGuid[:]),
		ChassisSerial: printable(info.ChassisSerialNumber[:]),
		Slot:          int(info.SlotNumber), Tray: int(info.TrayIndex), Host: int(info.HostId),
		PeerType: int(info.PeerType), Module: int(info.ModuleId),
	}
}

// clusterUUID formats a fabric cluster UUID; "" for all zeroes.
func clusterUUID(b [16]uint8) string {
	if b == [16]uint8{} {
		return ""
	}
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// parseClusterUUID is clusterUUID's inverse; "" is all zeroes.
func parseClusterUUID(s string) ([16]uint8, error) {
	var b [16]uint8
	if s == "" {
		return b, nil
	}
	raw, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(raw) != 16 || len(s) != 36 {
		return b, fmt.Errorf("cluster_uuid %q: not a UUID", s)
	}
	copy(b[:], raw)
	return b, nil
}

// trimmedHex is b in hex without its trailing zero bytes (Blackwell uses
// 8 of ibGuid's 16).
func trimmedHex(b []byte) string {
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return hex.EncodeToString(b[:end])
}

// printable is b up to its first NUL, with bytes outside printable ASCII
// dropped (a serial number is printed into labels and tables).
func printable(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		if c >= ' ' && c <= '~' {
			sb.WriteByte(c)
		}
	}
	return sb.String()
}
