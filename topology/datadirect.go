package topology

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// DataDirect ties a NIC to its ConnectX-8 Data Direct DMA function
// (15b3:2100, class 0x080100). On Grace the NIC's PF sits on one root
// port and the GPU on another, behind the ConnectX-8's own PCIe switch,
// which also holds the DMA function: GPUDirect RDMA moves the data through
// that function and that switch ("Grace Blackwell CX8 GPUDirect RDMA"
// guide, rdma-core kernel-boot/rdma_topo), and NCCL places the NIC there
// (src/transport/net_ib/init.cc: the device is exposed as <name>_dma with
// the DMA function's sysfs path).
type DataDirect struct {
	BusID string `json:"bus_id"` // the DMA function
	// MatchedBy says which signal tied the function to the NIC: "vpd"
	// (the V3 keyword of both functions' VPD is the same adapter UUID,
	// rdma_topo's rule) or "position" (the only ConnectX-8 adapter and
	// the only Data Direct function on their NUMA node left untied).
	MatchedBy string `json:"matched_by"`
}

// Data Direct's PCI ids: the DMA function and the ConnectX-8 PF.
const (
	vendorMellanox   = "0x15b3"
	deviceDataDirect = "0x2100"
	deviceCX8        = "0x1023"
)

// IsDataDirect reports whether d is a ConnectX Data Direct DMA function.
func (d PCIDevice) IsDataDirect() bool {
	return d.Vendor == vendorMellanox && d.Device == deviceDataDirect
}

// linkDataDirect ties every Data Direct function to its NIC(s) and says
// in warnings which functions it could not tie. It clears earlier ties,
// so Link stays a function of the other fields.
func linkDataDirect(n *Node) []string {
	for i := range n.NICs {
		n.NICs[i].DataDirect = nil
	}
	devs := newTree(n.PCIDevices)
	var dmas []*PCIDevice
	for i := range n.PCIDevices {
		if n.PCIDevices[i].IsDataDirect() {
			dmas = append(dmas, &n.PCIDevices[i])
		}
	}
	if len(dmas) == 0 {
		return nil
	}
	// The NICs a DMA function can serve: ConnectX PFs (never a VF),
	// grouped by adapter (the functions of one slot).
	type adapter struct {
		slot string
		nics []int // n.NICs indexes
		v3   string
		cx8  bool
		numa *int
	}
	var adapters []*adapter
	bySlot := map[string]*adapter{}
	for i, nic := range n.NICs {
		d := devs[nic.BusID]
		if d == nil || nic.Virtual || d.Vendor != vendorMellanox {
			continue
		}
		slot := adapterSlot(nic)
		a := bySlot[slot]
		if a == nil {
			a = &adapter{slot: slot, numa: d.NUMANode}
			bySlot[slot] = a
			adapters = append(adapters, a)
		}
		a.nics = append(a.nics, i)
		a.cx8 = a.cx8 || d.Device == deviceCX8
		if d.VPD != nil && d.VPD.V3 != "" && a.v3 == "" {
			a.v3 = d.VPD.V3
		}
	}
	tie := func(a *adapter, dma *PCIDevice, by string) {
		for _, i := range a.nics {
			n.NICs[i].DataDirect = &DataDirect{BusID: dma.BusID, MatchedBy: by}
		}
	}
	tied := map[*adapter]bool{}
	var left []*PCIDevice
	for _, dma := range dmas {
		var match []*adapter
		if dma.VPD != nil && dma.VPD.V3 != "" {
			for _, a := range adapters {
				if a.v3 == dma.VPD.V3 {
					match = append(match, a)
				}
			}
		}
		if len(match) == 1 && !tied[match[0]] {
			tie(match[0], dma, "vpd")
			tied[match[0]] = true
			continue
		}
		left = append(left, dma)
	}
	// By position: on a NUMA node with exactly one untied Data Direct
	// function and one untied ConnectX-8 adapter, they are one adapter.
	// Two or more on a node tie: NVIDIA's own GB300 layout crosses them
	// (the first PF's DMA function is beside the second GPU), so bus order
	// would pair every GPU with the wrong NIC; they stay untied.
	var untied []string
	byNode := map[string][]*PCIDevice{}
	for _, dma := range left {
		byNode[numaKey(dma.NUMANode)] = append(byNode[numaKey(dma.NUMANode)], dma)
	}
	for _, key := range slices.Sorted(maps.Keys(byNode)) {
		group := byNode[key]
		var cands []*adapter
		for _, a := range adapters {
			if !tied[a] && a.cx8 && numaKey(a.numa) == key {
				cands = append(cands, a)
			}
		}
		if len(group) == 1 && len(cands) == 1 && key != "unknown" {
			tie(cands[0], group[0], "position")
			tied[cands[0]] = true
			continue
		}
		for _, dma := range group {
			untied = append(untied, dma.BusID+vpdWhy(dma))
		}
		for _, a := range cands {
			if d := devs[n.NICs[a.nics[0]].BusID]; d != nil && d.VPD != nil && d.VPD.Unreadable != "" {
				untied = append(untied, fmt.Sprintf("NIC %s: %s", n.NICs[a.nics[0]].Name, d.VPD.Unreadable))
			}
		}
	}
	if len(untied) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("ConnectX-8 Data Direct functions not tied to their NICs: %s. NCCL moves each NIC's data through its Data Direct function (NCCL_IB_DATA_DIRECT=1, its default), next to one GPU; without the tie the GPU-NIC pairs follow the NICs' own places and may be crossed: read the VPD as root (the agent does) or give a snapshot taken as root",
		strings.Join(untied, "; "))}
}

// vpdWhy says, in parentheses, why a Data Direct function's VPD did not
// tie it.
func vpdWhy(d *PCIDevice) string {
	switch {
	case d.VPD == nil:
		return " (VPD not read)"
	case d.VPD.Unreadable != "":
		return " (" + d.VPD.Unreadable + ")"
	case d.VPD.V3 == "":
		return " (its VPD has no V3 keyword)"
	}
	return " (no single ConnectX adapter untied with VPD V3 " + strconv.Quote(d.VPD.V3) + ")"
}

func numaKey(n *int) string {
	if n == nil {
		return "unknown"
	}
	return strconv.Itoa(*n)
}

// dataDirectNote says, for a pair's NICs, which reach the GPU through a
// Data Direct function and what tied it; "" when none does.
func (c *roleCtx) dataDirectNote(nics []string) string {
	var parts []string
	for _, name := range nics {
		i := slices.IndexFunc(c.n.NICs, func(x NIC) bool { return x.Name == name })
		if i < 0 || c.n.NICs[i].DataDirect == nil {
			continue
		}
		dd := c.n.NICs[i].DataDirect
		by := "its VPD V3 matches the NIC's"
		if dd.MatchedBy == "position" {
			by = "the only one and the only ConnectX-8 on the NUMA node"
		}
		parts = append(parts, fmt.Sprintf("%s through its Data Direct function %s (%s)", name, dd.BusID, by))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return ""
	}
	return "data path: " + strings.Join(parts, ", ")
}
