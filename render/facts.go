package render

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// facts indexes the parts of a Node that several renderings look up. It
// computes nothing the model does not say: paths and pairs are read, never
// derived.
type facts struct {
	n        topology.Node
	paths    map[pathKey]topology.Path
	gpuPaths map[[2]int]topology.GPUPath
	nicIndex map[string]int // NIC name -> position in n.NICs
}

type pathKey struct {
	gpu int
	nic string
}

func newFacts(n topology.Node) *facts {
	f := &facts{
		n:        n,
		paths:    make(map[pathKey]topology.Path, len(n.Paths)),
		gpuPaths: make(map[[2]int]topology.GPUPath, len(n.GPUPaths)),
		nicIndex: make(map[string]int, len(n.NICs)),
	}
	for _, p := range n.Paths {
		f.paths[pathKey{p.GPU, p.NIC}] = p
	}
	for _, p := range n.GPUPaths {
		f.gpuPaths[[2]int{min(p.A, p.B), max(p.A, p.B)}] = p
	}
	for i, nic := range n.NICs {
		if _, dup := f.nicIndex[nic.Name]; !dup {
			f.nicIndex[nic.Name] = i
		}
	}
	return f
}

// path returns the model's path between GPU index gpu and the NIC named nic.
func (f *facts) path(gpu int, nic string) (topology.Path, bool) {
	p, ok := f.paths[pathKey{gpu, nic}]
	return p, ok
}

// gpuPath returns the model's path between GPU indexes a and b.
func (f *facts) gpuPath(a, b int) (topology.GPUPath, bool) {
	p, ok := f.gpuPaths[[2]int{min(a, b), max(a, b)}]
	return p, ok
}

// pairsOf returns the pairs of GPU index gpu (normally one).
func (f *facts) pairsOf(gpu int) []topology.Pair {
	var out []topology.Pair
	for _, p := range f.n.Pairs {
		if p.GPU == gpu {
			out = append(out, p)
		}
	}
	return out
}

// nicRef names a NIC as the table's columns do: "NIC0 mlx5_0"; a name the
// Node does not list prints bare.
func (f *facts) nicRef(name string) string {
	if i, ok := f.nicIndex[name]; ok {
		return fmt.Sprintf("NIC%d %s", i, name)
	}
	return name
}

// gpuCPUs is a GPU's CPU affinity: its resolved Locality's CPUs.
func gpuCPUs(g topology.GPU) cpuset.Set { return g.Locality.CPUs }

// numaAffinity is what `nvidia-smi topo -m` prints as NUMA Affinity: the
// NUMA node(s) of the GPU's resolved Locality, else "N/A".
func numaAffinity(g topology.GPU) string {
	if len(g.Locality.NUMANodes) == 0 {
		return "N/A"
	}
	return cpuset.Of(g.Locality.NUMANodes...).String()
}

// orNA prints "N/A" for an empty string.
func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

// bytesHuman prints a memory size in binary units: "4.3 GiB".
func bytesHuman(b uint64) string {
	const (
		mib = 1 << 20
		gib = 1 << 30
		tib = 1 << 40
	)
	switch {
	case b >= tib:
		return fmt.Sprintf("%.1f TiB", float64(b)/tib)
	case b >= gib:
		return fmt.Sprintf("%.1f GiB", float64(b)/gib)
	case b >= mib:
		return fmt.Sprintf("%.1f MiB", float64(b)/mib)
	default:
		return fmt.Sprintf("%d B", b)
	}
}

// rate prints a NIC's best port rate, "down" when no port is up (a down
// port's rate file says nothing of the link), "" when unknown.
func rate(nic topology.NIC) string {
	if !nic.Healthy() {
		return "down"
	}
	var r float64
	for _, p := range nic.Ports {
		if p.Up() || !p.Known() {
			r = max(r, p.RateGbps)
		}
	}
	if len(nic.Ports) == 0 {
		r = nic.RateGbps()
	}
	if r <= 0 {
		return ""
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + " Gb/s"
}

// printable makes a machine-supplied string safe for one line of text: it
// keeps printable runes and spaces and writes every other rune (tabs,
// newlines, escape sequences, invalid UTF-8) as a Go escape, so that a
// hostile name cannot break a table's columns or a format's syntax.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == unicode.ReplacementChar || (r != ' ' && !unicode.IsPrint(r)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == unicode.ReplacementChar:
			// Either a real U+FFFD or an invalid byte: show which.
			if strings.HasPrefix(s[i:], string(unicode.ReplacementChar)) {
				b.WriteRune(r)
			} else {
				fmt.Fprintf(&b, `\x%02x`, s[i])
			}
		case r == ' ' || unicode.IsPrint(r):
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}
