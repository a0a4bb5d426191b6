package pci

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// config builds a 4096-byte configuration space whose extended
// capabilities are caps: {id, capability, control}, chained from 0x100.
func config(caps ...[3]uint16) []byte {
	b := make([]byte, 4096)
	le := binary.LittleEndian
	off := 0x100
	for i, c := range caps {
		next := 0
		if i+1 < len(caps) {
			next = off + 0x40
		}
		le.PutUint32(b[off:], uint32(c[0])|1<<16|uint32(next)<<20)
		le.PutUint16(b[off+4:], c[1])
		le.PutUint16(b[off+6:], c[2])
		off = next
	}
	return b
}

func TestParseACS(t *testing.T) {
	const aer, dsn = 0x0001, 0x0003
	for _, tc := range []struct {
		name    string
		b       []byte
		state   ACSState
		enabled []string
	}{
		{"on, after two other capabilities", config([3]uint16{aer, 0, 0}, [3]uint16{dsn, 0, 0}, [3]uint16{acsCapID, 0x5f, 0x1d}), ACSOn, []string{"SV", "RR", "CR", "UF"}},
		{"capable, all off", config([3]uint16{acsCapID, 0x5f, 0}), ACSOff, nil},
		{"only reserved control bits", config([3]uint16{acsCapID, 0x5f, 0x80}), ACSOff, nil},
		{"no ACS capability", config([3]uint16{aer, 0, 0}), ACSAbsent, nil},
		{"no extended capabilities", config(), ACSAbsent, nil},
		{"legacy 256-byte space", make([]byte, 256), ACSAbsent, nil},
		{"unprivileged 64 bytes", make([]byte, 64), ACSUnknown, nil},
	} {
		a := ParseACS(tc.b, "/sys/x/config")
		if a.State != tc.state || !slices.Equal(a.Enabled(), tc.enabled) {
			t.Errorf("%s: %+v enabled %v, want %s %v", tc.name, a, a.Enabled(), tc.state, tc.enabled)
		}
	}
	if a := ParseACS(make([]byte, 64), "/sys/x/config"); !strings.Contains(a.Reason, "/sys/x/config") || !strings.Contains(a.Reason, "root") {
		t.Errorf("unknown reason %q names neither file nor root", a.Reason)
	}
	// A capability list that points back at itself ends.
	b := config([3]uint16{0x0001, 0, 0})
	binary.LittleEndian.PutUint32(b[0x100:], 0x0001|1<<16|0x100<<20)
	if a := ParseACS(b, "f"); a.State != ACSUnknown {
		t.Errorf("looping list: %+v, want unknown", a)
	}
	// A pointer past the end or below 0x100 is no capability.
	binary.LittleEndian.PutUint32(b[0x100:], 0x0001|1<<16|0xffc<<20)
	if a := ParseACS(b, "f"); a.State != ACSAbsent {
		t.Errorf("pointer past the end: %+v", a)
	}
	if got := (ACS{State: ACSOn, Control: 0x05}).String(); got != "on (SV RR)" {
		t.Errorf("String = %q", got)
	}
}

func FuzzParseACS(f *testing.F) {
	f.Add(config([3]uint16{acsCapID, 0x5f, 0x1d}))
	f.Add(make([]byte, 300))
	f.Fuzz(func(t *testing.T, b []byte) {
		a := ParseACS(b, "f")
		switch a.State {
		case ACSOn, ACSOff, ACSAbsent, ACSUnknown:
		default:
			t.Fatalf("state %q", a.State)
		}
	})
}
