package snapshot

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	gpunvml "github.com/gpuaffinity/gpuaffinity/nvml"
)

func TestScrubSnapshot(t *testing.T) {
	f := buildFakeRoot(t)
	_, plain, _ := snapshotWithFaults(t, Options{Root: f.dir})
	_, scrubbed, _ := snapshotWithFaults(t, Options{Root: f.dir, Scrub: true})
	read := func(p string) string {
		t.Helper()
		v, ok := scrubbed[p]
		if !ok || !strings.HasPrefix(v, "f:") {
			t.Fatalf("%s: not a file in the scrubbed snapshot (%q)", p, v)
		}
		return strings.TrimSuffix(strings.TrimPrefix(v, "f:"), "\n")
	}

	// The netdev's MAC: a locally administered unicast fake.
	mac := read(pciNIC + "/net/eth2/address")
	macBytes, ok := parseHexGroups(mac, ':', 2)
	if !ok || len(macBytes) != 6 || mac == fakeMAC {
		t.Fatalf("eth2 address %q: want a fake xx:xx:xx:xx:xx:xx MAC", mac)
	}
	if macBytes[0]&0x02 == 0 || macBytes[0]&0x01 != 0 {
		t.Errorf("fake MAC %s: want locally administered, unicast", mac)
	}
	// The RoCE GID derived from that MAC carries the same fake MAC.
	eui := []byte{macBytes[0] ^ 0x02, macBytes[1], macBytes[2], 0xff, 0xfe, macBytes[3], macBytes[4], macBytes[5]}
	if got, want := read(rdmaDev+"/ports/1/gids/0"), "fe80:0000:0000:0000:"+formatHexGroups(eui, ':', 2); got != want {
		t.Errorf("RoCE GID 0 = %s, want %s (EUI-64 of the fake MAC %s)", got, want, mac)
	}
	// The IB port GID and the IPoIB address carry the same fake port GUID.
	ipoib, _ := parseHexGroups(read(pciNIC+"/net/ib0/address"), ':', 2)
	ibGID, _ := parseHexGroups(read(rdmaDev+"/ports/2/gids/0"), ':', 4)
	if len(ipoib) != 20 || len(ibGID) != 16 || !bytes.Equal(ipoib[12:], ibGID[8:]) {
		t.Errorf("IPoIB address % x and IB GID % x: want the same fake port GUID", ipoib, ibGID)
	}
	// Node and system image GUIDs: same original, same fake.
	guidRE := regexp.MustCompile(`^[0-9a-f]{4}(:[0-9a-f]{4}){3}$`)
	node, img := read(rdmaDev+"/node_guid"), read(rdmaDev+"/sys_image_guid")
	if !guidRE.MatchString(node) || node != img || node == fakeNodeGUID {
		t.Errorf("node_guid %q sys_image_guid %q: want one fake GUID for both", node, img)
	}
	if h := read("proc/sys/kernel/hostname"); !regexp.MustCompile(`^host-[0-9a-f]{12}$`).MatchString(h) {
		t.Errorf("hostname %q: want host-<12 hex>", h)
	}
	if a := read("sys/devices/virtual/dmi/id/chassis_asset_tag"); !strings.HasPrefix(a, "asset-") {
		t.Errorf("chassis_asset_tag %q: want a fake", a)
	}
	// GPU UUID: one fake in nvml.json and in /proc.
	var nf gpunvml.ReplayFile
	if err := json.Unmarshal([]byte(read("nvml.json")), &nf); err != nil {
		t.Fatalf("nvml.json: %v", err)
	}
	uuid := nf.Devices[0].UUID.Value
	if !regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(uuid) || uuid == fakeUUID {
		t.Errorf("nvml.json UUID %q: want a fake GPU-8-4-4-4-12", uuid)
	}
	if info := read("proc/driver/nvidia/gpus/0000:04:00.0/information"); !strings.Contains(info, "GPU UUID: \t "+uuid+"\n") {
		t.Errorf("information %q: want the nvml.json fake UUID %s", info, uuid)
	}

	// Only the scrubbed files differ; the rest is byte for byte the same.
	wantChanged := []string{
		"nvml.json",
		"proc/driver/nvidia/gpus/0000:04:00.0/information",
		"proc/sys/kernel/hostname",
		pciNIC + "/net/eth2/address",
		pciNIC + "/net/ib0/address",
		rdmaDev + "/node_guid",
		rdmaDev + "/ports/1/gids/0",
		rdmaDev + "/ports/2/gids/0",
		rdmaDev + "/sys_image_guid",
		"sys/devices/virtual/dmi/id/chassis_asset_tag",
	}
	var changed []string
	for p, v := range plain {
		if scrubbed[p] != v {
			changed = append(changed, p)
		}
	}
	if len(scrubbed) != len(plain) {
		t.Errorf("scrubbed snapshot has %d entries, plain %d", len(scrubbed), len(plain))
	}
	slices.Sort(changed)
	slices.Sort(wantChanged)
	if diff := cmp.Diff(wantChanged, changed); diff != "" {
		t.Errorf("changed files (-want +got):\n%s", diff)
	}

	// No original identifier anywhere, in any spelling.
	originals := []string{
		fakeMAC, strings.ReplaceAll(fakeMAC, ":", ""), strings.ReplaceAll(fakeMAC, ":", "-"),
		"0e42:a1ff:fe11:2233", fakeNodeGUID, strings.ReplaceAll(fakeNodeGUID, ":", ""), fakePortGUID,
		"0c:42:a1:03:00:11:22:34", fakeUUID[4:], fakeHostname, "gpu-node-17", fakeAsset,
	}
	for p, v := range scrubbed {
		for _, o := range originals {
			if strings.Contains(strings.ToLower(v), strings.ToLower(o)) {
				t.Errorf("%s still holds %q", p, o)
			}
		}
	}
}

func TestScrubIsDeterministic(t *testing.T) {
	f := buildFakeRoot(t)
	var a, b bytes.Buffer
	if _, err := WriteTarGz(Options{Root: f.dir, Scrub: true}, &a); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteTarGz(Options{Root: f.dir, Scrub: true}, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two scrubbed snapshots of one root differ")
	}
}

func TestScrubValues(t *testing.T) {
	s := &scrubber{}
	fake := s.address("0c:42:a1:11:22:33")
	tests := []struct {
		name string
		got  string
		want string // "" means: must differ from in, see check
		in   string
	}{
		// All-zero and broadcast identify nothing.
		{name: "zero MAC kept", got: s.address("00:00:00:00:00:00"), want: "00:00:00:00:00:00"},
		{name: "broadcast kept", got: s.address("ff:ff:ff:ff:ff:ff"), want: "ff:ff:ff:ff:ff:ff"},
		{name: "MAC stable", got: s.address("0c:42:a1:11:22:33"), want: fake},
		{name: "MAC case-insensitive", got: s.address("0C:42:A1:11:22:33"), want: fake},
		// A GID's EUI-64 maps through the same MAC fake.
		{name: "RoCE GID follows MAC", got: s.gidText("fe80:0000:0000:0000:0e42:a1ff:fe11:2233"),
			want: "fe80:0000:0000:0000:" + eui64(t, fake)},
		// A global IPv6 prefix is kept, the interface id scrubbed.
		{name: "RoCE global GID", got: s.gidText("2001:0db8:0000:0001:0e42:a1ff:fe11:2233"),
			want: "2001:0db8:0000:0001:" + eui64(t, fake)},
		// IPv4-mapped RoCE v2 GIDs carry an IP address, not hardware.
		{name: "IPv4-mapped kept", got: s.gidText("0000:0000:0000:0000:0000:ffff:0a00:0001"), want: "0000:0000:0000:0000:0000:ffff:0a00:0001"},
		{name: "zero GID kept", got: s.gidText("0000:0000:0000:0000:0000:0000:0000:0000"), want: "0000:0000:0000:0000:0000:0000:0000:0000"},
		// An IB GID's lower half is a port GUID, scrubbed as node_guid is.
		{name: "IB GID follows GUID", got: s.gidText("fe80:0000:0000:0000:0c42:a103:0011:2234")[20:], want: s.guidText("0c42:a103:0011:2234")},
		{name: "zero GUID kept", got: s.guidText("0000:0000:0000:0000"), want: "0000:0000:0000:0000"},
		{name: "UUID prefix kept", got: s.uuids("MIG-e3344502-c9fc-0416-7091-4a6968e9d3e8")[:4], want: "MIG-"},
		{name: "UUID same in any case", got: s.uuids("GPU-E3344502-C9FC-0416-7091-4A6968E9D3E8"), want: s.uuids("GPU-e3344502-c9fc-0416-7091-4a6968e9d3e8")},
		{name: "localhost kept", got: s.hostname("localhost"), want: "localhost"},
		// Asset tags naming a cloud, or unset, are kept.
		{name: "Azure asset tag kept", got: s.assetTag("7783-7084-3265-9085-8269-3286-77"), want: "7783-7084-3265-9085-8269-3286-77"},
		{name: "OCI asset tag kept", got: s.assetTag("OracleCloud.com"), want: "OracleCloud.com"},
		{name: "AWS asset tag kept", got: s.assetTag("Amazon EC2"), want: "Amazon EC2"},
		{name: "GCP asset tag kept", got: s.assetTag("Google"), want: "Google"},
		{name: "placeholder kept", got: s.assetTag("Default string"), want: "Default string"},
		{name: "O.E.M. placeholder kept", got: s.assetTag("To Be Filled By O.E.M."), want: "To Be Filled By O.E.M."},
		// Values that must change, in their format.
		{name: "serial asset tag", got: s.assetTag("ASSET-4711"), in: "ASSET-4711"},
		{name: "one-word serial asset tag", got: s.assetTag("SN7A1X"), in: "SN7A1X"},
		{name: "hostname", got: s.hostname("gpu-node-17"), in: "gpu-node-17"},
		{name: "unparseable GUID", got: s.guidText("0c42a10300112233"), in: "0c42a10300112233"},
		{name: "8-byte address", got: s.address("01:02:03:04:05:06:07:08"), in: "01:02:03:04:05:06:07:08"},
		{name: "drive serial", got: s.serial("S4YPNA0T123456"), in: "S4YPNA0T123456"},
		// An unset serial identifies nothing.
		{name: "blank serial kept", got: s.serial("    "), want: "    "},
	}
	// A serial keeps its length and separators, and its fake is stable.
	if a, b := s.serial("BTLJ-1234 5678"), s.serial("BTLJ-1234 5678"); a != b || len(a) != 14 || a[4] != '-' || a[9] != ' ' || a == "BTLJ-1234 5678" {
		t.Errorf("serial(%q) = %q, %q: want one stable fake with the dash and space kept", "BTLJ-1234 5678", a, b)
	}
	// Identifiers of a shape the UUID form does not have still go, each
	// replaced by a GPU-/MIG- fake of UUID form.
	for in, gone := range map[string]string{
		`"uuid": "GPU-abc123"`:                             "abc123",
		"MIG-GPU-e3344502-c9fc-0416-7091-4a6968e9d3e8/1/0": "e3344502",
		"GPU-12345-67890-abcde":                            "12345",
	} {
		got := s.uuids(in)
		if strings.Contains(got, gone) || !regexp.MustCompile(`(GPU|MIG)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`).MatchString(got) {
			t.Errorf("uuids(%q) = %q: %q survives or no fake", in, got, gone)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want != "" && tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
			if tc.in != "" && (tc.got == tc.in || len(tc.got) == 0) {
				t.Errorf("got %q, want a fake of %q", tc.got, tc.in)
			}
		})
	}
	if len(fake) != 17 || fake == "0c:42:a1:11:22:33" {
		t.Errorf("fake MAC %q", fake)
	}
}

// eui64 is the modified EUI-64 interface id of a MAC, as a GID's lower
// four groups.
func eui64(t *testing.T, mac string) string {
	t.Helper()
	m, ok := parseHexGroups(mac, ':', 2)
	if !ok || len(m) != 6 {
		t.Fatalf("bad MAC %q", mac)
	}
	return formatHexGroups([]byte{m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]}, ':', 2)
}
