// Package gres renders a node's GPUs as Slurm gres.conf lines:
//
//	Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55 Links=-1,18,18,18,18,18,18,18
//
// Cores= holds Slurm's core indices, not OS CPU ids: Slurm numbers the
// physical cores of a node from 0 across sockets (socket 0's cores first,
// then socket 1's), one index per core whatever its SMT siblings are, the
// "Core L#" of hwloc's lstopo -l. Links= is Slurm's per-device list, one
// entry per GPU in Slurm's device order (PCI bus order): -1 for the GPU
// itself, else the NVLink count to that GPU (nvidia-smi's NV#), 0 for none.
// docs/gres.md describes the format and how it was checked with slurmd -G.
//
// It also decides what `check --slurm-drain/--slurm-resume` tells Slurm
// (PlanNodeAction): the node's drain and resume policy, beside the rest of
// the Slurm code; the command runs scontrol.
package gres

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// maxLink is Slurm's GRES_MAX_LINK: the largest value Links= accepts.
const maxLink = 1023

// Options tune GresConf.
type Options struct {
	// Type replaces the Type= derived from each GPU's model ("" derives
	// it, see TypeName). It must be Slurm-safe (see ValidType).
	Type string
	// DevDir is the directory of the device files File= names; "" means
	// "/dev". Tests point it at a directory of stand-in device nodes.
	DevDir string
	// NoLinks omits Links= (for AutoDetect=nvml on NVSwitch systems,
	// where Slurm's own NVML count differs; docs/gres.md).
	NoLinks bool
}

// Line is one gres.conf line: one GPU.
type Line struct {
	GPU   int    // the GPU's index in the model (NVML index)
	BusID string // the GPU's PCI bus id
	// Type is the Type= value; "" when the model is unknown (Type= is
	// then omitted).
	Type string
	File string // the File= value, "/dev/nvidia<minor>"
	// Cores holds Slurm core indices (not CPU ids); empty when the GPU's
	// locality is unknown (Cores= is then omitted: Slurm treats every
	// core as local).
	Cores cpuset.Set
	// Links is one entry per GPU in Slurm's device order: -1 for this
	// GPU, else the NVLink count; nil omits Links=.
	Links []int
	// Partition is the AMD compute partition the line stands for, where
	// the GPU is split into several (CPX): one line per partition, File=
	// its render node; nil for a whole GPU.
	Partition *int
}

// String renders the line in gres.conf syntax, without a newline.
func (l Line) String() string {
	var b strings.Builder
	b.WriteString("Name=gpu")
	if l.Type != "" {
		b.WriteString(" Type=" + l.Type)
	}
	b.WriteString(" File=" + l.File)
	if !l.Cores.IsEmpty() {
		b.WriteString(" Cores=" + l.Cores.String())
	}
	if l.Links != nil {
		s := make([]string, len(l.Links))
		for i, v := range l.Links {
			s[i] = strconv.Itoa(v)
		}
		b.WriteString(" Links=" + strings.Join(s, ","))
	}
	return b.String()
}

// GresConf returns one Line per GPU of n, in Slurm's device order (PCI
// bus order), and warnings naming every GPU whose line is degraded (no
// minor number, no model, unknown locality). It fails when n has no GPU
// to describe or opts are invalid.
func GresConf(n topology.Node, opts Options) ([]Line, []string, error) {
	if opts.Type != "" && !ValidType(opts.Type) {
		return nil, nil, fmt.Errorf("gres: type %q: want letters, digits, '_', '-' or '.' only", opts.Type)
	}
	devDir := opts.DevDir
	if devDir == "" {
		devDir = "/dev"
	}
	if !filepath.IsAbs(devDir) {
		return nil, nil, fmt.Errorf("gres: device directory %q is not absolute", devDir)
	}
	var warns []string
	nvml := n.NVML.Source != "" && n.NVML.Source != "none"

	// Slurm numbers devices by PCI bus id (gres.conf(5), Links); emit the
	// lines in that order so each line's -1 sits at its own position.
	var gpus []topology.GPU
	for _, g := range n.GPUs {
		if g.IsAMD() {
			// An AMD GPU's device is its DRM render node, which only KFD's
			// drm_render_minor names.
			if g.AMD == nil || g.AMD.RenderMinor == nil {
				warns = append(warns, fmt.Sprintf("GPU %d (%s): KFD gives no render node (state %s); left out", g.Index, g.BusID, g.State))
				continue
			}
			gpus = append(gpus, g)
			continue
		}
		if g.Minor == nil && nvml {
			warns = append(warns, fmt.Sprintf("GPU %d (%s): NVML does not list it (state %s); left out", g.Index, g.BusID, g.State))
			continue
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		return nil, warns, fmt.Errorf("gres: no GPU to describe")
	}
	slices.SortStableFunc(gpus, func(a, b topology.GPU) int { return cmp.Compare(a.BusID, b.BusID) })
	if slices.ContainsFunc(gpus, topology.GPU.IsAMD) && slices.ContainsFunc(gpus, func(g topology.GPU) bool { return !g.IsAMD() }) {
		warns = append(warns, "NVIDIA and AMD GPUs under one Name=gpu: Slurm numbers them in one sequence, which is neither CUDA's nor HIP's device order; "+
			"keep ConstrainDevices=yes in cgroup.conf (each job then sees only its own GPUs, numbered from 0) and request them by Type=")
	}

	coreOf := CoreIndex(n.CPU)
	if len(coreOf) == 0 {
		warns = append(warns, "no CPU core topology (devices/system/cpu/cpuN/topology); Cores= omitted for every GPU")
	}
	links := linkMatrix(n, gpus)
	if opts.NoLinks {
		links = nil
	}

	lines := make([]Line, 0, len(gpus))
	files := map[string]int{}
	for i, g := range gpus {
		l := Line{GPU: g.Index, BusID: g.BusID}
		where := fmt.Sprintf("GPU %d (%s)", g.Index, g.BusID)
		if g.State != topology.GPUOK && g.State != topology.GPUNoNVML {
			warns = append(warns, fmt.Sprintf("%s: state %s", where, g.State))
		}

		minor := g.Index
		switch {
		case g.IsAMD():
			// Slurm's AutoDetect=rsmi and AMD's own gres.conf examples
			// (OCI BM.GPU.MI300X.8) give File=/dev/dri/renderD<N>.
			l.File = filepath.Join(devDir, "dri", "renderD"+strconv.Itoa(*g.AMD.RenderMinor))
		case g.Minor != nil:
			minor = *g.Minor
			l.File = filepath.Join(devDir, "nvidia"+strconv.Itoa(minor))
		default:
			warns = append(warns, fmt.Sprintf("%s: no NVML minor number; File=%s assumes it equals the index", where, filepath.Join(devDir, "nvidia"+strconv.Itoa(minor))))
			l.File = filepath.Join(devDir, "nvidia"+strconv.Itoa(minor))
		}
		if prev, dup := files[l.File]; dup {
			return nil, warns, fmt.Errorf("gres: GPUs %d and %d both map to %s", prev, g.Index, l.File)
		}
		files[l.File] = g.Index

		switch {
		case opts.Type != "":
			l.Type = opts.Type
		case TypeName(g.Model) != "":
			l.Type = TypeName(g.Model)
		default:
			warns = append(warns, where+": model unknown (no NVML); Type= omitted (set one with --type)")
		}

		if len(coreOf) > 0 {
			cpus, src := g.Locality.CPUs, g.Locality.Source
			var cores []int
			for _, c := range cpus.CPUs() {
				if idx, ok := coreOf[c]; ok {
					cores = append(cores, idx)
				}
			}
			l.Cores = cpuset.Of(cores...)
			switch {
			case cpus.IsEmpty():
				warns = append(warns, where+": locality unknown (numa_node -1, no NVML CPU affinity, no local_cpulist); Cores= omitted, Slurm treats every core as local")
			case l.Cores.IsEmpty():
				warns = append(warns, fmt.Sprintf("%s: its CPUs %s (%s) are on no known core; Cores= omitted", where, cpus, src))
			}
		}

		if links != nil {
			l.Links = links[i]
		}
		lines = append(lines, l)
	}
	return partitionLines(lines, gpus, devDir, warns)
}

// partitionLines splits the line of each AMD GPU split into compute
// partitions into one line per partition (AMDGPU.Partitions): each is a
// GPU to HIP, RCCL and Slurm, with its own render node (the GPU's, then
// its amdgpu_xcp devices': what Slurm's AutoDetect=rsmi and ROCm's device
// plugin list), and the GPU's Cores=. Partitions of one GPU share its
// dies rather than an XGMI link, which Links= (link counts) cannot say:
// on such a node Links= is left out, with a warning; Slurm's device order
// (bus order, then partition) keeps a job's partitions on few GPUs.
func partitionLines(lines []Line, gpus []topology.GPU, devDir string, warns []string) ([]Line, []string, error) {
	split := false
	for _, g := range gpus {
		split = split || (g.AMD != nil && len(g.AMD.Partitions) > 1)
	}
	if !split {
		return lines, warns, nil
	}
	out := make([]Line, 0, len(lines))
	files := map[string]int{}
	for i, l := range lines {
		l.Links = nil
		g := gpus[i]
		if g.AMD == nil || len(g.AMD.Partitions) < 2 {
			out = append(out, l)
			files[l.File] = g.Index
			continue
		}
		for _, p := range g.AMD.Partitions {
			pl := l
			part := p.Partition
			pl.Partition = &part
			if p.RenderMinor == nil {
				warns = append(warns, fmt.Sprintf("GPU %d (%s) partition %d: KFD gives no render node; left out", g.Index, g.BusID, p.Partition))
				continue
			}
			pl.File = filepath.Join(devDir, "dri", "renderD"+strconv.Itoa(*p.RenderMinor))
			if prev, dup := files[pl.File]; dup {
				return nil, warns, fmt.Errorf("gres: GPUs %d and %d both map to %s", prev, g.Index, pl.File)
			}
			files[pl.File] = g.Index
			out = append(out, pl)
		}
	}
	warns = append(warns, "AMD GPUs split into compute partitions: one line per partition (its render node); Links= left out, as partitions of one GPU share its dies rather than an XGMI link")
	return out, warns, nil
}

// Write writes lines as a gres.conf: a header comment, AutoDetect=off
// (the lines are the whole truth; with AutoDetect=nvml Slurm would drop
// a GPU whose Links= differ from its own NVML count) and one line per GPU.
func Write(w io.Writer, lines []Line) error {
	var b strings.Builder
	b.WriteString("# Slurm gres.conf written by gpuaffinity gres (docs/gres.md).\n")
	b.WriteString("# Cores= are Slurm core indices (socket-major, one per physical core), not CPU ids.\n")
	b.WriteString("AutoDetect=off\n")
	for _, l := range lines {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("gres: write: %w", err)
	}
	return nil
}

// CoreIndex maps every CPU id of c's cores to its Slurm core index. Slurm
// (through hwloc's logical order) numbers the physical cores socket by
// socket, sockets in the order of their first CPU, cores within a socket
// in the order of their first CPU; SMT siblings share their core's index.
func CoreIndex(c topology.CPUInfo) map[int]int {
	cores := slices.Clone(c.Cores)
	first := func(k topology.Core) int {
		if cs := k.CPUs.CPUs(); len(cs) > 0 {
			return cs[0]
		}
		return -1
	}
	socketFirst := map[int]int{}
	for _, k := range cores {
		f := first(k)
		if f < 0 {
			continue
		}
		if s, ok := socketFirst[k.Socket]; !ok || f < s {
			socketFirst[k.Socket] = f
		}
	}
	slices.SortStableFunc(cores, func(a, b topology.Core) int {
		return cmp.Or(cmp.Compare(socketFirst[a.Socket], socketFirst[b.Socket]),
			cmp.Compare(a.Socket, b.Socket), cmp.Compare(first(a), first(b)))
	})
	out := map[int]int{}
	idx := 0
	for _, k := range cores {
		if k.CPUs.IsEmpty() {
			continue
		}
		for _, cpu := range k.CPUs.CPUs() {
			out[cpu] = idx
		}
		idx++
	}
	return out
}

// linkMatrix returns, per GPU of gpus (in that order), its Links= entries;
// nil where no pair of them is joined by NVLink (a single GPU, PCIe cards,
// VMs where NVML hides NVLink).
func linkMatrix(n topology.Node, gpus []topology.GPU) [][]int {
	if len(gpus) < 2 {
		return nil
	}
	pos := map[int]int{}
	for i, g := range gpus {
		pos[g.Index] = i
	}
	m := make([][]int, len(gpus))
	for i := range m {
		m[i] = make([]int, len(gpus))
		m[i][i] = -1
	}
	linked := false
	for _, p := range n.GPUPaths {
		a, okA := pos[p.A]
		b, okB := pos[p.B]
		if !okA || !okB || a == b || p.NVLinks+p.XGMI <= 0 {
			continue
		}
		// NVLinks, or a pair's direct XGMI links (AMD: Slurm's gpu_rsmi
		// counts XGMI the same way).
		v := min(p.NVLinks+p.XGMI, maxLink)
		m[a][b], m[b][a] = v, v
		linked = true
	}
	if !linked {
		return nil
	}
	return m
}

// vendorWords are leading words of NVML names that say nothing about the
// model.
var vendorWords = map[string]bool{"nvidia": true, "tesla": true, "geforce": true, "quadro": true, "amd": true, "instinct": true}

// TypeName derives a short, Slurm-safe Type= from an NVML model name: the
// model's first word after the vendor and brand words, up to its first
// '-', lower case ("NVIDIA H100 80GB HBM3" → "h100", "NVIDIA
// A100-SXM4-40GB" → "a100", "NVIDIA GH200 480GB" → "gh200"); a first word
// without a digit takes the next one too ("NVIDIA RTX A6000" →
// "rtx_a6000"). The result is always a substring of the Type Slurm's
// AutoDetect=nvml derives ("nvidia_h100_80gb_hbm3"), so it matches that
// too. "" for an empty name.
func TypeName(model string) string {
	words := strings.Fields(strings.ToLower(model))
	for len(words) > 1 && vendorWords[words[0]] {
		words = words[1:]
	}
	if len(words) == 0 {
		return ""
	}
	w := words[0]
	if !strings.ContainsAny(w, "0123456789") && len(words) > 1 {
		w += "_" + words[1]
	}
	if i := strings.IndexByte(w, '-'); i > 0 {
		w = w[:i]
	}
	w = strings.Map(func(r rune) rune {
		if safeRune(r) {
			return r
		}
		return '_'
	}, w)
	return w
}

// ValidType reports whether t can stand as a Type= value: non-empty,
// letters, digits, '_', '-' and '.' only (no space, ',', ':', '=' that
// slurm.conf's Gres=gpu:<type>:<count> or gres.conf would split on).
func ValidType(t string) bool {
	if t == "" {
		return false
	}
	for _, r := range t {
		if !safeRune(r) {
			return false
		}
	}
	return true
}

func safeRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
}
