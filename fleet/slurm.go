package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Switch is one switch of Slurm's topology/tree: a network switch, or the
// cloud's group of them (a GCP sub-block or block, an OCI local block,
// network block or HPC island), with the nodes (a leaf) or the switches
// under it.
type Switch struct {
	// Name is the switch's name in topology.conf: its ID where that is a
	// valid Slurm name (SlurmName), else SwitchName's hash of it.
	Name string `json:"name"`
	// ID is the switch's name as the nodes' tiers give it.
	ID string `json:"id"`
	// Tier is 0 for a leaf, one more for each level above.
	Tier int `json:"tier"`
	// Nodes are a leaf's nodes, sorted; Switches an upper switch's
	// children, sorted by name.
	Nodes    []string `json:"nodes,omitempty"`
	Switches []string `json:"switches,omitempty"`
}

// TreeOptions shape Tree.
type TreeOptions struct {
	// Root, when set, is a switch put over every top-level switch, so
	// that a job may span them (Slurm places a job only within one
	// switch's subtree). "" leaves the top-level switches apart.
	Root string
}

// Tree returns Slurm's topology/tree for the nodes from their network
// tiers (Node.Tiers, tier 0 the leaf): a switch per distinct tier ID and
// what is above it, so that a sub-block ID two blocks both use stays two
// switches. Switches are sorted leaves first, then by tier and name.
// Warnings name the nodes left out: without tiers, with a name Slurm
// cannot take, a second node of one name, or tiers that end at a switch
// other nodes have switches under. It fails only on an invalid
// Root.
func Tree(nodes []Node, o TreeOptions) ([]Switch, []string, error) {
	if o.Root != "" && !SlurmName(o.Root) {
		return nil, nil, fmt.Errorf("tree root %q: not a valid Slurm switch name (1 to 64 of A-Z a-z 0-9 . _ -)", o.Root)
	}
	type sw struct {
		Switch
		children map[string]bool // keys
	}
	byKey := make(map[string]*sw)
	var warns, untiered []string
	for _, n := range slurmNodes(nodes, &warns) {
		if len(n.Tiers) == 0 {
			untiered = append(untiered, n.Name)
			continue
		}
		if slices.Contains(n.Tiers, "") {
			warns = append(warns, fmt.Sprintf("node %q: an empty network tier in %q; left out of the tree", n.Name, n.Tiers))
			continue
		}
		// A switch is its ID and the IDs above it.
		keys := make([]string, len(n.Tiers))
		for i := range n.Tiers {
			keys[i] = strings.Join(n.Tiers[i:], "\x00")
		}
		for i, k := range keys {
			s := byKey[k]
			if s == nil {
				s = &sw{Switch: Switch{ID: n.Tiers[i], Tier: i}, children: make(map[string]bool)}
				byKey[k] = s
			}
			s.Tier = max(s.Tier, i)
			if i == 0 {
				s.Nodes = append(s.Nodes, n.Name)
			} else {
				s.children[keys[i-1]] = true
			}
		}
	}
	if len(untiered) > 0 {
		sort.Strings(untiered)
		warns = append(warns, fmt.Sprintf("%d nodes have no network tiers and are left out of the tree (Slurm wants every node under a switch; see the agent's --placement flags): %s",
			len(untiered), strings.Join(untiered, ", ")))
	}
	if len(byKey) == 0 {
		return nil, warns, nil
	}
	// Names: the ID where Slurm takes it, else its hash; two switches of
	// one name (one ID under two parents, or a hash that collides) get
	// their key's hash appended.
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	byName := make(map[string][]string)
	for _, k := range keys {
		s := byKey[k]
		s.Name = SwitchName(s.ID)
		byName[s.Name] = append(byName[s.Name], k)
	}
	for name, ks := range byName {
		if len(ks) == 1 && name != o.Root {
			continue
		}
		for _, k := range ks {
			s := byKey[k]
			s.Name = fmt.Sprintf("%.55s-%s", name, fnvHex(k)[:8])
			warns = append(warns, fmt.Sprintf("switch %q is named twice (under different parents, or as the root); this one, under %q, is %s",
				s.ID, strings.Join(strings.Split(k, "\x00")[1:], " / "), s.Name))
		}
	}
	out := make([]Switch, 0, len(byKey)+1)
	var tops []string
	for _, k := range keys {
		s := byKey[k]
		for c := range s.children {
			s.Switches = append(s.Switches, byKey[c].Name)
		}
		sort.Strings(s.Switches)
		sort.Strings(s.Nodes)
		if len(s.Nodes) > 0 && len(s.Switches) > 0 {
			// Nodes whose tiers end where other nodes' go on: their
			// leaf is not known, and a switch with both nodes and
			// switches under it is not one topology.conf line.
			warns = append(warns, fmt.Sprintf("switch %q has switches under it, but nodes %s name it as their leaf (fewer tiers than their peers): those nodes are left out of the tree",
				s.ID, strings.Join(s.Nodes, ", ")))
			s.Nodes = nil
		}
		if !strings.Contains(k, "\x00") {
			tops = append(tops, s.Name)
		}
		out = append(out, s.Switch)
	}
	if o.Root != "" {
		sort.Strings(tops)
		top := 0
		for _, s := range out {
			top = max(top, s.Tier)
		}
		out = append(out, Switch{Name: o.Root, ID: o.Root, Tier: top + 1, Switches: tops})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tier != out[j].Tier {
			return out[i].Tier < out[j].Tier
		}
		return out[i].Name < out[j].Name
	})
	return out, warns, nil
}

// SwitchName returns id as a Slurm switch or block name: id itself where
// SlurmName takes it, else "x" and the hex of its FNV-64a hash (the form
// Labels gives values Kubernetes would refuse), so that an OCID over 64
// characters still names one switch, the same on every run.
func SwitchName(id string) string {
	if SlurmName(id) {
		return id
	}
	return "x" + fnvHex(id)
}

func fnvHex(s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("%016x", h.Sum64())
}

// slurmNodes returns the nodes Slurm can name, sorted by name, warning
// about the others: a name Slurm's parsers would split or misread, and a
// second node of one name.
func slurmNodes(nodes []Node, warns *[]string) []Node {
	out := make([]Node, 0, len(nodes))
	seen := make(map[string]string)
	for _, n := range nodes {
		switch t, dup := seen[n.Name]; {
		case !SlurmName(n.Name):
			*warns = append(*warns, fmt.Sprintf("node %q (target %q): not a name Slurm takes (1 to 64 of A-Z a-z 0-9 . _ -); left out", n.Name, n.Target))
		case dup:
			*warns = append(*warns, fmt.Sprintf("node %q: reported by two targets, %q and %q; the second is left out", n.Name, t, n.Target))
		default:
			seen[n.Name] = n.Target
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// comment returns s for a configuration file's comment: itself where it
// is printable ASCII, else quoted, so that no ID can end the comment's
// line and start a setting of its own.
func comment(s string) string {
	for _, r := range s {
		if r < ' ' || r > '~' {
			return strconv.Quote(s)
		}
	}
	return s
}

// WriteTree writes switches as topology.conf for topology/tree
// (topology.conf(5)): one SwitchName line per switch, Nodes= for a leaf,
// Switches= for the others, each a hostlist expression, in the order
// given; a switch whose name is not its ID is preceded by a comment
// naming the ID.
func WriteTree(w io.Writer, switches []Switch) error {
	var b strings.Builder
	b.WriteString("# Slurm topology.conf for TopologyPlugin=topology/tree, written by gpuaffinity fleet slurm-tree\n")
	for _, s := range switches {
		if s.Name != s.ID {
			fmt.Fprintf(&b, "# %s: %s\n", s.Name, comment(s.ID))
		}
		switch {
		case len(s.Nodes) > 0:
			fmt.Fprintf(&b, "SwitchName=%s Nodes=%s\n", s.Name, Hostlist(s.Nodes))
		case len(s.Switches) > 0:
			fmt.Fprintf(&b, "SwitchName=%s Switches=%s\n", s.Name, Hostlist(s.Switches))
		default:
			return fmt.Errorf("switch %q: neither nodes nor switches", s.Name)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing topology.conf: %w", err)
	}
	return nil
}

// Block is one block of Slurm's topology/block: the nodes of one NVLink
// domain.
type Block struct {
	// Name is the block's name in topology.conf: block1, block2, … in
	// the order of Domain.
	Name string `json:"name"`
	// Domain is what the nodes share: "clique <ClusterUUID>.<CliqueID>"
	// (Node.Clique) or, where NVML names no clique, "gpu memory fabric
	// <id>" (OCI's customerGpuMemoryFabric).
	Domain string `json:"domain"`
	// Nodes are the block's nodes, sorted.
	Nodes []string `json:"nodes"`
}

// BlockOptions shape Blocks.
type BlockOptions struct {
	// Sizes, when set, is BlockSizes as given; else Blocks infers it.
	Sizes []int
}

// Blocks returns Slurm's topology/block for the nodes: one block per
// NVLink domain (Block.Domain), and BlockSizes: o.Sizes where given,
// else inferred as NVIDIA topograph infers it for one level of domains
// (docs/engines/slurm.md, "Automatic block-size inference"): with D the
// smallest block's node count and N the number of blocks, [D, 2D, 4D,
// …, 2^k·D], k = floor(log2 N). Slurm requires every block to hold at
// least the first size and each size to be a power of two times the one
// before (topology.conf(5), BlockSizes); given sizes that break either
// rule are an error. Warnings name the nodes left out (in no domain,
// with a name Slurm cannot take) and blocks smaller than the rest (a
// domain with members missing, which sets D for all).
func Blocks(nodes []Node, o BlockOptions) ([]Block, []int, []string, error) {
	var warns, loose []string
	members := make(map[string][]string)
	for _, n := range slurmNodes(nodes, &warns) {
		switch {
		case n.Clique != "":
			members["clique "+n.Clique] = append(members["clique "+n.Clique], n.Name)
		case n.GPUMemoryFabric != "":
			d := "gpu memory fabric " + n.GPUMemoryFabric
			members[d] = append(members[d], n.Name)
		default:
			loose = append(loose, n.Name)
		}
	}
	if len(loose) > 0 {
		warns = append(warns, fmt.Sprintf("%d nodes are in no NVLink domain and are left out of the blocks: %s", len(loose), strings.Join(loose, ", ")))
	}
	if len(members) == 0 {
		return nil, nil, warns, nil
	}
	domains := make([]string, 0, len(members))
	for d := range members {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	blocks := make([]Block, len(domains))
	smallest, largest := len(nodes)+1, 0
	for i, d := range domains {
		blocks[i] = Block{Name: "block" + strconv.Itoa(i+1), Domain: d, Nodes: members[d]}
		smallest = min(smallest, len(members[d]))
		largest = max(largest, len(members[d]))
	}
	if smallest < largest {
		for _, b := range blocks {
			if len(b.Nodes) < largest {
				warns = append(warns, fmt.Sprintf("%s (%s) has %d nodes, fewer than the %d of the largest block: members missing?",
					b.Name, comment(b.Domain), len(b.Nodes), largest))
			}
		}
	}
	sizes := o.Sizes
	if len(sizes) == 0 {
		sizes = []int{smallest}
		for k := bits.Len(uint(len(blocks))) - 1; k > 0; k-- {
			sizes = append(sizes, sizes[len(sizes)-1]*2)
		}
	}
	if err := checkBlockSizes(sizes, blocks); err != nil {
		return nil, nil, warns, err
	}
	return blocks, sizes, warns, nil
}

// checkBlockSizes applies topology.conf(5)'s rules for BlockSizes.
func checkBlockSizes(sizes []int, blocks []Block) error {
	for i, s := range sizes {
		if s < 1 {
			return fmt.Errorf("block size %d: must be at least 1", s)
		}
		if i > 0 && (s <= sizes[i-1] || s%sizes[i-1] != 0 || bits.OnesCount(uint(s/sizes[i-1])) != 1) {
			return fmt.Errorf("block sizes %s: %d is not a power of two times %d (Slurm's BlockSizes rule)", intList(sizes), s, sizes[i-1])
		}
	}
	for _, b := range blocks {
		if len(b.Nodes) < sizes[0] {
			return fmt.Errorf("block sizes %s: %s (%s) has %d nodes, fewer than the base block size %d (Slurm wants every block at least that big)",
				intList(sizes), b.Name, comment(b.Domain), len(b.Nodes), sizes[0])
		}
	}
	return nil
}

func intList(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// WriteBlocks writes blocks and sizes as topology.conf for
// topology/block (topology.conf(5)): a comment naming each block's
// domain, its BlockName line, and BlockSizes last.
func WriteBlocks(w io.Writer, blocks []Block, sizes []int) error {
	if len(blocks) == 0 || len(sizes) == 0 {
		return errors.New("writing topology.conf: no blocks or no block sizes")
	}
	var b strings.Builder
	b.WriteString("# Slurm topology.conf for TopologyPlugin=topology/block, written by gpuaffinity fleet slurm-block\n")
	for _, bl := range blocks {
		fmt.Fprintf(&b, "# %s: NVLink domain, %s\n", bl.Name, comment(bl.Domain))
		fmt.Fprintf(&b, "BlockName=%s Nodes=%s\n", bl.Name, Hostlist(bl.Nodes))
	}
	fmt.Fprintf(&b, "BlockSizes=%s\n", intList(sizes))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing topology.conf: %w", err)
	}
	return nil
}

// The topologies of topology.yaml (topology.yaml(5)); field order is the
// file's ("topology" must be the first attribute).
type yamlTopology struct {
	Topology       string     `yaml:"topology"`
	ClusterDefault bool       `yaml:"cluster_default"`
	Block          *yamlBlock `yaml:"block,omitempty"`
	Tree           *yamlTree  `yaml:"tree,omitempty"`
}

type yamlBlock struct {
	BlockSizes []int           `yaml:"block_sizes"`
	Blocks     []yamlBlockItem `yaml:"blocks"`
}

type yamlBlockItem struct {
	Block string `yaml:"block"`
	Nodes string `yaml:"nodes"`
}

type yamlTree struct {
	Switches []yamlSwitch `yaml:"switches"`
}

type yamlSwitch struct {
	Switch   string `yaml:"switch"`
	Children string `yaml:"children,omitempty"`
	Nodes    string `yaml:"nodes,omitempty"`
}

// Names of the topologies WriteTopologyYAML writes, for partitions'
// Topology= to name.
const (
	TopologyNVLink  = "nvlink"
	TopologyNetwork = "network"
)

// WriteTopologyYAML writes topology.yaml (Slurm 25.05 and newer;
// topology.yaml(5)) with the block topology "nvlink" (blocks and sizes)
// and the tree topology "network" (switches), whichever is non-empty.
// "nvlink" is the cluster default where it is written, since an NVLink
// domain is the tighter unit; partitions name the other with
// Topology=network.
func WriteTopologyYAML(w io.Writer, switches []Switch, blocks []Block, sizes []int) error {
	var topos []yamlTopology
	if len(blocks) > 0 {
		yb := &yamlBlock{BlockSizes: sizes}
		for _, b := range blocks {
			yb.Blocks = append(yb.Blocks, yamlBlockItem{Block: b.Name, Nodes: Hostlist(b.Nodes)})
		}
		topos = append(topos, yamlTopology{Topology: TopologyNVLink, ClusterDefault: true, Block: yb})
	}
	if len(switches) > 0 {
		yt := &yamlTree{}
		for _, s := range switches {
			ys := yamlSwitch{Switch: s.Name}
			switch {
			case len(s.Nodes) > 0:
				ys.Nodes = Hostlist(s.Nodes)
			case len(s.Switches) > 0:
				ys.Children = Hostlist(s.Switches)
			default:
				return fmt.Errorf("switch %q: neither nodes nor switches", s.Name)
			}
			yt.Switches = append(yt.Switches, ys)
		}
		topos = append(topos, yamlTopology{Topology: TopologyNetwork, ClusterDefault: len(blocks) == 0, Tree: yt})
	}
	if len(topos) == 0 {
		return errors.New("writing topology.yaml: no switches and no blocks")
	}
	var buf bytes.Buffer
	buf.WriteString("# Slurm topology.yaml, written by gpuaffinity fleet slurm-yaml\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(topos); err != nil {
		return fmt.Errorf("encoding topology.yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encoding topology.yaml: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing topology.yaml: %w", err)
	}
	return nil
}
