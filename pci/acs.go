package pci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// ACS control bits (PCIe Base Specification 7.7.8.3, ACS Control
// Register): the forms of access control a port can enforce.
const (
	ACSSourceValidation = 1 << 0 // SV
	ACSTranslationBlock = 1 << 1 // TB
	ACSRequestRedirect  = 1 << 2 // RR: peer requests go up to the root complex
	ACSCompletionRedir  = 1 << 3 // CR
	ACSUpstreamForward  = 1 << 4 // UF
	ACSEgressControl    = 1 << 5 // EC
	ACSDirectTranslated = 1 << 6 // DT
	acsCapID            = 0x000d
	extCapStart         = 0x100
	configSpaceExtended = 4096
	configSpaceLegacy   = 256
	maxExtendedCaps     = (configSpaceExtended - extCapStart) / 4
	acsControlBitsKnown = 0x7f
)

// ACSState says what a function's configuration space tells of ACS.
type ACSState string

const (
	// ACSUnknown: the extended configuration space could not be read
	// (only the first 64 bytes are readable without CAP_SYS_ADMIN).
	ACSUnknown ACSState = "unknown"
	// ACSAbsent: the function has no ACS capability (or no extended
	// configuration space at all).
	ACSAbsent ACSState = "absent"
	// ACSOff: an ACS capability with no control bit set.
	ACSOff ACSState = "off"
	// ACSOn: some control bit set.
	ACSOn ACSState = "on"
)

// ACS is a function's Access Control Services capability.
type ACS struct {
	State      ACSState
	Capability uint16 // ACS Capability Register; 0 unless State is on or off
	Control    uint16 // ACS Control Register
	// Reason says why State is unknown.
	Reason string
}

var acsBitNames = [...]string{"SV", "TB", "RR", "CR", "UF", "EC", "DT"}

// Enabled names the control bits set ("SV", "RR", ...), in bit order.
func (a ACS) Enabled() []string {
	var out []string
	for i, n := range acsBitNames {
		if a.Control&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// configBufs hold one extended configuration space each: every bridge's
// config is read into a pooled buffer, not a fresh 4 KiB.
var configBufs = sync.Pool{New: func() any { return new([configSpaceExtended]byte) }}

// readACS reads the ACS capability of the function whose directory is dir
// from its config file. A read that returns less than the legacy 256
// bytes (an unprivileged reader gets 64) is ACSUnknown with the reason;
// exactly 256 bytes is a function without extended configuration space,
// so without ACS. A missing config file is ACSUnknown without an error;
// any other failure is ACSUnknown and the error.
func readACS(dir *rootfs.Dir) (ACS, error) {
	buf := configBufs.Get().(*[configSpaceExtended]byte)
	defer configBufs.Put(buf)
	n, err := dir.ReadInto("config", buf[:])
	if errors.Is(err, fs.ErrNotExist) {
		return ACS{State: ACSUnknown, Reason: dir.Path("config") + ": absent"}, nil
	}
	if err != nil {
		return ACS{State: ACSUnknown, Reason: err.Error()}, err
	}
	return ParseACS(buf[:n], dir.Path("config")), nil
}

// ParseACS finds the ACS capability in a configuration space image read
// from file (named in the reason).
func ParseACS(b []byte, file string) ACS {
	switch {
	case len(b) < configSpaceLegacy:
		return ACS{State: ACSUnknown, Reason: fmt.Sprintf("%s: only %d bytes readable (the extended configuration space needs root)", file, len(b))}
	case len(b) < extCapStart+8:
		return ACS{State: ACSAbsent}
	}
	le := binary.LittleEndian
	off := extCapStart
	for range maxExtendedCaps {
		if off < extCapStart || off+8 > len(b) || off%4 != 0 {
			return ACS{State: ACSAbsent}
		}
		hdr := le.Uint32(b[off:])
		if hdr == 0 || hdr == 0xffffffff {
			return ACS{State: ACSAbsent}
		}
		if hdr&0xffff == acsCapID {
			a := ACS{Capability: le.Uint16(b[off+4:]), Control: le.Uint16(b[off+6:])}
			a.State = ACSOff
			if a.Control&acsControlBitsKnown != 0 {
				a.State = ACSOn
			}
			return a
		}
		off = int(hdr >> 20)
		if off == 0 {
			return ACS{State: ACSAbsent}
		}
	}
	return ACS{State: ACSUnknown, Reason: fmt.Sprintf("%s: extended capability list does not end", file)}
}

// String is "on (SV RR CR UF)", "off", "absent" or "unknown".
func (a ACS) String() string {
	if a.State == ACSOn {
		return "on (" + strings.Join(a.Enabled(), " ") + ")"
	}
	return string(a.State)
}
