package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// VPD is what gpuaffinity reads of a function's Vital Product Data (the
// sysfs vpd file: PCI Local Bus spec 6.0 appendix I, PCIe base spec 6.28),
// read only where it decides something: a ConnectX-8 PF and its Data
// Direct DMA function are one adapter when their V3 keywords are equal
// (rdma-core kernel-boot/rdma_topo matches them so).
type VPD struct {
	// Name is the Identifier String (large resource tag 0x82), "NVIDIA
	// Dual ConnectX-8 SuperNIC ...".
	Name string
	// V3 is the read-only keyword V3: NVIDIA puts the adapter's UUID
	// there, the same on every function of one adapter.
	V3 string
	// Serial is the read-only keyword SN, the board's serial number.
	Serial string
	// Unreadable says why no VPD was read: the file is readable by root
	// only (mode 0600, drivers/pci/vpd.c), absent, or garbage. "" when
	// read.
	Unreadable string
}

// Device ids whose VPD is read, and only on a node that has a Data Direct
// function: reading VPD goes to the device's VPD capability dword by
// dword, which is slow, and on some devices it stalls.
const (
	VendorMellanox   = 0x15b3
	DeviceDataDirect = 0x2100 // ConnectX-8 Data Direct DMA function (class 0x080100)
	DeviceCX8        = 0x1023 // ConnectX-8: Data Direct is ConnectX-8's and later's
)

// wantsVPD reports whether d's VPD can tie a ConnectX-8 PF to a Data
// Direct function.
func (d Device) wantsVPD() bool { return WantsVPD(d.Vendor, d.DeviceID) }

// WantsVPD reports whether a function of these ids has a VPD gpuaffinity
// reads (and a snapshot keeps): a ConnectX-8 PF or Data Direct function.
func WantsVPD(vendor, device uint16) bool {
	if vendor != VendorMellanox {
		return false
	}
	return device == DeviceDataDirect || device == DeviceCX8
}

// IsDataDirect reports whether d is a ConnectX Data Direct DMA function.
func (d Device) IsDataDirect() bool {
	return d.Vendor == VendorMellanox && d.DeviceID == DeviceDataDirect
}

// vpdLimit bounds the read: the VPD address space is 15 bits (32 KiB).
const vpdLimit = 32 << 10

// readVPDs fills VPD of every ConnectX function when the node has a Data
// Direct function; otherwise it reads nothing.
func readVPDs(root *rootfs.Root, devs []Device) {
	if !hasDataDirect(devs) {
		return
	}
	for i := range devs {
		if devs[i].wantsVPD() {
			v := ReadVPD(root, devs[i].SysPath)
			devs[i].VPD = &v
		}
	}
}

func hasDataDirect(devs []Device) bool {
	for _, d := range devs {
		if d.IsDataDirect() {
			return true
		}
	}
	return false
}

// ReadVPD reads and parses the vpd file of the function whose directory
// (relative to the root) is sysPath. Every failure is in Unreadable,
// naming the file.
func ReadVPD(root *rootfs.Root, sysPath string) VPD {
	file := sysPath + "/vpd"
	b, err := root.ReadFile(file, vpdLimit)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return VPD{Unreadable: root.Path(file) + ": readable by root only"}
	case errors.Is(err, fs.ErrNotExist):
		return VPD{Unreadable: root.Path(file) + ": absent"}
	case err != nil:
		return VPD{Unreadable: err.Error()}
	}
	v, err := ParseVPD(b)
	if err != nil {
		return VPD{Unreadable: fmt.Sprintf("%s: %v", root.Path(file), err)}
	}
	return v
}

// VPD resource tags (PCI Local Bus spec 3.0 6.4, I.3).
const (
	vpdLargeTag = 0x80
	vpdTagID    = 0x82 // Identifier String
	vpdTagRO    = 0x90 // VPD-R, read-only keywords
	vpdTagRW    = 0x91 // VPD-W
	vpdTagEnd   = 0x78 // small resource End Tag (0x0f << 3)
)

// ParseVPD reads the Identifier String and the read-only keywords V3 and
// SN of a VPD image. A resource that runs past the image, or an image
// without an Identifier String or VPD-R, is an error: a function that
// answers garbage must not look like an adapter without a UUID.
func ParseVPD(b []byte) (VPD, error) {
	var v VPD
	sawID, sawRO := false, false
	for len(b) > 0 {
		tag := b[0]
		if tag&vpdLargeTag == 0 {
			if tag&0x78 == vpdTagEnd {
				break
			}
			n := int(tag & 0x07)
			if 1+n > len(b) {
				return VPD{}, fmt.Errorf("VPD small resource %#02x runs past the end", tag)
			}
			b = b[1+n:]
			continue
		}
		if len(b) < 3 {
			return VPD{}, fmt.Errorf("VPD large resource %#02x is cut off", tag)
		}
		n := int(b[1]) | int(b[2])<<8
		if 3+n > len(b) {
			return VPD{}, fmt.Errorf("VPD large resource %#02x of %d bytes runs past the end (%d left)", tag, n, len(b)-3)
		}
		data := b[3 : 3+n]
		switch tag {
		case vpdTagID:
			v.Name = strings.TrimSpace(printable(data))
			sawID = true
		case vpdTagRO:
			sawRO = true
			for kw := range vpdKeywords(data) {
				switch kw.name {
				case "V3":
					v.V3 = strings.TrimSpace(printable(kw.value))
				case "SN":
					v.Serial = strings.TrimSpace(printable(kw.value))
				}
			}
		}
		b = b[3+n:]
	}
	if !sawID && !sawRO {
		return VPD{}, errors.New("no VPD identifier string or read-only section")
	}
	return v, nil
}

type vpdKeyword struct {
	name  string
	value []byte
}

// vpdKeywords yields the keywords of a VPD-R or VPD-W section: a
// two-character name, a length byte, the value. A keyword that runs past
// the section ends the walk.
func vpdKeywords(data []byte) func(func(vpdKeyword) bool) {
	return func(yield func(vpdKeyword) bool) {
		for len(data) >= 3 {
			n := int(data[2])
			if 3+n > len(data) {
				return
			}
			if !yield(vpdKeyword{name: string(data[:2]), value: data[3 : 3+n]}) {
				return
			}
			data = data[3+n:]
		}
	}
}

// printable keeps the printable ASCII of b: VPD strings are ASCII, and a
// value that is not must not reach a report or a label unescaped.
func printable(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if c >= 0x20 && c < 0x7f {
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// Bytes encodes v as a VPD image: the Identifier String, a VPD-R section
// holding SN (where set), V3 and the RV checksum (the bytes from the start
// through RV's value sum to 0), and the End Tag. It is what a snapshot
// keeps of a function's VPD, and what fixtures serve.
func (v VPD) Bytes() []byte {
	large := func(tag byte, data []byte) []byte {
		return append([]byte{tag, byte(len(data)), byte(len(data) >> 8)}, data...)
	}
	kw := func(name, value string) []byte {
		value = value[:min(len(value), 255)]
		return append([]byte{name[0], name[1], byte(len(value))}, value...)
	}
	out := large(vpdTagID, []byte(v.Name))
	var ro []byte
	if v.Serial != "" {
		ro = append(ro, kw("SN", v.Serial)...)
	}
	ro = append(ro, kw("V3", v.V3)...)
	ro = append(ro, 'R', 'V', 1, 0)
	out = append(out, large(vpdTagRO, ro)...)
	var sum byte
	for _, c := range out[:len(out)-1] {
		sum += c
	}
	out[len(out)-1] = -sum
	return append(out, vpdTagEnd)
}
