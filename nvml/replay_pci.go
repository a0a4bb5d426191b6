package nvml

import (
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/pci"
)

// pciInfo builds go-nvml's PciInfo from a recorded one: BusId as recorded,
// and Domain, Bus, Device and BusIdLegacy derived from it as NVML fills
// them.
func pciInfo(p ReplayPCI) nvml.PciInfo {
	info := nvml.PciInfo{PciDeviceId: p.PCIDeviceID, PciSubSystemId: p.PCISubsystemID}
	putCString(info.BusId[:], p.BusID)
	if a, err := pci.ParseAddress(p.BusID); err == nil {
		info.Domain, info.Bus, info.Device = a.Domain, uint32(a.Bus), uint32(a.Device)
		putCString(info.BusIdLegacy[:], strings.ToUpper(a.String())) // NVML's "%04X:%02X:%02X.%X"
	}
	return info
}

// replayPCI is pciInfo's inverse: what the format keeps of a PciInfo.
func replayPCI(info nvml.PciInfo) ReplayPCI {
	return ReplayPCI{
		BusID:          cString(info.BusId[:]),
		PCIDeviceID:    info.PciDeviceId,
		PCISubsystemID: info.PciSubSystemId,
	}
}

// putCString copies s into the NUL-terminated C char array dst, truncating.
func putCString(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// cString reads a NUL-terminated C char array.
func cString(src []int8) string {
	var b strings.Builder
	for _, c := range src {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}
