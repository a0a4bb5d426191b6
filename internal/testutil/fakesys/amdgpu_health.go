// The amdgpu health counters (RAS, PCIe replays, XGMI) and amdkfd's
// peer-memory client.

package fakesys

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// writeAMDHealth writes each GPU's health counters under its function:
// ras/<block>_err_count ("ue: %lu\nce: %lu\n", umc with a "de: %lu"
// line; amdgpu_ras.c amdgpu_ras_sysfs_read) for the target's blocks,
// ras/features ("feature mask: 0x%x\n", amdgpu_ras_sysfs_features_read:
// the written blocks' bits and the socket id, taken to be the XGMI
// physical id, in bits 31:29), pcie_replay_count ("%llu\n",
// amdgpu_device_get_pcie_replay_count) and, for a hive member,
// xgmi_num_links (one "%02x " per hive node, the GPU itself 0, then a
// newline; amdgpu_xgmi_show_num_links) and xgmi_error ("%u\n",
// amdgpu_xgmi_show_error). A direct peer has one link (the 8-OAM MI300X
// board: 7 x16 links per GPU, one to each peer; KFD's max_bandwidth of
// the XGMI io_link is num_links x the one link's).
func (b *builder) writeAMDHealth(gpus []*amdGPUNode) {
	t := b.t
	for _, g := range gpus {
		if g.part != 0 {
			continue // the function's counters, written once
		}
		a := g.dev.AMDGPU
		var mask uint32
		for _, blk := range a.layout().ras {
			if blk.name == "xgmi_wafl" && g.hive == 0 {
				continue
			}
			c := a.RAS[blk.name]
			body := fmt.Sprintf("ue: %d\nce: %d\n", c.UE, c.CE)
			if blk.name == "umc" {
				body += fmt.Sprintf("de: %d\n", c.DE)
			}
			t.raw(g.dir+"/ras/"+blk.name+"_err_count", []byte(body))
			mask |= 1 << blk.bit
		}
		if g.hive != 0 {
			mask |= uint32(g.physID&7) << rasFeaturesSocketShift
		}
		t.raw(g.dir+"/ras/features", []byte(fmt.Sprintf("feature mask: 0x%x\n", mask)))
		// amdgpu_device_attr_sysfs_init leaves pcie_replay_count out on an
		// SR-IOV VF (amdgpu_sriov_vf): the MI300X VF a VM sees (1002:74b5).
		if !g.dev.Virtual && !strings.EqualFold(g.dev.Device, "0x74b5") {
			t.attr(g.dir+"/pcie_replay_count", strconv.FormatUint(a.PCIeReplayCount, 10))
		}
		if g.hive == 0 {
			continue
		}
		var w strings.Builder
		for q := range g.hiveSize {
			n := 0
			if g.hops[q] == 1 {
				n = 1
			}
			fmt.Fprintf(&w, "%02x ", n)
		}
		w.WriteString("\n")
		t.raw(g.dir+"/xgmi_num_links", []byte(w.String()))
		t.attr(g.dir+"/xgmi_error", strconv.FormatUint(a.XGMIError, 10))
	}
}

// peerMemoryDir is where ib_peer_mem keeps its clients (peer_mem.c:
// "memory_peers" under mm_kobj).
const peerMemoryDir = "sys/kernel/mm/memory_peers"

// writePeerMemory writes amdkfd's peer-memory client (kfd_peerdirect.c
// registers "amdkfd" with ib_register_peer_memory_client; peer_mem.c
// gives it version, "%s\n", and its counters, "%llu\n") where the kernel
// spec has one: by default where modules has amdgpu.
func (b *builder) writePeerMemory() {
	k := b.s.Kernel
	v := ""
	if slices.Contains(k.Modules, "amdgpu") {
		v = amdPeerMemoryVersion
	}
	if k.AMDPeerMemory != nil {
		v = *k.AMDPeerMemory
	}
	if v == "" {
		return
	}
	d := peerMemoryDir + "/amdkfd"
	b.t.attr(d+"/version", v)
	for _, c := range []string{"num_alloc_mrs", "num_dealloc_mrs", "num_reg_pages", "num_dereg_pages",
		"num_reg_bytes", "num_dereg_bytes", "num_free_callbacks"} {
		b.t.attr(d+"/"+c, "0")
	}
}
