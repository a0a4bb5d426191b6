package pci

import (
	"strings"
	"testing"
)

func TestParseVPD(t *testing.T) {
	want := VPD{Name: "NVIDIA Dual ConnectX-8 SuperNIC", Serial: "MT2514X00301", V3: "5a0c1e52-3b7d-11f0-8000-b83fd2a10300"}
	b := want.Bytes()
	got, err := ParseVPD(b)
	if err != nil || got != want {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, want)
	}
	// The RV checksum makes the bytes through it sum to 0 (PCI Local Bus
	// spec I.3.1.1).
	var sum byte
	rv := strings.Index(string(b), "RV")
	for _, c := range b[:rv+4] {
		sum += c
	}
	if sum != 0 {
		t.Errorf("checksum through RV sums to %#x", sum)
	}
	for _, bad := range [][]byte{
		nil,
		{0x78},                            // an End Tag alone
		{0x82, 0x10, 0x00, 'N'},           // a name longer than the image
		{0x82},                            // a large resource cut off
		{0x90, 0x04, 0x00, 'V'},           // VPD-R running past the end
		[]byte(strings.Repeat("\x01", 3)), // small resources running past the end
	} {
		if v, err := ParseVPD(bad); err == nil {
			t.Errorf("ParseVPD(%q) = %+v, want an error", bad, v)
		}
	}
	// Control bytes never reach a report.
	v, err := ParseVPD(VPD{Name: "a\x1b[31mb", V3: "u\x00v"}.Bytes())
	if err != nil || v.Name != "a[31mb" || v.V3 != "uv" {
		t.Errorf("ParseVPD kept control bytes: %+v, %v", v, err)
	}
}
