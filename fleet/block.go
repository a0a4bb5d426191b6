package fleet

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
)

// Block is one block of Slurm's topology/block: the nodes of one NVLink
// domain.
type Block struct {
	// Name is the block's name in topology.conf: the name the previous
	// file gave the domain (or the block that held most of its nodes),
	// else the next free blockN.
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
	// Sizes, when set, is BlockSizes as given; else the previous file's;
	// else Blocks infers it.
	Sizes []int
	// Previous is the block topology an earlier run wrote, as slurmconf
	// reads it back; nil where there is none. Its block names are kept,
	// and a node in no domain now keeps its block.
	Previous *slurmconf.Blocks
	// Keep are nodes the fleet reader could not place without doubt
	// (prom.Fleet.Unresolved): each keeps the block Previous gave it.
	Keep []string
}

// BlockPlan is the topology/block a run writes: its blocks and
// BlockSizes, how they differ from the previous file's, and the
// warnings.
type BlockPlan struct {
	Blocks   []Block
	Sizes    []int
	Change   Change
	Warnings []string
}

// blockPrefix is the prefix of the names Blocks makes (Azure azslurm's
// form).
const blockPrefix = "block"

// Blocks returns Slurm's topology/block for the nodes: one block per
// NVLink domain (Block.Domain) and BlockSizes.
//
// Names are stable: a domain keeps the name the previous file gave it
// (its comment names the domain), else the name of the previous block
// that held most of its nodes; a new domain gets the next number after
// every blockN taken, so a run never renames a block and adding one
// renumbers none. Without a previous file they are block1..N in domain
// order.
//
// BlockSizes are o.Sizes where given, else the previous file's, else
// inferred as NVIDIA topograph infers them for one level of domains
// (docs/engines/slurm.md, "Automatic block-size inference"), [D, 2D,
// 4D, …, 2^k·D] with N blocks and k = floor(log2 N), but with D the
// size most blocks have (the larger on a tie) rather than the smallest:
// a rack with a tray down must not lower every rack's base block.
// Slurm requires every block to hold at least the first size and each
// size to be a power of two times the one before (topology.conf(5),
// BlockSizes): sizes that break the second rule are an error; a block
// under the first size is left out, alone, with a warning naming it and
// its nodes (its nodes are then in no block, as Slurm would have them).
// Warnings also name the nodes in no domain and those with a name Slurm
// cannot take.
func Blocks(nodes []Node, o BlockOptions) (BlockPlan, error) {
	var plan BlockPlan
	prevBlock, prevDomain := previousBlocks(o.Previous)
	var loose []string
	members := make(map[string][]string)
	for _, n := range slurmNodes(withKept(nodes, o.Keep, func(n string) bool { _, ok := prevBlock[n]; return ok }), &plan.Warnings) {
		d := n.Domain()
		if b, ok := prevBlock[n.Name]; ok && d == "" {
			d = prevDomain[b]
			plan.Change.Kept = append(plan.Change.Kept, n.Name)
		}
		if d == "" {
			loose = append(loose, n.Name)
			continue
		}
		members[d] = append(members[d], n.Name)
	}
	if len(plan.Change.Kept) > 0 {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("%d nodes report no NVLink domain now and keep the block of the previous file: %s",
			len(plan.Change.Kept), nameList(plan.Change.Kept)))
	}
	if len(loose) > 0 {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("%d nodes are in no NVLink domain and are left out of the blocks: %s", len(loose), nameList(loose)))
	}
	if len(members) == 0 {
		plan.Change.compare(prevBlock, nil)
		plan.Warnings = append(plan.Warnings, plan.Change.warnings("blocks", "block")...)
		return plan, nil
	}
	names := blockNames(members, o.Previous, prevBlock, prevDomain)
	blocks := make([]Block, 0, len(members))
	for d, ns := range members {
		blocks = append(blocks, Block{Name: names[d], Domain: d, Nodes: ns})
	}
	slices.SortFunc(blocks, func(a, b Block) int { return compareNames(a.Name, b.Name) })

	sizes := o.Sizes
	if len(sizes) == 0 && o.Previous != nil {
		sizes = o.Previous.Sizes
	}
	if len(sizes) == 0 {
		sizes = inferBlockSizes(blocks)
	}
	if err := checkBlockSizes(sizes); err != nil {
		return plan, err
	}
	largest := 0
	for _, b := range blocks {
		largest = max(largest, len(b.Nodes))
	}
	for _, b := range blocks {
		switch {
		case len(b.Nodes) < sizes[0]:
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s (%s) has %d nodes, fewer than the base block size %d: left out (Slurm wants every block at least that big), its nodes in no block: %s",
				b.Name, comment(b.Domain), len(b.Nodes), sizes[0], nameList(b.Nodes)))
		case len(b.Nodes) < largest:
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s (%s) has %d nodes, fewer than the %d of the largest block: members missing?",
				b.Name, comment(b.Domain), len(b.Nodes), largest))
			plan.Blocks = append(plan.Blocks, b)
		default:
			plan.Blocks = append(plan.Blocks, b)
		}
	}
	if len(plan.Blocks) == 0 {
		return plan, fmt.Errorf("block sizes %s: every block is under the base size %d: nothing to write", intList(sizes), sizes[0])
	}
	plan.Sizes = sizes
	after := make(map[string]string)
	for _, b := range plan.Blocks {
		for _, n := range b.Nodes {
			after[n] = b.Name
		}
	}
	plan.Change.compare(prevBlock, after)
	plan.Warnings = append(plan.Warnings, plan.Change.warnings("blocks", "block")...)
	if o.Previous != nil && o.Previous.Sizes != nil && !slices.Equal(o.Previous.Sizes, sizes) {
		plan.Change.SizesBefore, plan.Change.SizesAfter = o.Previous.Sizes, sizes
	}
	return plan, nil
}

// previousBlocks maps every node of a previous block file to its block's
// name, and every block's name to its domain (the comment WriteBlocks
// puts above it, "<name>: NVLink domain, <domain>"; "block <name>" where
// the file gives none).
func previousBlocks(prev *slurmconf.Blocks) (block map[string]string, domain map[string]string) {
	if prev == nil {
		return nil, nil
	}
	block, domain = make(map[string]string), make(map[string]string)
	for _, b := range prev.Blocks {
		domain[b.Name] = blockDomainFromComment(b.Name, b.Comment)
		for _, n := range b.Nodes {
			block[n] = b.Name
		}
	}
	return block, domain
}

// blockCommentPrefix is what WriteBlocks' comment says after the name.
const blockCommentPrefix = ": NVLink domain, "

func blockDomainFromComment(name, c string) string {
	if rest, ok := strings.CutPrefix(c, name+blockCommentPrefix); ok && rest != "" {
		if strings.HasPrefix(rest, `"`) {
			if s, err := strconv.Unquote(rest); err == nil {
				return s
			}
		}
		return rest
	}
	return "block " + name
}

// blockNames names every domain of members: the previous file's name for
// it, else the previous block that held most of its nodes (not taken
// yet), else the next blockN after every number taken.
func blockNames(members map[string][]string, prev *slurmconf.Blocks, prevBlock, prevDomain map[string]string) map[string]string {
	domains := make([]string, 0, len(members))
	for d := range members {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	names := make(map[string]string, len(domains))
	taken := make(map[string]bool)
	next := 1
	if prev != nil {
		for _, b := range prev.Blocks {
			if d := prevDomain[b.Name]; members[d] != nil && names[d] == "" {
				names[d] = b.Name
				taken[b.Name] = true
			}
			if n, ok := blockNumber(b.Name); ok {
				next = max(next, n+1)
			}
		}
		for _, d := range domains {
			if names[d] != "" {
				continue
			}
			overlap := make(map[string]int)
			for _, n := range members[d] {
				if b, ok := prevBlock[n]; ok && !taken[b] {
					overlap[b]++
				}
			}
			best := ""
			for b, c := range overlap {
				if best == "" || c > overlap[best] || c == overlap[best] && b < best {
					best = b
				}
			}
			if best != "" {
				names[d] = best
				taken[best] = true
			}
		}
	}
	for _, d := range domains {
		if names[d] != "" {
			continue
		}
		for taken[blockPrefix+strconv.Itoa(next)] {
			next++
		}
		names[d] = blockPrefix + strconv.Itoa(next)
		taken[names[d]] = true
		next++
	}
	return names
}

// blockNumber is N of a name blockN.
func blockNumber(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, blockPrefix)
	if !ok || s == "" || len(s) > 9 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

// compareNames orders names by their text before a trailing number, then
// by the number (block2 before block10).
func compareNames(a, b string) int {
	pa, na := splitNumber(a)
	pb, nb := splitNumber(b)
	return cmp.Or(strings.Compare(pa, pb), cmp.Compare(na, nb), strings.Compare(a, b))
}

func splitNumber(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' && len(s)-i < 9 {
		i--
	}
	n, _ := strconv.Atoi(s[i:])
	return s[:i], n
}

// inferBlockSizes is [D, 2D, …, 2^k·D], D the node count most blocks
// have (the larger on a tie), k = floor(log2(blocks)).
func inferBlockSizes(blocks []Block) []int {
	count := make(map[int]int)
	d := 0
	for _, b := range blocks {
		n := len(b.Nodes)
		count[n]++
		if count[n] > count[d] || count[n] == count[d] && n > d {
			d = n
		}
	}
	sizes := []int{d}
	for k := bits.Len(uint(len(blocks))) - 1; k > 0; k-- {
		sizes = append(sizes, sizes[len(sizes)-1]*2)
	}
	return sizes
}

// checkBlockSizes applies topology.conf(5)'s rule for BlockSizes' values.
func checkBlockSizes(sizes []int) error {
	if len(sizes) == 0 {
		return errors.New("no block sizes")
	}
	for i, s := range sizes {
		if s < 1 {
			return fmt.Errorf("block size %d: must be at least 1", s)
		}
		if i > 0 && (s <= sizes[i-1] || s%sizes[i-1] != 0 || bits.OnesCount(uint(s/sizes[i-1])) != 1) {
			return fmt.Errorf("block sizes %s: %d is not a power of two times %d (Slurm's BlockSizes rule)", intList(sizes), s, sizes[i-1])
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
// domain (what a later run reads back), its BlockName line, and
// BlockSizes last. The file is parsed back with Slurm's rules
// (slurmconf.ParseBlocks) before anything is written.
func WriteBlocks(w io.Writer, blocks []Block, sizes []int) error {
	if len(blocks) == 0 || len(sizes) == 0 {
		return errors.New("writing topology.conf: no blocks or no block sizes")
	}
	var b strings.Builder
	b.WriteString("# Slurm topology.conf for TopologyPlugin=topology/block, written by gpuaffinity fleet slurm-block\n")
	for _, bl := range blocks {
		fmt.Fprintf(&b, "# %s%s%s\n", bl.Name, blockCommentPrefix, comment(bl.Domain))
		fmt.Fprintf(&b, "BlockName=%s Nodes=%s\n", bl.Name, Hostlist(bl.Nodes))
	}
	fmt.Fprintf(&b, "BlockSizes=%s\n", intList(sizes))
	if _, err := slurmconf.ParseBlocks([]byte(b.String())); err != nil {
		return fmt.Errorf("refusing to write a topology.conf slurmctld would not load: %w", err)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing topology.conf: %w", err)
	}
	return nil
}
