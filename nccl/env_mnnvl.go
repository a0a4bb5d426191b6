package nccl

import (
	"fmt"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Multi-node NVLink (GB200/GB300 NVL racks): NCCL decides by itself
// whether to use it (NCCL_MNNVL_ENABLE defaults to 2, auto: src/init.cc
// NCCL_PARAM(MNNVLEnable), checked for communicators that span nodes),
// and so does it for NVLS (NCCL_NVLS_ENABLE 2) and cuMem
// (NCCL_CUMEM_ENABLE), which MNNVL needs. env sets none of them; it says
// where NCCL's own check, src/mnnvl.cc ncclMnnvlCheck, will not go the
// way the job expects:
//
//   - every rank's fabric state must be COMPLETED and its cluster UUID
//     non-zero, else MNNVL is silently off for the communicator (its
//     traffic between nodes goes over the network);
//   - with those met, NCCL allocates, exports and imports a FABRIC-handle
//     buffer; where that fails (no usable IMEX channel, no IMEX daemon)
//     it returns ncclSystemError, "MNNVL ... is available but not working
//     on this system. Check the IMEX channel configuration", and the job
//     fails. NCCL_MNNVL_ENABLE=0 is its escape hatch, set here only on
//     request (EnvRequest.NoMNNVL).

// mnnvlVar is NCCL's multi-node NVLink switch.
const mnnvlVar = "NCCL_MNNVL_ENABLE"

// mnnvl sets NCCL_MNNVL_ENABLE=0 where the caller asked for it, and
// otherwise warns on a multi-node NVLink node whose fabric or IMEX is not
// ready for NCCL.
func (b *envBuilder) mnnvl(req EnvRequest) {
	if req.NoMNNVL {
		b.set(mnnvlVar, "0")
		return
	}
	n := b.n
	if !n.NVLinkFabric.MultiNode {
		return
	}
	if req.Preset != nil {
		if v, ok := req.Preset(mnnvlVar); ok && strings.TrimSpace(v) == "0" {
			return // MNNVL already off: nothing below can happen
		}
	}
	const proceed = "fix it (gpuaffinity check, gpu.fabric and gpu.imex), run the job on other nodes, or add --no-mnnvl (NCCL_MNNVL_ENABLE=0: NCCL then uses the network between nodes)"
	var off, failing []string
	for _, g := range n.GPUs {
		f := g.Fabric
		switch {
		case f.Ready():
		case f == nil:
			off = append(off, fmt.Sprintf("GPU %d: no fabric info", g.Index))
		case f.State != topology.FabricCompleted:
			off = append(off, fmt.Sprintf("GPU %d: fabric registration %s", g.Index, fabricStateName(f.State)))
		case f.ClusterUUID == "":
			off = append(off, fmt.Sprintf("GPU %d: no cluster UUID", g.Index))
		case f.Status == nil:
			off = append(off, fmt.Sprintf("GPU %d: fabric registration status unknown", g.Index))
		default: // completed with an error, in a cluster: NCCL does not look at the status
			failing = append(failing, fmt.Sprintf("GPU %d: fabric registration completed with error (NVML return %d)", g.Index, *f.Status))
		}
	}
	if len(off) > 0 {
		b.warn("multi-node NVLink node, but the fabric is not ready (%s): NCCL turns multi-node NVLink off for every communicator with such a GPU (src/mnnvl.cc ncclMnnvlCheck: not every rank's fabric state is COMPLETED with a cluster UUID), so its traffic between nodes goes over the network; %s",
			strings.Join(off, "; "), proceed)
	}
	if len(failing) > 0 {
		b.warn("multi-node NVLink node, but the fabric registration failed (%s): NCCL still tries multi-node NVLink with such a GPU, and its MNNVL setup (src/mnnvl.cc ncclMnnvlCheck) is likely to fail the job with a system error (ncclSystemError); %s",
			strings.Join(failing, "; "), proceed)
	}
	im := n.NVLinkFabric.IMEX
	if len(im.UsableChannels()) > 0 {
		return
	}
	var why string
	switch {
	case im.DeviceMajor == nil:
		why = "the driver registered no nvidia-caps-imex-channels device (/proc/devices)"
	case len(im.Channels) == 0:
		why = "no channel node in /dev/nvidia-caps-imex-channels"
	default:
		var p []string
		for _, c := range im.Channels {
			p = append(p, c.Path+": "+c.Problem)
		}
		why = strings.Join(p, "; ")
	}
	major := "<major from /proc/devices>"
	if im.DeviceMajor != nil {
		major = fmt.Sprint(*im.DeviceMajor)
	}
	b.warn("multi-node NVLink node without a usable IMEX channel (%s): NCCL's MNNVL setup (src/mnnvl.cc ncclMnnvlCheck) fails every communicator that spans nodes with a system error (ncclSystemError: \"MNNVL ... is available but not working on this system. Check the IMEX channel configuration\"); as root: mkdir -p /dev/nvidia-caps-imex-channels && mknod /dev/nvidia-caps-imex-channels/channel0 c %s 0 (again after every reboot), or add --no-mnnvl (NCCL_MNNVL_ENABLE=0: NCCL then uses the network between nodes)",
		why, major)
}

func fabricStateName(s int) string {
	switch s {
	case topology.FabricNotStarted:
		return "not started"
	case topology.FabricInProgress:
		return "in progress"
	}
	return fmt.Sprintf("in state %d", s)
}
