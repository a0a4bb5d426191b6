package pci

import (
	"fmt"
	"strconv"
	"strings"
)

// Address is a PCI function address (domain:bus:device.function).
type Address struct {
	Domain   uint32
	Bus      uint8
	Device   uint8
	Function uint8
}

// ParseAddress reads "0000:18:00.0" (sysfs), "00000000:18:00.0" (NVML's
// 8-digit domain) or "18:00.0" (domain 0). Hex digits may be upper case.
func ParseAddress(s string) (Address, error) {
	var a Address
	rest := strings.TrimSpace(s)
	parts := strings.Split(rest, ":")
	switch len(parts) {
	case 2:
		parts = append([]string{"0"}, parts...)
	case 3:
	default:
		return a, fmt.Errorf("invalid PCI address %q", s)
	}
	dev, fn, ok := strings.Cut(parts[2], ".")
	if !ok {
		return a, fmt.Errorf("invalid PCI address %q: no function", s)
	}
	dom, err1 := strconv.ParseUint(parts[0], 16, 32)
	bus, err2 := strconv.ParseUint(parts[1], 16, 8)
	d, err3 := strconv.ParseUint(dev, 16, 8)
	f, err4 := strconv.ParseUint(fn, 16, 8)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || len(parts[0]) > 8 ||
		len(parts[1]) > 2 || len(dev) > 2 || len(fn) != 1 || d > 0x1f || f > 7 {
		return a, fmt.Errorf("invalid PCI address %q", s)
	}
	return Address{Domain: uint32(dom), Bus: uint8(bus), Device: uint8(d), Function: uint8(f)}, nil
}

// Canonical turns a PCI address in any form ParseAddress reads into the
// sysfs form String prints: NVML's "00000000:3B:00.0" is "0000:3b:00.0",
// as go-nvlib's GetPCIBusID writes it. It is how the NVML reader (live
// and replayed) names a GPU, so that discovery can match it to its sysfs
// function.
func Canonical(id string) (string, error) {
	a, err := ParseAddress(id)
	if err != nil {
		return "", err
	}
	return a.String(), nil
}

// String prints the sysfs form: lower case, 4-digit domain (more where the
// domain needs it, as on Hyper-V).
func (a Address) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.Domain, a.Bus, a.Device, a.Function)
}

// NVMLString prints the form NVML writes in PciInfo.BusId and DCGM labels
// GPUs with, NVML_DEVICE_PCI_BUS_ID_FMT "%08X:%02X:%02X.0" (nvml.h): an
// 8-digit domain and upper-case hex ("00000000:1B:00.0"). ParseAddress
// reads it back.
func (a Address) NVMLString() string {
	return fmt.Sprintf("%08X:%02X:%02X.%X", a.Domain, a.Bus, a.Device, a.Function)
}

// Less orders addresses as the kernel enumerates them.
func (a Address) Less(b Address) bool {
	if a.Domain != b.Domain {
		return a.Domain < b.Domain
	}
	if a.Bus != b.Bus {
		return a.Bus < b.Bus
	}
	if a.Device != b.Device {
		return a.Device < b.Device
	}
	return a.Function < b.Function
}

// parseRootBus reads a root bus directory name, "pci0000:15".
func parseRootBus(s string) bool {
	rest, ok := strings.CutPrefix(s, "pci")
	if !ok {
		return false
	}
	dom, bus, ok := strings.Cut(rest, ":")
	if !ok || len(dom) < 4 || len(bus) != 2 {
		return false
	}
	_, err1 := strconv.ParseUint(dom, 16, 32)
	_, err2 := strconv.ParseUint(bus, 16, 8)
	return err1 == nil && err2 == nil
}
