package kfd

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Properties
		err  string // part of the error; "" for none
	}{
		{name: "gpu", in: gpuProps(0), want: Properties{
			SIMDCount: 1216, SIMDPerCU: 4, MemBanksCount: 1, CachesCount: 459, IOLinksCount: 8, P2PLinksCount: 1,
			GFXTargetVersion: 90402, VendorID: 4098, DeviceID: 29857, LocationID: 1280, DRMRenderMinor: 128,
			HiveID: 12278230016431186561, NumSDMAEngines: 2, NumSDMAXGMIEngines: 14,
			UniqueID: 1479215874912137401, NumXCC: 8,
		}},
		{name: "cpu", in: cpuProps(5, 4), want: Properties{CPUCoresCount: 192, MemBanksCount: 1, IOLinksCount: 5, P2PLinksCount: 4}},
		// An older kernel without p2p_links_count, num_xcc or unique_id.
		{name: "old kernel", in: "cpu_cores_count 0\nsimd_count 440\nio_links_count 1\n", want: Properties{SIMDCount: 440, IOLinksCount: 1}},
		{name: "no trailing newline", in: "simd_count 4", want: Properties{SIMDCount: 4}},
		// hive_id and unique_id are %llu: all 64 bits.
		{name: "64-bit ids", in: "hive_id 18446744073709551615\nunique_id 1\n", want: Properties{HiveID: math.MaxUint64, UniqueID: 1}},
		{name: "unknown keys kept out", in: "some_future_key 7\nsimd_count 4\n", want: Properties{SIMDCount: 4}},
		{name: "empty", in: "", err: "empty"},
		{name: "only newlines", in: "\n\n", err: "empty"},
		{name: "not a number", in: "simd_count lots\n", err: "line 1"},
		{name: "negative", in: "simd_count 4\ndomain -1\n", err: "line 2", want: Properties{SIMDCount: 4}},
		{name: "hex", in: "vendor_id 0x1002\n", err: "line 1"},
		{name: "leading zero", in: "vendor_id 04098\n", err: "line 1"},
		{name: "two spaces", in: "vendor_id  4098\n", err: "line 1"},
		{name: "tab", in: "vendor_id\t4098\n", err: "line 1"},
		{name: "upper-case key", in: "Vendor_ID 4098\n", err: "line 1"},
		{name: "blank line", in: "simd_count 4\n\nvendor_id 4098\n", err: "line 2", want: Properties{SIMDCount: 4}},
		{name: "key twice", in: "simd_count 4\nsimd_count 8\n", err: "simd_count twice", want: Properties{SIMDCount: 4}},
		// A %u key cannot hold more than 32 bits.
		{name: "32-bit overflow", in: "simd_count 4294967296\n", err: "32 bits"},
		{name: "64-bit overflow", in: "hive_id 18446744073709551616\n", err: "out of range"},
		{name: "CRLF", in: "simd_count 4\r\n", err: "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProperties([]byte(tc.in))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, errSyntax)):
				t.Fatalf("error %v, want one with %q", err, tc.err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	var b strings.Builder
	for i := range maxLines + 1 {
		fmt.Fprintf(&b, "k%d 1\n", i)
	}
	if _, err := parseProperties([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("%d lines: %v, want the line bound", maxLines+1, err)
	}
}

func TestParseLink(t *testing.T) {
	got, err := parseLink([]byte(linkProps(11, 2, 3, 15, 50000, 50000, 1)))
	want := Link{Type: LinkXGMI, From: 2, To: 3, Weight: 15, MinBandwidth: 50000, MaxBandwidth: 50000, Flags: LinkFlagEnabled}
	if err != nil || got != want {
		t.Errorf("parseLink = %+v, %v; want %+v", got, err, want)
	}
	if !got.XGMI() || got.PCIe() {
		t.Errorf("XGMI() %v PCIe() %v", got.XGMI(), got.PCIe())
	}
	for _, bad := range []string{
		"node_from 2\nnode_to 3\n",               // no type
		"type 2\nnode_to 3\n",                    // no node_from
		"type 2\nnode_from 2\n",                  // no node_to
		"type 2\nnode_from 2\nnode_to 1048576\n", // past any node number
		"type 4294967296\nnode_from 2\nnode_to 3\n",
	} {
		if _, err := parseLink([]byte(bad)); !errors.Is(err, errSyntax) {
			t.Errorf("parseLink(%q) = %v, want a syntax error", bad, err)
		}
	}
}

func TestParseSystem(t *testing.T) {
	got, err := parseSystem([]byte("platform_oem 1\nplatform_id 2\nplatform_rev 3\n"))
	if err != nil || got != (SystemProperties{PlatformOEM: 1, PlatformID: 2, PlatformRev: 3}) {
		t.Errorf("parseSystem = %+v, %v", got, err)
	}
}

func TestGFXTarget(t *testing.T) {
	for v, want := range map[uint32]string{
		90402:  "gfx942",  // MI300X, MI300A
		90010:  "gfx90a",  // MI200: stepping 10 is a hex digit
		90008:  "gfx908",  // MI100
		90500:  "gfx950",  // MI350X
		110000: "gfx1100", // a major of two digits
		0:      "",        // a CPU node
		91600:  "",        // a minor past one hex digit does not decode
		90016:  "",
	} {
		if got := (Properties{GFXTargetVersion: v}).GFXTarget(); got != want {
			t.Errorf("GFXTarget(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestPCIAddress(t *testing.T) {
	for _, tc := range []struct {
		domain, loc uint32
		want        string
		partition   int
		ok          bool
	}{
		{0, 0x0500, "0000:05:00.0", 0, true},
		{0, 0xe700, "0000:e7:00.0", 0, true},
		// devfn = device<<3 | function: 0x1a = device 3, function 2.
		{0, 0x181a, "0000:18:03.2", 0, true},
		{1, 0xff00, "0001:ff:00.0", 0, true},
		// Partition 3 in bits 31:28.
		{0, 3<<28 | 0x0500, "0000:05:00.0", 3, true},
		// Bits 27:16 are never PCI_DEVID's.
		{0, 0x10500, "", 0, false},
	} {
		a, part, err := Properties{Domain: tc.domain, LocationID: tc.loc}.PCIAddress()
		if (err == nil) != tc.ok || tc.ok && (a.String() != tc.want || part != tc.partition) {
			t.Errorf("PCIAddress(domain %d, location_id %#x) = %v, %d, %v; want %s, %d", tc.domain, tc.loc, a, part, err, tc.want, tc.partition)
		}
	}
}

func TestLinkTypeString(t *testing.T) {
	for typ, want := range map[LinkType]string{LinkXGMI: "XGMI", LinkPCIExpress: "PCIe", LinkHyperTransport: "HyperTransport", 99: "type 99"} {
		if got := typ.String(); got != want {
			t.Errorf("LinkType(%d).String() = %q, want %q", typ, got, want)
		}
	}
}

// FuzzParseProperties: any input parses or fails with errSyntax, never
// panics, and what parses round-trips: the typed keys printed back as
// node_show would print them parse to the same Properties.
func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{gpuProps(3), cpuProps(5, 4), "", "simd_count 4", "hive_id 18446744073709551615\n",
		"simd_count 4294967296\n", "a b\n", "simd_count 4\nsimd_count 4\n", "\n", "x 0\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseProperties(b)
		if err != nil {
			if !errors.Is(err, errSyntax) {
				t.Fatalf("error %v does not wrap errSyntax", err)
			}
			return
		}
		back := fmt.Sprintf("cpu_cores_count %d\nsimd_count %d\nsimd_per_cu %d\nmem_banks_count %d\ncaches_count %d\nio_links_count %d\n"+
			"p2p_links_count %d\ngfx_target_version %d\nvendor_id %d\ndevice_id %d\nlocation_id %d\ndomain %d\n"+
			"drm_render_minor %d\nhive_id %d\nnum_sdma_engines %d\nnum_sdma_xgmi_engines %d\nunique_id %d\nnum_xcc %d\n",
			p.CPUCoresCount, p.SIMDCount, p.SIMDPerCU, p.MemBanksCount, p.CachesCount, p.IOLinksCount, p.P2PLinksCount,
			p.GFXTargetVersion, p.VendorID, p.DeviceID, p.LocationID, p.Domain, p.DRMRenderMinor, p.HiveID,
			p.NumSDMAEngines, p.NumSDMAXGMIEngines, p.UniqueID, p.NumXCC)
		q, err := parseProperties([]byte(back))
		if err != nil || q != p {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", b, q, err, p)
		}
		_ = p.GFXTarget()
		_, _, _ = p.PCIAddress()
	})
}
