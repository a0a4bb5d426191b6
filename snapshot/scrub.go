package snapshot

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// scrubKey is the fixed key of the scrub hash. It is not a secret: it makes
// fakes stable across snapshots and machines (the same MAC gives the same
// fake MAC in every snapshot), which is what lets a scrubbed snapshot be
// compared with another. See docs/snapshot.md for what that does and does
// not protect.
var scrubKey = []byte("gpuaffinity snapshot scrub v1")

// scrubber replaces identifying values with stable fakes: a keyed hash of the
// original value, formatted like the original.
type scrubber struct{}

// digest is HMAC-SHA256(scrubKey, kind || 0 || value). kind keeps the kinds
// apart: a MAC and a GUID with the same bytes get unrelated fakes.
func digest(kind string, value []byte) []byte {
	m := hmac.New(sha256.New, scrubKey)
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write(value)
	return m.Sum(nil)
}

// file rewrites the contents of a file of scrub kind k. The trailing newline
// the kernel writes is kept.
func (s *scrubber) file(k scrubKind, data []byte) []byte {
	if k == scrubNone {
		return data
	}
	text := string(data)
	if k == scrubUUIDs {
		return []byte(s.uuids(text))
	}
	body := strings.TrimRight(text, "\n")
	tail := text[len(body):]
	var out string
	switch k {
	case scrubAddress:
		out = s.address(body)
	case scrubGUID:
		out = s.guidText(body)
	case scrubGID:
		out = s.gidText(body)
	case scrubHostname:
		out = s.hostname(body)
	case scrubAssetTag:
		out = s.assetTag(body)
	case scrubSerial:
		out = s.serial(body)
	default:
		out = body
	}
	return []byte(out + tail)
}

// mac returns the fake of a 6-byte MAC: the hash's first 6 bytes with the
// locally-administered bit set and the multicast bit clear. All-zero and
// broadcast addresses identify nothing and are kept.
func (s *scrubber) mac(m []byte) []byte {
	if allBytes(m, 0) || allBytes(m, 0xff) {
		return m
	}
	f := digest("mac", m)[:6]
	f[0] = f[0]&^0x01 | 0x02
	return f
}

// guid returns the fake of an 8-byte GUID (node, system image or port
// GUID). Zero is kept.
func (s *scrubber) guid(g []byte) []byte {
	if allBytes(g, 0) {
		return g
	}
	return digest("guid", g)[:8]
}

// address scrubs a netdev hardware address: a MAC, or IPoIB's 20 bytes whose
// last 8 are the port GUID (scrubbed as the GID's lower half is, so the two
// stay consistent). Other lengths are scrubbed digit by digit.
func (s *scrubber) address(text string) string {
	b, ok := parseHexGroups(text, ':', 2)
	if !ok {
		return s.generic("address", text)
	}
	switch len(b) {
	case 6:
		return formatHexGroups(s.mac(b), ':', 1)
	case 20:
		out := append([]byte{}, b[:12]...)
		out = append(out, s.guid(b[12:])...)
		return formatHexGroups(out, ':', 1)
	}
	if allBytes(b, 0) || allBytes(b, 0xff) {
		return text
	}
	return formatHexGroups(digest("address", b)[:len(b)], ':', 1)
}

// guidText scrubs "xxxx:xxxx:xxxx:xxxx".
func (s *scrubber) guidText(text string) string {
	b, ok := parseHexGroups(text, ':', 4)
	if !ok || len(b) != 8 {
		return s.generic("guid", text)
	}
	return formatHexGroups(s.guid(b), ':', 2)
}

// gidText scrubs a GID, 8 groups of 4 hex digits. The upper 64 bits (subnet
// prefix, or IPv6 prefix) are kept. The lower 64 bits are:
//   - kept when zero or when the GID is IPv4-mapped (::ffff:a.b.c.d, a RoCE v2
//     GID whose value is the IP address, not the hardware);
//   - a modified EUI-64 when bytes 3-4 are ff:fe (RoCE's MAC-derived GIDs):
//     the MAC inside is scrubbed as the netdev's address is, so the GID and
//     the address keep matching;
//   - else a port GUID (InfiniBand), scrubbed as node_guid is.
func (s *scrubber) gidText(text string) string {
	b, ok := parseHexGroups(text, ':', 4)
	if !ok || len(b) != 16 {
		return s.generic("gid", text)
	}
	hi, lo := b[:8], b[8:]
	switch {
	case allBytes(lo, 0):
		return text
	case allBytes(hi, 0) && lo[0] == 0 && lo[1] == 0 && lo[2] == 0xff && lo[3] == 0xff:
		return text // IPv4-mapped
	}
	out := append([]byte{}, hi...)
	if lo[3] == 0xff && lo[4] == 0xfe {
		m := s.mac([]byte{lo[0] ^ 0x02, lo[1], lo[2], lo[5], lo[6], lo[7]})
		out = append(out, m[0]^0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5])
	} else {
		out = append(out, s.guid(lo)...)
	}
	return formatHexGroups(out, ':', 2)
}

// uuidRE matches a bare UUID, or an NVIDIA GPU-/MIG- identifier whatever
// its body (a UUID, or a shape this version does not know: "GPU-abc",
// "MIG-GPU-<uuid>/1/0").
var uuidRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(?:GPU|MIG)-[^\s",\\]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
})

// bareUUID is the 8-4-4-4-12 form.
var bareUUID = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
})

// uuids replaces every UUID and GPU-/MIG- identifier in text
// ("GPU-e3344502-c9fc-0416-7091-4a6968e9d3e8" keeps its "GPU-" and gets a
// fake 8-4-4-4-12 body), the same value always by the same fake, in
// nvml.json and in /proc alike. An identifier of another shape gets a fake
// UUID body too: no identifier survives because its shape was unexpected.
func (s *scrubber) uuids(text string) string {
	return uuidRE().ReplaceAllStringFunc(text, func(m string) string {
		prefix, body := "", m
		if i := strings.IndexByte(m, '-'); i == 3 && !bareUUID().MatchString(m) {
			prefix, body = m[:4], m[4:]
		}
		var d []byte
		if bareUUID().MatchString(body) {
			raw, _ := hex.DecodeString(strings.ReplaceAll(strings.ToLower(body), "-", ""))
			d = digest("uuid", raw)
		} else {
			d = digest("uuid-opaque", []byte(body))
		}
		f := hex.EncodeToString(d[:16])
		return prefix + f[0:8] + "-" + f[8:12] + "-" + f[12:16] + "-" + f[16:20] + "-" + f[20:32]
	})
}

// hostname returns "host-" and 12 hex digits of the name's hash; an empty
// name and "localhost" are kept.
func (s *scrubber) hostname(name string) string {
	if name == "" || name == "localhost" {
		return name
	}
	return "host-" + hex.EncodeToString(digest("hostname", []byte(name))[:6])
}

// serial returns the fake of a drive serial number (an NVMe controller's
// or subsystem's serial, up to 20 characters): the same length, each
// letter or digit replaced by an upper-case hex digit of the serial's
// hash, anything else (spaces, dashes) kept. The same serial gets the same
// fake wherever it appears, so a controller and its subsystem still agree.
// An empty serial is kept.
func (s *scrubber) serial(text string) string {
	if strings.TrimSpace(text) == "" {
		return text
	}
	d := strings.ToUpper(hex.EncodeToString(digest("serial", []byte(text))))
	var b strings.Builder
	j := 0
	for _, r := range text {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteByte(d[j%len(d)])
			j++
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// wellKnownAssetTags are chassis asset tags that name a cloud, not a machine.
var wellKnownAssetTags = map[string]bool{
	"7783-7084-3265-9085-8269-3286-77": true, // Azure
	"OracleCloud.com":                  true, // OCI
}

// placeholderAssetTags are what firmware writes when nobody set a tag.
var placeholderAssetTags = map[string]bool{
	"": true, "default string": true, "to be filled by o.e.m.": true, "not specified": true,
	"no asset tag": true, "none": true, "n/a": true, "na": true, "unknown": true,
	"chassis asset tag": true, "asset tag": true, "0": true, "00000000": true,
}

// assetTag keeps a well-known or placeholder tag, and one that does not look
// like a serial ("Amazon EC2", "Google"); a serial-looking tag becomes
// "asset-<hex>".
func (s *scrubber) assetTag(tag string) string {
	t := strings.TrimSpace(tag)
	if wellKnownAssetTags[t] || placeholderAssetTags[strings.ToLower(t)] || !looksLikeSerial(t) {
		return tag
	}
	return "asset-" + hex.EncodeToString(digest("asset", []byte(t))[:6])
}

// looksLikeSerial: three digits or more ("ASSET-4711", "CZ2D3F4G"), or a
// single word of five characters or more with a digit ("SN7A1X"). Prose with
// a digit or two ("Amazon EC2") is not a serial.
func looksLikeSerial(t string) bool {
	digits := 0
	for _, r := range t {
		if r >= '0' && r <= '9' {
			digits++
		}
	}
	return digits >= 3 || (digits > 0 && len(t) >= 5 && !strings.ContainsAny(t, " \t"))
}

// generic scrubs a value of unexpected shape: every hex digit is replaced by
// one of the hash's, everything else is kept, so the shape survives and the
// value does not.
func (s *scrubber) generic(kind, text string) string {
	d := hex.EncodeToString(digest(kind, []byte(text)))
	var b strings.Builder
	j := 0
	for _, r := range text {
		if strings.ContainsRune("0123456789abcdefABCDEF", r) {
			b.WriteByte(d[j%len(d)])
			j++
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// parseHexGroups parses sep-separated groups of exactly width hex digits.
func parseHexGroups(text string, sep byte, width int) ([]byte, bool) {
	groups := strings.Split(text, string(sep))
	var out []byte
	for _, g := range groups {
		if len(g) != width {
			return nil, false
		}
		for i := 0; i < width; i += 2 {
			v, err := strconv.ParseUint(g[i:i+2], 16, 8)
			if err != nil {
				return nil, false
			}
			out = append(out, byte(v))
		}
	}
	return out, true
}

// formatHexGroups writes b as lower-case hex, bytesPerGroup bytes a group.
func formatHexGroups(b []byte, sep byte, bytesPerGroup int) string {
	var sb strings.Builder
	for i := 0; i < len(b); i += bytesPerGroup {
		if i > 0 {
			sb.WriteByte(sep)
		}
		fmt.Fprintf(&sb, "%x", b[i:i+bytesPerGroup])
	}
	return sb.String()
}

// allBytes reports whether every byte of b is v.
func allBytes(b []byte, v byte) bool {
	for _, c := range b {
		if c != v {
			return false
		}
	}
	return true
}
