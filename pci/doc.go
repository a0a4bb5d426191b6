// Package pci reads the PCI tree from sysfs under a root directory:
// every function listed in <root>/sys/bus/pci/devices, its parent chain
// (taken from the link target, as the kernel nests devices under their
// bridges), ids, NUMA node, local CPUs, link speed and width, and driver.
//
// It hands plain values up (Device) and never imports the model. A
// function whose attributes are missing or garbage is still returned, with
// the unknown fields left unset and a per-device error naming the file in
// the returned error list; only a root that has no PCI bus at all is a
// hard error.
package pci
