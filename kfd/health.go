package kfd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// Sources of the formats below (the kernel's sysfs show functions):
//   - RAS: ROCm/amdgpu@0409dc7a92281e67cea3f0f2a4686229144e20c4
//     drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c amdgpu_ras_sysfs_read,
//     amdgpu_ras_sysfs_features_read, amdgpu_ras_init (socket id in
//     the feature mask); the "de" line: "drm/amdgpu: Show deferred
//     error count for UMC sysfs node" (amd-gfx, Stanley Yang).
//   - XGMI: ROCm/amdgpu@011c9aff8ada0c246554644738117e5213af7bfd
//     drivers/gpu/drm/amd/amdgpu/amdgpu_xgmi.c amdgpu_xgmi_show_num_links,
//     amdgpu_xgmi_show_error, amdgpu_xgmi_sysfs_add_dev_info.
//   - PCIe replays: drivers/gpu/drm/amd/amdgpu/amdgpu_device.c
//     amdgpu_device_get_pcie_replay_count (DOC: pcie_replay_count).
//   - Peer memory: ROCm/ROCK-Kernel-Driver@006174f66246cc786e12f8f19c6be0483a3e8b04
//     drivers/gpu/drm/amd/amdkfd/kfd_peerdirect.c; Mellanox/nic-kernel@258b12833a7a1d12e07b41fac8bf84a7f58ab097
//     drivers/infiniband/core/peer_mem.c version_show; ROCm/rccl@0cbce2a
//     src/transport/net_ib.cc ncclIbGdrSupport (l.568 on).

// Health is what amdgpu's sysfs says of a GPU's health, under its PCI
// function (sys/bus/pci/devices/<address>): the RAS error counts of its
// IP blocks, the PCIe replay count and the XGMI links the XGMI TA found.
// A field whose file the device lacks stays nil: RAS where there is no
// ras/ directory (RAS off, a consumer GPU), XGMINumLinks on a GPU in no
// hive or a kernel before xgmi_num_links, PCIeReplayCount on an SR-IOV
// VF (amdgpu_device_attr_sysfs_init skips it there).
//
// Reading a RAS counter makes amdgpu query the hardware (on MI300 the
// SMU's ACA banks), a few sysfs reads per GPU and block: cheap next to a
// scrape interval, not free.
//
// It does not hold xgmi_error: reading that file clears the counter
// (see ReadXGMIError), so the topology reader leaves it alone.
type Health struct {
	// RAS are ras/<block>_err_count, one per block amdgpu created a
	// counter for, sorted by Block; empty (not nil) where ras/ holds
	// none that read. A file amdgpu answers "Query currently
	// inaccessible" for, or that does not parse, is left out with an
	// error (ErrRASInaccessible, or a syntax error).
	RAS []RASCount
	// RASFeatures is ras/features, "feature mask: 0x%x": bit n set for
	// RAS block n of amdgpu's ras_block_string[] (0 umc, 1 sdma, 2 gfx,
	// 3 mmhub, 4 athub, 5 pcie_bif, 6 hdp, 7 xgmi_wafl, 8 df, ...) that
	// amdgpu enabled; since the ACA/MI300 kernels amdgpu_ras_init also
	// packs the GPU's socket id into bits 31:29
	// (AMDGPU_RAS_FEATURES_SOCKETID_SHIFT). nil where absent.
	RASFeatures *uint32
	// XGMINumLinks is xgmi_num_links: the number of XGMI links the XGMI
	// TA found to each node of the GPU's hive, in the TA's node order,
	// the GPU itself included (amdgpu_xgmi_add_device lists every
	// device of the hive; taken to count 0 links to itself). The order
	// is that of the hive's device list, the order the GPUs joined it,
	// which is that of xgmi_hive_info/node1..N (inference: both follow
	// hive->number_devices). A peer with 0 is reached only through
	// other GPUs: a direct link did not train or is not there. On the
	// 8-OAM MI300X board every peer has 1 (seven x16 links per GPU,
	// one to each peer). nil where absent.
	XGMINumLinks []uint8
	// PCIeReplayCount is pcie_replay_count: the NAKs the GPU's PCIe
	// port generated plus those it received since boot
	// (amdgpu_device_get_pcie_replay_count, "%llu"). nil where absent.
	PCIeReplayCount *uint64
}

// XGMILinkedPeers counts the hive nodes XGMINumLinks gives at least one
// link to, and the links in all.
func (h Health) XGMILinkedPeers() (peers, links int) {
	for _, n := range h.XGMINumLinks {
		if n > 0 {
			peers++
			links += int(n)
		}
	}
	return peers, links
}

// RASCount is one ras/<block>_err_count file. amdgpu writes "ue: %lu"
// and "ce: %lu" lines, and for the UMC block a "de: %lu" line too on
// kernels that count deferred errors (amdgpu_ras.c
// amdgpu_ras_sysfs_read). The counts are amdgpu's running totals since
// the driver loaded: reading a file resets the block's hardware status
// registers, not the totals, so it takes nothing from other readers.
type RASCount struct {
	Block string // "umc", "sdma", "gfx", "mmhub", "pcie_bif", "hdp", "xgmi_wafl", ...
	UE    uint64 // uncorrectable errors
	CE    uint64 // corrected errors
	// DE is the deferred (poisoned, not yet consumed) errors where the
	// file has a de line; nil where it has none.
	DE *uint64
}

// ErrRASInaccessible is wrapped when amdgpu answers a RAS error count
// with "Query currently inaccessible": it refuses queries until RAS is
// ready and while the GPU resets (amdgpu_ras_get_error_query_ready).
var ErrRASInaccessible = errors.New("amdgpu cannot query RAS errors now (\"Query currently inaccessible\": RAS not ready or the GPU in reset)")

// errHealthSyntax is wrapped by every parse error of a health file.
var errHealthSyntax = errors.New("not amdgpu's format")

// Bounds on a PCI function's ras/ directory (ras_block_string has
// about 20 names; features, gpu_vram_bad_pages, version, schema and aca_* files
// sit beside them) and on an XGMI hive (TA_XGMI__MAX_CONNECTED_NODES is
// 64).
const (
	maxRASEntries = 128
	maxHiveNodes  = 64
)

// ReadHealth reads the health counters of the GPU at addr (under
// sys/bus/pci/devices): what ReadTopology puts in DRM.Health, for a
// caller that has the address but not the KFD node (a CPX partition
// whose first node the device cgroup hides). It returns nil and no
// error where the function has none of the files, and an error wrapping
// fs.ErrNotExist where the function itself does not exist.
func ReadHealth(root *rootfs.Root, addr pci.Address) (*Health, []error) {
	dev := path.Join(pci.BusDir, addr.String())
	if _, err := root.Stat(dev); err != nil {
		return nil, []error{err}
	}
	return readHealth(root, dev)
}

// healthFiles are the attributes readHealth looks at (besides ras/).
const (
	rasDir          = "ras"
	rasFeatures     = "ras/features"
	rasSuffix       = "_err_count"
	xgmiNumLinks    = "xgmi_num_links"
	pcieReplayCount = "pcie_replay_count"
	xgmiError       = "xgmi_error"
)

// readHealth reads the health files of the PCI function dev (a path
// relative to the root); nil where it has none of them. errs name the
// file.
func readHealth(r fsys, dev string) (*Health, []error) {
	hr := &healthReader{r: r, dev: dev}
	var h Health
	h.RAS = hr.ras()
	if b, ok := hr.read(rasFeatures); ok {
		if v, err := parseRASFeatures(b); err != nil {
			hr.bad(rasFeatures, err)
		} else {
			h.RASFeatures = &v
		}
	}
	if b, ok := hr.read(xgmiNumLinks); ok {
		if v, err := parseXGMINumLinks(b); err != nil {
			hr.bad(xgmiNumLinks, err)
		} else {
			h.XGMINumLinks = v
		}
	}
	if b, ok := hr.read(pcieReplayCount); ok {
		if v, err := parseCount(b); err != nil {
			hr.bad(pcieReplayCount, err)
		} else {
			h.PCIeReplayCount = &v
		}
	}
	if !hr.found {
		return nil, hr.errs
	}
	return &h, hr.errs
}

// healthReader reads one PCI function's health files, gathering errors
// and whether any file was there at all.
type healthReader struct {
	r     fsys
	dev   string
	errs  []error
	found bool
}

// fail records err (not a missing file) on rel; EPERM wraps ErrDenied.
func (hr *healthReader) fail(rel string, err error) {
	hr.found = true
	if errors.Is(err, syscall.EPERM) {
		err = fmt.Errorf("%w (amdgpu's %s answered EPERM): %w", ErrDenied, rel, err)
	}
	hr.errs = append(hr.errs, err)
}

// read is one bounded attribute; false without an error where the file
// does not exist.
func (hr *healthReader) read(rel string) ([]byte, bool) {
	b, err := hr.r.ReadFile(path.Join(hr.dev, rel), maxAttr)
	switch {
	case err == nil:
		hr.found = true
		return b, true
	case errors.Is(err, fs.ErrNotExist):
	default:
		hr.fail(rel, err)
	}
	return nil, false
}

func (hr *healthReader) bad(rel string, err error) {
	hr.errs = append(hr.errs, fmt.Errorf("parse %s: %w", hr.r.Path(path.Join(hr.dev, rel)), err))
}

// ras lists ras/ and reads each <block>_err_count in name order; nil
// where there is no ras/.
func (hr *healthReader) ras() []RASCount {
	dir := path.Join(hr.dev, rasDir)
	ents, err := hr.r.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		hr.fail(rasDir, err)
		return nil
	}
	hr.found = true
	var blocks []string
	for _, e := range ents {
		if b, ok := strings.CutSuffix(e.Name(), rasSuffix); ok {
			if !validBlock(b) {
				hr.errs = append(hr.errs, fmt.Errorf("%s: %q is not a RAS block's counter", hr.r.Path(dir), e.Name()))
				continue
			}
			blocks = append(blocks, b)
		}
	}
	slices.Sort(blocks)
	if len(blocks) > maxRASEntries {
		hr.errs = append(hr.errs, fmt.Errorf("%s: %d RAS counters, more than %d; the rest are not read", hr.r.Path(dir), len(blocks), maxRASEntries))
		blocks = blocks[:maxRASEntries]
	}
	out := []RASCount{}
	for _, b := range blocks {
		rel := path.Join(rasDir, b+rasSuffix)
		data, ok := hr.read(rel)
		if !ok {
			continue
		}
		c, err := parseRAS(data)
		if err != nil {
			hr.bad(rel, err)
			continue
		}
		c.Block = b
		out = append(out, c)
	}
	return out
}

// validBlock accepts a RAS block name as ras_block_string spells them:
// lower-case letters, digits and underscores ("xgmi_wafl", "mp0").
func validBlock(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// parseRAS reads one <block>_err_count: "ue: N" and "ce: N" lines and
// at most one "de: N", each once, in any order (amdgpu writes ue, ce,
// de). "Query currently inaccessible" is ErrRASInaccessible; anything
// else that is not this format wraps errHealthSyntax. Block is left "".
func parseRAS(b []byte) (RASCount, error) {
	var c RASCount
	if bytes.HasPrefix(b, []byte("Query currently inaccessible")) {
		return c, ErrRASInaccessible
	}
	var seen [3]bool // ue, ce, de
	rest := b
	for n := 1; len(rest) > 0; n++ {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if n > 3 {
			return RASCount{}, fmt.Errorf("more than 3 lines: %w", errHealthSyntax)
		}
		k, v, ok := bytes.Cut(line, []byte(": "))
		if !ok || !validNumber(v) {
			return RASCount{}, fmt.Errorf("line %d %q is not \"ue|ce|de: count\": %w", n, clip(line), errHealthSyntax)
		}
		val, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return RASCount{}, fmt.Errorf("line %d: %q out of range: %w", n, clip(v), errHealthSyntax)
		}
		var i int
		switch string(k) {
		case "ue":
			i, c.UE = 0, val
		case "ce":
			i, c.CE = 1, val
		case "de":
			i, c.DE = 2, &val
		default:
			return RASCount{}, fmt.Errorf("line %d %q is not \"ue|ce|de: count\": %w", n, clip(line), errHealthSyntax)
		}
		if seen[i] {
			return RASCount{}, fmt.Errorf("line %d: %s twice: %w", n, k, errHealthSyntax)
		}
		seen[i] = true
	}
	if !seen[0] || !seen[1] {
		return RASCount{}, fmt.Errorf("%q has no ue or no ce line: %w", clip(b), errHealthSyntax)
	}
	return c, nil
}

// parseRASFeatures reads ras/features: "feature mask: 0x%x\n"
// (amdgpu_ras_sysfs_features_read).
func parseRASFeatures(b []byte) (uint32, error) {
	s := strings.TrimSuffix(string(b), "\n")
	hex, ok := strings.CutPrefix(s, "feature mask: 0x")
	if !ok || hex == "" || len(hex) > 8 || strings.ContainsFunc(hex, func(c rune) bool {
		return !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f')
	}) {
		return 0, fmt.Errorf("%q is not \"feature mask: 0x<hex>\": %w", clip(b), errHealthSyntax)
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", clip(b), errHealthSyntax)
	}
	return uint32(v), nil
}

// parseXGMINumLinks reads xgmi_num_links: one "%02x " per node of the
// hive, then a newline (amdgpu_xgmi_show_num_links).
func parseXGMINumLinks(b []byte) ([]uint8, error) {
	fields := strings.Fields(string(b))
	if len(fields) > maxHiveNodes {
		return nil, fmt.Errorf("%d nodes, more than an XGMI hive's %d: %w", len(fields), maxHiveNodes, errHealthSyntax)
	}
	out := make([]uint8, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.ParseUint(f, 16, 8)
		if err != nil || len(f) > 2 || f[0] == '+' {
			return nil, fmt.Errorf("%q is not a two-digit hex link count: %w", clip([]byte(f)), errHealthSyntax)
		}
		out = append(out, uint8(v))
	}
	return out, nil
}

// parseCount reads a "%llu\n" or "%u\n" counter.
func parseCount(b []byte) (uint64, error) {
	s := strings.TrimSuffix(string(b), "\n")
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || !validNumber([]byte(s)) {
		return 0, fmt.Errorf("%q is not a decimal count: %w", clip(b), errHealthSyntax)
	}
	return v, nil
}

// ReadXGMIError reads xgmi_error of the GPU at addr: the XGMI link
// errors its data fabric's PIE status register counts (0, 1 or 2 per
// read). amdgpu clears the register as it answers (set_fica after
// get_fica, amdgpu_xgmi.c amdgpu_xgmi_show_error), so every read takes
// the count from whoever reads next, AMD's own tools included:
// ReadTopology never reads it, and a caller should read it only when
// asked (an explicit check or an opted-in exporter) and add up what it
// reads itself.
//
// A GPU whose data fabric has no FICA access answers EINVAL; that gives
// an error wrapping errors.ErrUnsupported. DF 4.3 (df_v4_3_funcs,
// added with the MI300 bring-up) has none, so expect this on MI300-class
// GPUs (inference: the kernel's DF table, not a capture). A GPU in no
// hive has no file: an error wrapping fs.ErrNotExist. EPERM wraps
// ErrDenied.
func ReadXGMIError(root *rootfs.Root, addr pci.Address) (uint64, error) {
	return readXGMIError(root, path.Join(pci.BusDir, addr.String(), xgmiError))
}

func readXGMIError(r fsys, rel string) (uint64, error) {
	b, err := r.ReadFile(rel, maxAttr)
	switch {
	case errors.Is(err, syscall.EINVAL):
		return 0, fmt.Errorf("%w: amdgpu cannot read this GPU's XGMI error counter (EINVAL: its data fabric has no FICA access): %w", errors.ErrUnsupported, err)
	case errors.Is(err, syscall.EPERM):
		return 0, fmt.Errorf("%w (amdgpu's xgmi_error answered EPERM): %w", ErrDenied, err)
	case err != nil:
		return 0, err
	}
	v, err := parseCount(b)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", r.Path(rel), err)
	}
	return v, nil
}

// PeerMemoryPaths are where the amdkfd peer-memory client's version
// file is found, in the order RCCL looks (ROCm/rccl src/transport/
// net_ib.cc ncclIbGdrSupport): ib_peer_mem makes memory_peers under
// /sys/kernel/mm (MLNX OFED's drivers/infiniband/core/peer_mem.c), some
// builds elsewhere.
var PeerMemoryPaths = []string{
	"sys/kernel/mm/memory_peers/amdkfd/version",
	"sys/kernel/memory_peers/amdkfd/version",
	"sys/memory_peers/amdkfd/version",
}

// PeerMemory reports whether amdkfd is registered as a peer-memory
// client of the RDMA stack, the PeerDirect path GPUDirect RDMA takes
// without DMA-BUF: kfd_peerdirect.c registers "amdkfd", version "1.0",
// with ib_register_peer_memory_client, and peer_mem.c writes the version
// ("%s\n") under memory_peers/amdkfd. ok is set when one of
// PeerMemoryPaths exists, as RCCL decides (access F_OK); version is the
// file's line. A file that exists but does not read gives ok and an
// error naming it.
//
// amdkfd registers the first time a process opens the GPU
// (kfd_init_peer_direct runs when an HSA process is created), and only
// where the RDMA stack exports ib_register_peer_memory_client (MLNX OFED;
// not the kernel's own ib_core): no file on a host no ROCm process has
// run on yet, nor on an inbox RDMA stack, where RCCL uses DMA-BUF
// instead. RCCL also accepts that symbol in /proc/kallsyms; this does
// not look there.
func PeerMemory(root *rootfs.Root) (version string, ok bool, err error) {
	return peerMemory(root)
}

func peerMemory(r fsys) (string, bool, error) {
	for _, p := range PeerMemoryPaths {
		b, err := r.ReadFile(p, maxAttr)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return "", true, err
		}
		v := strings.TrimSuffix(string(b), "\n")
		if v == "" || len(v) > 64 || strings.ContainsFunc(v, func(c rune) bool { return c < ' ' || c > '~' }) {
			return "", true, fmt.Errorf("parse %s: %q is not a peer-memory version: %w", r.Path(p), clip(b), errHealthSyntax)
		}
		return v, true, nil
	}
	return "", false, nil
}
