// The ids amdgpu gives a GPU: DRM minors, XGMI device and physical
// ids, and the hops between hive members.

package fakesys

import (
	"hash/fnv"
)

// amdDRM is a GPU's DRM minors: the primary (card) and render minors of
// its own device, then of its spare XCP devices.
type amdDRM struct{ card, render, nodes int }

// amdMinors is GPU index's DRM minors; by default each GPU takes the
// minors after those of the GPUs of lower index, as probing assigns them.
func amdMinors(ents []amdEntry, index int) amdDRM {
	base := 0
	for _, e := range ents {
		g := e.dev.AMDGPU
		n := max(g.DRMNodes, 1)
		if g.Index == index {
			m := amdDRM{card: base, render: 128 + base, nodes: n}
			if g.RenderMinor != nil {
				m.render = *g.RenderMinor
				m.card = *g.RenderMinor - 128
			}
			if g.Card != nil {
				m.card = *g.Card
			}
			return m
		}
		base += n
	}
	return amdDRM{}
}

// xgmiIDs is a hive member's XGMI device id and physical id; p is its
// position in the hive (index order).
func xgmiIDs(e amdEntry, p int) (uint64, int) {
	g := e.dev.AMDGPU
	id := fnv64("xgmi:" + e.addr.String())
	if g.XGMIDeviceID != "" {
		id, _ = parseU64(g.XGMIDeviceID)
	}
	ph := p
	if g.XGMIPhysicalID != nil {
		ph = *g.XGMIPhysicalID
	}
	return id, ph
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// hiveHops is the hop count between the members of one hive (by
// position): 1 for direct peers, else the shortest path through direct
// links. Peers must be members, listed both ways, and every member must
// reach every other.
func hiveHops(members []amdEntry) ([][]int, error) {
	pos := map[int]int{}
	for p, e := range members {
		pos[e.dev.AMDGPU.Index] = p
	}
	n := len(members)
	adj := make([][]bool, n)
	for p := range adj {
		adj[p] = make([]bool, n)
	}
	for p, e := range members {
		g := e.dev.AMDGPU
		if !g.XGMIPeers.Set || g.XGMIPeers.All {
			for q := range n {
				adj[p][q] = q != p
			}
			continue
		}
		for _, idx := range g.XGMIPeers.Indexes {
			q, ok := pos[idx]
			if !ok || q == p {
				return nil, specErr("device %s: amdgpu.xgmi_peers: %d is not another GPU of its hive", e.addr, idx)
			}
			adj[p][q] = true
		}
	}
	for p := range n {
		for q := range n {
			if adj[p][q] != adj[q][p] {
				a, b := members[p], members[q]
				if !adj[p][q] {
					a, b = b, a
				}
				return nil, specErr("device %s: amdgpu.xgmi_peers: links GPU %d, which does not list GPU %d back", a.addr, b.dev.AMDGPU.Index, a.dev.AMDGPU.Index)
			}
		}
	}
	hops := make([][]int, n)
	for p := range n {
		hops[p] = make([]int, n)
		for q := range hops[p] {
			hops[p][q] = -1
		}
		hops[p][p] = 0
		queue := []int{p}
		for len(queue) > 0 {
			c := queue[0]
			queue = queue[1:]
			for q := range n {
				if adj[c][q] && hops[p][q] < 0 {
					hops[p][q] = hops[p][c] + 1
					queue = append(queue, q)
				}
			}
		}
		for q := range n {
			if hops[p][q] < 0 {
				return nil, specErr("device %s: amdgpu.xgmi_peers: GPU %d of the hive cannot be reached over XGMI", members[p].addr, members[q].dev.AMDGPU.Index)
			}
			if hops[p][q] > 7 {
				return nil, specErr("device %s: amdgpu.xgmi_peers: GPU %d is %d hops away; the XGMI TA counts at most 7", members[p].addr, members[q].dev.AMDGPU.Index, hops[p][q])
			}
		}
	}
	return hops, nil
}

// crc16 is the kernel's crc16 (lib/crc16.c: CRC-16/ARC, polynomial 0x8005
// reflected, the caller's initial value).
func crc16(crc uint16, data []byte) uint16 {
	for _, b := range data {
		crc ^= uint16(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xa001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}
