package pci

// NICSwitch names the network adapter whose own PCIe switch a bridge
// with PCI id vendor:device is a port of: "ConnectX" for the switch a
// ConnectX-8 (and later) carries inside it (15b3:197c, and 15b3:1979 on
// other parts; rdma-core kernel-boot/rdma_topo "cx_switch"), "BlueField-3"
// for BlueField-3's (15b3:197b, rdma_topo "bf3_switch"). It returns ""
// for every other id: a discrete switch (Broadcom, Microchip) or a root
// port.
//
// On HGX/DGX B300 the GPU sits behind such a switch, beside the NIC's
// own function (rdma_topo's "inline" complex: root port, CX switch, a
// second CX switch, GPU); on GB300 the NIC's Data Direct DMA function
// does. The path classes do not change with the switch's maker; the name
// says where the switch is.
func NICSwitch(vendor, device uint16) string {
	if vendor != 0x15b3 {
		return ""
	}
	switch device {
	case 0x197c, 0x1979:
		return "ConnectX"
	case 0x197b:
		return "BlueField-3"
	}
	return ""
}
