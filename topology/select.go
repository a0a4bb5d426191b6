package topology

import (
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"slices"
	"strconv"
	"strings"
)

// Where a GPU list comes from: it decides which entry forms are accepted
// (docs/topology-json.md, "Selecting GPUs").
const (
	// SelectCUDA is CUDA_VISIBLE_DEVICES: indices, GPU-<uuid> and UUID
	// prefixes, as CUDA reads them. CUDA stops at the first entry that
	// names no device: the GPUs after it are hidden.
	SelectCUDA = "CUDA_VISIBLE_DEVICES"
	// SelectSlurm is SLURM_JOB_GPUS: the job's GPU indices.
	SelectSlurm = "SLURM_JOB_GPUS"
	// SelectFlag is --gpus: indices and ranges ("0-3"), UUIDs and UUID
	// prefixes, PCI bus ids.
	SelectFlag = "--gpus"
	// SelectROCR is ROCR_VISIBLE_DEVICES, read on a node whose GPUs are
	// all AMD when CUDA_VISIBLE_DEVICES is unset: ROCr device ordinals
	// (AMDGPU.Ordinals, one per compute partition) and GPU-<16 hex> UUIDs
	// (VisibleAMDGPUs).
	SelectROCR = "ROCR_VISIBLE_DEVICES"
	// SelectHIP is HIP_VISIBLE_DEVICES, read as SelectROCR is: indices
	// into the devices ROCr exposes (those of ROCR_VISIBLE_DEVICES when
	// it is set) and UUIDs.
	SelectHIP = "HIP_VISIBLE_DEVICES"
)

var (
	// ErrSelect is wrapped when a GPU list names no GPU of the node or a
	// local rank has no GPU.
	ErrSelect = errors.New("cannot select GPUs")
	// ErrMIG is wrapped when a GPU list names a MIG instance.
	ErrMIG = errors.New("MIG devices are not supported yet")
)

// Selection is the GPUs a process drives, in the order it numbers its
// devices: device i of the process is GPU index GPUs[i].
type Selection struct {
	// GPUs are GPU indices (GPU.Index).
	GPUs []int `json:"gpus"`
	// Source is where the list came from (SelectCUDA, SelectSlurm,
	// SelectFlag); "" when it is every GPU of the node in index order.
	Source string `json:"source,omitempty"`
	// List is the list as given; "" for every GPU.
	List string `json:"list,omitempty"`
	// hidden is why entries from len(GPUs) on are not usable (a CUDA list
	// stops at its first bad entry); nil when every entry resolved.
	hidden error
}

// AllGPUs selects every GPU of n in index order.
func AllGPUs(n Node) Selection {
	s := Selection{GPUs: make([]int, 0, len(n.GPUs))}
	for _, g := range n.GPUs {
		s.GPUs = append(s.GPUs, g.Index)
	}
	return s
}

// SelectGPUs parses a GPU list from source (SelectCUDA, SelectSlurm or
// SelectFlag) against the node's GPUs. An entry that names no GPU, names
// one twice, or names a MIG instance is an error naming the entry; for a
// CUDA list, whose later entries CUDA hides, the error is kept in the
// selection instead (Rank reports it for the ranks it hides) unless the
// very first entry is bad. An empty list selects no GPU.
func SelectGPUs(n Node, list, source string) (Selection, error) {
	sel := Selection{Source: source, List: list, GPUs: []int{}}
	if strings.TrimSpace(list) == "" {
		if source == SelectCUDA {
			sel.hidden = fmt.Errorf("%w: %s is empty, which hides every GPU", ErrSelect, source)
			return sel, nil
		}
		return sel, nil
	}
	seen := map[int]int{} // GPU index -> entry
	for i, raw := range strings.Split(list, ",") {
		idx, err := resolveEntry(n, strings.TrimSpace(raw), source)
		if err == nil {
			for _, gi := range idx {
				if j, dup := seen[gi]; dup {
					err = fmt.Errorf("%w: GPU %d is named twice (entries %d and %d)", ErrSelect, gi, j, i)
					break
				}
				seen[gi] = i
			}
		}
		if err != nil {
			err = fmt.Errorf("%s=%q entry %d: %w", source, list, i, err)
			if source == SelectCUDA && i > 0 {
				sel.hidden = err
				return sel, nil
			}
			return Selection{}, err
		}
		sel.GPUs = append(sel.GPUs, idx...)
	}
	return sel, nil
}

// JobGPUs is the GPUs a health check looks at: flag (--gpus) when given
// (non-nil), else SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES, as lookup
// (os.LookupEnv) answers; ok is false when none is set (every GPU). Every
// entry must name a GPU, CUDA's included: the check looks at the GPUs the
// job will use.
func JobGPUs(n Node, flag *string, lookup func(string) (string, bool)) (sel Selection, ok bool, err error) {
	list, source := "", ""
	if flag != nil {
		list, source = *flag, SelectFlag
	} else {
		for _, env := range []string{SelectSlurm, SelectCUDA} {
			if v, set := lookup(env); set && strings.TrimSpace(v) != "" {
				list, source = v, env
				break
			}
		}
	}
	if source == "" {
		return AllGPUs(n), false, nil
	}
	if sel, err = SelectGPUs(n, list, source); err == nil {
		err = sel.Hidden()
	}
	if err != nil {
		return Selection{}, true, err
	}
	return sel, true, nil
}

// VisibleGPUs is what a process with CUDA_VISIBLE_DEVICES (nil: unset)
// drives: that list, else every GPU in index order.
func VisibleGPUs(n Node, cvd *string) (Selection, error) {
	if cvd == nil {
		return AllGPUs(n), nil
	}
	return SelectGPUs(n, *cvd, SelectCUDA)
}

// ProcessGPUs is what a process drives under its visibility lists:
// CUDA_VISIBLE_DEVICES cvd (nil: unset) when set (VisibleGPUs); else, on
// a node whose GPUs are all AMD, ROCR_VISIBLE_DEVICES and
// HIP_VISIBLE_DEVICES as lookup (os.LookupEnv; nil: none set) answers
// (VisibleAMDGPUs); else every GPU in index order. On a node with an
// NVIDIA GPU the ROCm variables are not read.
func ProcessGPUs(n Node, cvd *string, lookup func(string) (string, bool)) (Selection, error) {
	if cvd != nil || lookup == nil || !allAMD(n) {
		return VisibleGPUs(n, cvd)
	}
	var rocr, hip *string
	if v, ok := lookup(SelectROCR); ok {
		rocr = &v
	}
	if v, ok := lookup(SelectHIP); ok {
		hip = &v
	}
	return VisibleAMDGPUs(n, rocr, hip)
}

func allAMD(n Node) bool {
	for _, g := range n.GPUs {
		if !g.IsAMD() {
			return false
		}
	}
	return len(n.GPUs) > 0
}

// amdDevice is one device the ROCm runtime exposes: a GPU (or one
// compute partition of it) and the entry that named it.
type amdDevice struct {
	gpu   int    // GPU.Index
	entry string // "ROCR_VISIBLE_DEVICES entry 1 (\"5\")", "" for the default list
}

// amdAgent is a ROCr GPU agent: its device ordinal and its GPU.
type amdAgent struct{ ord, gpu int }

// VisibleAMDGPUs is what a HIP process drives under ROCR_VISIBLE_DEVICES
// rocr and HIP_VISIBLE_DEVICES hip (nil: unset), composed as the runtime
// does (rocm.docs.amd.com, "GPU isolation techniques"): ROCr exposes the
// devices rocr names, each a device ordinal among all GPU agents
// (AMDGPU.Ordinals: an entry naming any partition of a GPU in CPX mode
// selects that GPU) or a GPU-<16 hex> UUID (GPU.UUID); HIP's entries
// index the devices ROCr exposes (or are UUIDs of them). Every entry
// must name a device; two entries that name one GPU (two compute
// partitions of it, or the GPU twice) are an error naming both:
// gpuaffinity maps ranks to whole GPUs (run several ranks per GPU
// instead). Both unset is every GPU in index order; a set but empty
// list hides every GPU (Selection.Hidden).
func VisibleAMDGPUs(n Node, rocr, hip *string) (Selection, error) {
	if rocr == nil && hip == nil {
		return AllGPUs(n), nil
	}
	// The devices ROCr exposes: every agent in ordinal order, or rocr's.
	var exposed []amdDevice
	var agents []amdAgent
	for _, g := range n.GPUs {
		if g.AMD == nil {
			continue
		}
		for _, o := range g.AMD.Ordinals {
			agents = append(agents, amdAgent{o, g.Index})
		}
	}
	sortfn.Sort(agents, func(a, b amdAgent) int { return a.ord - b.ord })
	for _, a := range agents {
		exposed = append(exposed, amdDevice{gpu: a.gpu})
	}
	sel := Selection{Source: SelectROCR, GPUs: []int{}}
	lists := []struct {
		source string
		list   *string
	}{{SelectROCR, rocr}, {SelectHIP, hip}}
	for _, l := range lists {
		if l.list == nil {
			continue
		}
		sel.Source, sel.List = l.source, *l.list
		if strings.TrimSpace(*l.list) == "" {
			sel.hidden = fmt.Errorf("%w: %s is empty, which hides every GPU", ErrSelect, l.source)
			return sel, nil
		}
		var next []amdDevice
		for i, raw := range strings.Split(*l.list, ",") {
			e := strings.TrimSpace(raw)
			d, err := resolveAMDEntry(n, e, l.source, exposed, agents)
			if err != nil {
				return Selection{}, fmt.Errorf("%s=%q entry %d: %w", l.source, *l.list, i, err)
			}
			d.entry = fmt.Sprintf("%s entry %d (%q)", l.source, i, e)
			next = append(next, d)
		}
		exposed = next
	}
	for i, d := range exposed {
		for _, p := range exposed[:i] {
			if p.gpu == d.gpu {
				return Selection{}, fmt.Errorf("%w: %s and %s both name GPU %d (two of its compute partitions, or the GPU twice): gpuaffinity maps ranks to whole GPUs; list the GPU once and run several ranks per GPU (--ranks-per-gpu)",
					ErrSelect, p.entry, d.entry, d.gpu)
			}
		}
		sel.GPUs = append(sel.GPUs, d.gpu)
	}
	return sel, nil
}

// resolveAMDEntry resolves one ROCR_VISIBLE_DEVICES entry (an agent
// ordinal) or HIP_VISIBLE_DEVICES entry (an index into exposed), or a
// UUID of either, to the device it names.
func resolveAMDEntry(n Node, e, source string, exposed []amdDevice, agents []amdAgent) (amdDevice, error) {
	switch {
	case e == "":
		return amdDevice{}, fmt.Errorf("%w: empty entry", ErrSelect)
	case hasPrefixFold(e, "GPU-"):
		for _, g := range n.GPUs {
			if g.UUID != "" && strings.EqualFold(g.UUID, e) {
				if source == SelectHIP && !slices.ContainsFunc(exposed, func(d amdDevice) bool { return d.gpu == g.Index }) {
					return amdDevice{}, fmt.Errorf("%w: %q is GPU %d, which ROCR_VISIBLE_DEVICES hides", ErrSelect, e, g.Index)
				}
				return amdDevice{gpu: g.Index}, nil
			}
		}
		return amdDevice{}, fmt.Errorf("%w: %q is the UUID of no AMD GPU on this node", ErrSelect, e)
	}
	i, err := strconv.Atoi(e)
	if err != nil || i < 0 {
		return amdDevice{}, fmt.Errorf("%w: %q is not a device index or a GPU-<uuid>", ErrSelect, e)
	}
	if source == SelectHIP {
		if i >= len(exposed) {
			return amdDevice{}, fmt.Errorf("%w: HIP device %d does not exist: the runtime exposes %d device(s)", ErrSelect, i, len(exposed))
		}
		return exposed[i], nil
	}
	for _, a := range agents {
		if a.ord == i {
			return amdDevice{gpu: a.gpu}, nil
		}
	}
	return amdDevice{}, fmt.Errorf("%w: device ordinal %d is no GPU agent of this node (%d agent(s))", ErrSelect, i, len(agents))
}

// Hidden is why the entries of a CUDA list after GPUs are not usable
// (CUDA stops at its first bad entry); nil when every entry resolved.
func (s Selection) Hidden() error { return s.hidden }

// Count is how many ranks-per-GPU groups the selection can serve: its
// GPUs.
func (s Selection) Count() int { return len(s.GPUs) }

// Rank maps local rank r, with k ranks per GPU (0 means 1), to the GPU it
// drives and its slot among that GPU's ranks: device r/k of the process,
// slot r%k. A process whose list names one GPU (a launcher that gives
// each task its own GPU) drives it whatever its rank.
func (s Selection) Rank(n Node, r, k int) (gpu, slot int, err error) {
	if k <= 0 {
		k = 1
	}
	if r < 0 {
		return 0, 0, fmt.Errorf("%w: local rank %d is negative", ErrSelect, r)
	}
	if len(n.GPUs) == 0 {
		return 0, 0, fmt.Errorf("%w: local rank %d: this node has no GPU gpuaffinity supports", ErrSelect, r)
	}
	dev := r / k
	if len(s.GPUs) == 1 && s.hidden == nil && s.Source != "" {
		return s.GPUs[0], r % k, nil
	}
	if dev < len(s.GPUs) {
		return s.GPUs[dev], r % k, nil
	}
	per := ""
	if k > 1 {
		per = fmt.Sprintf(" (%d ranks per GPU: device %d)", k, dev)
	}
	switch {
	case s.hidden != nil:
		return 0, 0, fmt.Errorf("local rank %d%s: %w", r, per, s.hidden)
	case s.Source == "":
		return 0, 0, fmt.Errorf("%w: local rank %d%s but this node has %d GPU(s) and CUDA_VISIBLE_DEVICES is unset",
			ErrSelect, r, per, len(s.GPUs))
	}
	return 0, 0, fmt.Errorf("%w: local rank %d%s but %s=%q lists %d GPU(s)", ErrSelect, r, per, s.Source, s.List, len(s.GPUs))
}

// resolveEntry resolves one entry of a GPU list to GPU indices (several
// for a --gpus range).
func resolveEntry(n Node, e, source string) ([]int, error) {
	switch {
	case e == "":
		return nil, fmt.Errorf("%w: empty entry", ErrSelect)
	case hasPrefixFold(e, "MIG-") || hasPrefixFold(e, "MIG/"):
		return nil, fmt.Errorf("%w: %q: %w", ErrSelect, e, ErrMIG)
	case hasPrefixFold(e, "GPU-"):
		if source == SelectSlurm {
			break
		}
		var found *GPU
		for i := range n.GPUs {
			if u := n.GPUs[i].UUID; len(u) >= len(e) && strings.EqualFold(u[:len(e)], e) {
				if found != nil {
					return nil, fmt.Errorf("%w: %q matches the UUIDs of GPU %d and GPU %d", ErrSelect, e, found.Index, n.GPUs[i].Index)
				}
				found = &n.GPUs[i]
			}
		}
		if found == nil {
			return nil, fmt.Errorf("%w: %q is the UUID (prefix) of no GPU on this node", ErrSelect, e)
		}
		return []int{found.Index}, nil
	}
	if idx, err := strconv.Atoi(e); err == nil && idx >= 0 {
		if !hasGPU(n, idx) {
			return nil, fmt.Errorf("%w: GPU index %d is not on this node (%d GPU(s))", ErrSelect, idx, len(n.GPUs))
		}
		return []int{idx}, nil
	}
	if source == SelectFlag {
		if lo, hi, ok := strings.Cut(e, "-"); ok {
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a < 0 || b < a {
				return nil, fmt.Errorf("%w: bad GPU range %q", ErrSelect, e)
			}
			var out []int
			for i := a; i <= b; i++ {
				if !hasGPU(n, i) {
					return nil, fmt.Errorf("%w: range %q: GPU index %d is not on this node (%d GPU(s))", ErrSelect, e, i, len(n.GPUs))
				}
				out = append(out, i)
			}
			return out, nil
		}
		for _, g := range n.GPUs {
			if busIDMatches(g.BusID, e) {
				return []int{g.Index}, nil
			}
		}
	}
	want := "a GPU index or a GPU-<uuid> (prefix)"
	switch source {
	case SelectSlurm:
		want = "a GPU index"
	case SelectFlag:
		want = "a GPU index, a range (0-3), a GPU-<uuid> (prefix) or a PCI bus id"
	}
	return nil, fmt.Errorf("%w: %q is not %s of this node", ErrSelect, e, want)
}

func hasGPU(n Node, idx int) bool {
	for _, g := range n.GPUs {
		if g.Index == idx {
			return true
		}
	}
	return false
}

// busIDMatches reports whether entry e names PCI address bus
// ("0000:18:00.0"): in full, without the function ".0", or without the
// domain "0000:", in any case.
func busIDMatches(bus, e string) bool {
	bus, e = strings.ToLower(bus), strings.ToLower(e)
	for _, form := range []string{bus, strings.TrimSuffix(bus, ".0")} {
		if e == form || "0000:"+e == form {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
