package pci

import "testing"

func TestNICSwitch(t *testing.T) {
	for _, c := range []struct {
		vendor, device uint16
		want           string
	}{
		{0x15b3, 0x197c, "ConnectX"},
		{0x15b3, 0x1979, "ConnectX"},
		{0x15b3, 0x197b, "BlueField-3"},
		{0x15b3, 0x1023, ""}, // the ConnectX-8 PF itself
		{0x1000, 0xc030, ""}, // Broadcom PEX890xx
		{0x10b5, 0x197c, ""}, // another vendor's id
	} {
		if got := NICSwitch(c.vendor, c.device); got != c.want {
			t.Errorf("NICSwitch(%04x:%04x) = %q, want %q", c.vendor, c.device, got, c.want)
		}
	}
}
