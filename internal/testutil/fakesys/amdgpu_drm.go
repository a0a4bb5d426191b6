// The DRM devices of the amdgpu blocks.

package fakesys

import (
	"fmt"
	"strconv"
)

const drmMajor = 226

// writeDRM writes each GPU's DRM minors under its function
// (<fn>/drm/card<N>, renderD<M>), its spare XCP devices'
// (sys/devices/platform/amdgpu_xcp_<k>/drm/...), the sys/class/drm links,
// the XGMI files (xgmi_device_id, xgmi_physical_id, xgmi_hive_info) and
// the partition modes.
func (b *builder) writeDRM(gpus []*amdGPUNode) {
	t := b.t
	t.attr("sys/class/drm/version", "drm 1.1.0 20060810")
	minor := func(parent, name string, m int) {
		d := parent + "/drm/" + name
		t.attr(d+"/dev", fmt.Sprintf("%d:%d", drmMajor, m))
		t.attr(d+"/uevent", fmt.Sprintf("MAJOR=%d\nMINOR=%d\nDEVNAME=dri/%s\nDEVTYPE=drm_minor", drmMajor, m, name))
		t.link(d+"/device", parent)
		t.link(d+"/subsystem", "sys/class/drm")
		t.link("sys/class/drm/"+name, d)
	}
	spare := 0
	first := map[uint64]*amdGPUNode{}
	for _, g := range gpus {
		if g.part != 0 {
			continue // the function's files, written once
		}
		minor(g.dir, "card"+itoa(g.drm.card), g.drm.card)
		minor(g.dir, "renderD"+itoa(g.drm.render), g.drm.render)
		for j := 1; j < g.drm.nodes; j++ {
			name := "amdgpu_xcp_" + itoa(spare)
			spare++
			p := "sys/devices/platform/" + name
			t.attr(p+"/modalias", "platform:"+name)
			t.attr(p+"/uevent", "MODALIAS=platform:"+name)
			t.link(p+"/subsystem", "sys/bus/platform")
			t.link("sys/bus/platform/devices/"+name, p)
			minor(p, "card"+itoa(g.drm.card+j), g.drm.card+j)
			minor(p, "renderD"+itoa(g.drm.render+j), g.drm.render+j)
		}
		a := g.dev.AMDGPU
		if a.ComputePartition != "" {
			t.attr(g.dir+"/current_compute_partition", a.ComputePartition)
		}
		if a.MemoryPartition != "" {
			t.attr(g.dir+"/current_memory_partition", a.MemoryPartition)
		}
		if g.hive == 0 {
			continue
		}
		t.attr(g.dir+"/xgmi_device_id", strconv.FormatUint(g.devID, 10))
		t.attr(g.dir+"/xgmi_physical_id", itoa(g.physID))
		// The hive's directory hangs under its first device; the others
		// link to it, and it links to every member as node1..nodeN.
		h, ok := first[g.hive]
		if !ok {
			first[g.hive] = g
			t.attr(g.dir+"/xgmi_hive_info/xgmi_hive_id", strconv.FormatUint(g.hive, 10))
			h = g
		} else {
			t.link(g.dir+"/xgmi_hive_info", h.dir+"/xgmi_hive_info")
		}
		t.link(h.dir+"/xgmi_hive_info/node"+itoa(g.hivePos+1), g.dir)
	}
}
