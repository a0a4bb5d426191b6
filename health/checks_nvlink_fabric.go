package health

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The NVLink fabric checks: gpu.fabric (every GPU's registration with the
// NVLink fabric, its health mask and, on multi-node NVLink, one clique
// for the node) and gpu.imex (the IMEX channel multi-node NVLink memory
// sharing needs). Rules and sources: docs/health.md, "NVLink fabric
// checks".

// gpuFabric is the GPU's fabric info: GPU.Fabric where discovery read it,
// else the registration state and status of GPU.Health (nodes built
// before GPU.Fabric existed, or by hand); nil where the GPU reports none
// (outside any NVLink fabric: PCIe cards, VMs without NVSwitch).
func gpuFabric(g topology.GPU) *topology.GPUFabric {
	if g.Fabric != nil {
		return g.Fabric
	}
	h := g.Health
	if h.FabricState == nil || *h.FabricState == 0 {
		return nil
	}
	return &topology.GPUFabric{State: *h.FabricState, Status: h.FabricStatus}
}

var fabricStates = map[int]string{0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}

// fabricProblems lists what is wrong with one GPU's fabric info: the
// registration (state, status), each bad health-mask field and an
// unhealthy summary. limited is set where the only thing said is the
// summary "limited capacity" (a warning, not a failure). ok is set where
// the registration completed with success.
func fabricProblems(f *topology.GPUFabric) (probs []string, limited, ok bool) {
	switch {
	case f.State != topology.FabricCompleted:
		probs = append(probs, "fabric registration "+orUnknown(fabricStates[f.State]))
	case f.Status != nil && *f.Status != 0:
		probs = append(probs, fmt.Sprintf("fabric registration completed with error %s (NVML return %d)", nvml.ReturnName(*f.Status), *f.Status))
	default:
		ok = true
	}
	var fields []string
	for _, h := range f.Health() {
		if h.Bad {
			fields = append(fields, h.Name+"="+h.Value)
		}
	}
	if len(fields) > 0 {
		probs = append(probs, "health mask "+strings.Join(fields, ", "))
	}
	if f.HealthSummary != nil {
		switch *f.HealthSummary {
		case topology.FabricSummaryUnhealthy:
			probs = append(probs, "health summary unhealthy")
		case topology.FabricSummaryLimitedCapacity:
			if len(probs) > 0 {
				probs = append(probs, "health summary limited capacity")
			} else {
				limited = true
			}
		}
	}
	return probs, limited, ok
}

func checkFabric(_ context.Context, in *Input) Result {
	multi := in.Node.NVLinkFabric.MultiNode
	nvswitch := false
	for _, g := range in.Node.GPUs {
		for _, l := range g.NVLinks {
			nvswitch = nvswitch || l.RemoteType == topology.RemoteNVSwitch
		}
	}
	var bad, limited []string
	known, masked := 0, 0
	// clique groups the GPUs whose registration succeeded by clique, in
	// GPU order, for the one-clique rule of multi-node NVLink.
	type clique struct {
		name string
		gpus []int
	}
	var cliques []clique
	recovering := false
	for _, g := range in.gpus {
		f := gpuFabric(g)
		if f == nil {
			if multi {
				bad = append(bad, gpuName(g)+": no fabric info from NVML on a multi-node NVLink node: it is in no NVLink domain")
			}
			continue
		}
		known++
		// A mask counts as read where some field is supported (a mask of
		// 0 says nothing).
		reported := false
		for _, h := range f.Health() {
			reported = reported || h.Value != "not_supported"
			recovering = recovering || (h.Bad && (h.Name == "route_recovery" || h.Name == "access_timeout_recovery"))
		}
		if reported {
			masked++
		}
		probs, lim, ok := fabricProblems(f)
		switch {
		case len(probs) > 0:
			bad = append(bad, gpuName(g)+": "+strings.Join(probs, "; "))
		case lim:
			limited = append(limited, gpuName(g)+": fabric health summary limited capacity (no health-mask field says why)")
		}
		if ok {
			name := f.Clique()
			if name == "" {
				name = "no cluster UUID"
			}
			i := slices.IndexFunc(cliques, func(c clique) bool { return c.name == name })
			if i < 0 {
				cliques = append(cliques, clique{name: name})
				i = len(cliques) - 1
			}
			cliques[i].gpus = append(cliques[i].gpus, g.Index)
		}
	}
	if multi && len(cliques) > 1 {
		parts := make([]string, len(cliques))
		for i, c := range cliques {
			parts[i] = fmt.Sprintf("GPU %s in %s", joinInts(c.gpus), c.name)
		}
		bad = append(bad, fmt.Sprintf("the node's GPUs are in %d NVLink cliques, want one: %s", len(cliques), strings.Join(parts, "; ")))
	}
	if known == 0 && !multi {
		if nvswitch {
			return skip("GPUs have NVSwitch links but NVML reports no fabric state")
		}
		return skip("no NVLink fabric (no fabric state from NVML)")
	}
	hint := "start nvidia-fabricmanager (systemctl status nvidia-fabricmanager) and wait for registration; reboot if it fails"
	if multi {
		hint = "multi-node NVLink: the fabric is managed from the NVLink switch trays (NMX-Controller's global fabric manager), not by this node; " +
			"see nvidia-smi -q -d FABRIC, reset the GPU (nvidia-smi -r) or reboot the tray; a GPU that stays unregistered, with insufficient_nvlinks, " +
			"or in another clique needs the rack's admins (NVLink cabling, the tray's partition)"
	}
	if recovering {
		hint = "route_recovery / access_timeout_recovery: the fabric is recovering from a fault; run the check again in a minute and drain the node if it stays; " + hint
	}
	if len(bad) > 0 {
		return verdictOf(append(bad, limited...), Fail, hint, "")
	}
	if len(limited) > 0 {
		return verdictOf(limited, Warn, "NVML says the GPU's NVLink fabric runs at limited capacity: expect lower NVLink bandwidth; "+
			"nvidia-smi -q -d FABRIC, nvidia-smi nvlink -s; "+hint, "")
	}
	ok := fmt.Sprintf("fabric registration completed on %s", plural(known, "GPU"))
	if multi && len(cliques) == 1 {
		ok += ", all in NVLink clique " + cliques[0].name
	}
	if masked > 0 {
		ok += fmt.Sprintf("; health mask clear on %s", plural(masked, "GPU"))
	}
	return Result{Verdict: Pass, Reason: ok}
}

// imexChannelDir is where the IMEX channel nodes live (NVIDIA IMEX
// guide, "IMEX channels").
const imexChannelDir = "/dev/nvidia-caps-imex-channels"

// imexHint is the fix for a missing or unusable IMEX channel, with the
// driver's major where it is known.
func imexHint(major *int) string {
	m := "<major from /proc/devices>"
	if major != nil {
		m = fmt.Sprint(*major)
	}
	return fmt.Sprintf("as root: mkdir -p %s && mknod %s/channel0 c %s 0 (remove a node left from an earlier boot first); "+
		"the nodes do not persist across reboots, so create them at every boot (a systemd unit), "+
		"or load nvidia with NVreg_CreateImexChannel0=1 (modprobe.d, then rebuild the initramfs), "+
		"or on Kubernetes let the NVIDIA DRA driver's ComputeDomain give the job its channel", imexChannelDir, imexChannelDir, m)
}

// imexConfigNote says what the node has of the IMEX daemon's
// configuration; informational only (the daemon may be started per job).
func imexConfigNote(c *topology.IMEXConfig) string {
	if c == nil {
		return "no IMEX daemon config (/etc/nvidia-imex/config.cfg; the daemon may be started per job)"
	}
	s := "IMEX daemon config " + c.Path
	if c.Nodes != nil {
		s += fmt.Sprintf(" lists %s", plural(*c.Nodes, "node"))
	}
	return s
}

func checkIMEX(_ context.Context, in *Input) Result {
	f := in.Node.NVLinkFabric
	if !f.MultiNode {
		return skip("not a multi-node NVLink node (no GPU reports an NVLink cluster UUID): no IMEX channel needed")
	}
	im := f.IMEX
	cfg := imexConfigNote(im.Config)
	if im.DeviceMajor == nil {
		return Result{Verdict: Fail,
			Reason: "the driver registered no nvidia-caps-imex-channels device (not in /proc/devices): no IMEX channel can exist, so NCCL's multi-node NVLink setup fails the job; " + cfg,
			Hint:   "install a driver with IMEX channel support (the one NVIDIA ships for GB200/GB300 NVL systems) and reboot; then create channel0: " + imexHint(nil)}
	}
	usable := im.UsableChannels()
	var problems []string
	for _, c := range im.Channels {
		if c.Problem != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", c.Path, c.Problem))
		}
	}
	if len(usable) == 0 {
		what := "no channel node in " + imexChannelDir
		if len(problems) > 0 {
			what = strings.Join(problems, "; ")
		}
		return Result{Verdict: Fail,
			Reason: fmt.Sprintf("no usable IMEX channel (%s): NCCL's multi-node NVLink setup fails the job with a system error; driver major %d; %s", what, *im.DeviceMajor, cfg),
			Hint:   imexHint(im.DeviceMajor)}
	}
	ok := fmt.Sprintf("IMEX channel %s usable (driver major %d); %s", joinInts(usable), *im.DeviceMajor, cfg)
	if len(problems) > 0 {
		ok += "; not usable: " + strings.Join(problems, "; ")
	}
	return Result{Verdict: Pass, Reason: ok}
}
