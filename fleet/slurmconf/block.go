package slurmconf

import (
	"fmt"
	"math/bits"
)

// Block is one block of a topology/block topology: a BlockName line of
// topology.conf or an item of a block topology's blocks in
// topology.yaml.
type Block struct {
	// Name is BlockName= (block:), as written.
	Name string
	// Comment is the text of the comment line directly above the block,
	// as Switch.Comment.
	Comment string
	// Nodes are Nodes= (nodes:) expanded, in file order.
	Nodes []string
	// Line is the 1-based line of the block in its file.
	Line int
}

// Blocks is a topology/block topology: its blocks in file order and its
// block sizes.
type Blocks struct {
	Blocks []Block
	// Sizes are BlockSizes= (block_sizes:); nil when the file gives none
	// (Slurm then works them out from the blocks).
	Sizes []int
}

// rawBlock is a block as its file gives it, its hostlist unexpanded.
type rawBlock struct {
	name, nodes string
	hasNodes    bool
	line        int
	comment     string
}

// checkBlocks checks a block topology and expands its blocks. The rules,
// with where Slurm has them:
//
//   - names valid (ValidName) and unique (block_record_validate in
//     src/plugins/topology/block/block_record.c: "fatal: Block (%s) has
//     already been defined");
//   - each block with nodes (_parse_block: "block %s hasn't got nodes"),
//     a node in one block only (a block is a unit of placement);
//   - BlockSizes (topology.conf(5)): each at least 1, each a power of two
//     times the one before it ("Successive BlockSizes must be a power of
//     two larger than the prior values"), and every block at least
//     Sizes[0] nodes ("Each block must have at least the planning base
//     block size count of nodes").
//
// sizesLine is where the sizes are written, for their errors.
func checkBlocks(raws []rawBlock, sizes []int, sizesLine int, f form, b *budget) (Blocks, error) {
	index := make(map[string]int, len(raws))
	blockOf := make(map[string]int) // node → its block's index
	out := Blocks{Blocks: make([]Block, len(raws)), Sizes: sizes}
	for i, r := range raws {
		if err := ValidName("block", r.name); err != nil {
			return Blocks{}, fmt.Errorf("%s: %w", f.at(r.line), err)
		}
		if j, dup := index[r.name]; dup {
			return Blocks{}, fmt.Errorf("%s: block %q defined twice (first on line %d)", f.at(r.line), r.name, raws[j].line)
		}
		index[r.name] = i
		if !r.hasNodes {
			return Blocks{}, fmt.Errorf("%s: block %q: no %s", f.at(r.line), r.name, f.nodesKey)
		}
		nodes, err := b.expand(r.nodes)
		if err != nil {
			return Blocks{}, fmt.Errorf("%s: block %q: %s: %w", f.at(r.line), r.name, f.nodesKey, err)
		}
		for _, n := range nodes {
			if j, ok := blockOf[n]; ok {
				if j == i {
					return Blocks{}, fmt.Errorf("%s: block %q: node %q listed twice", f.at(r.line), r.name, n)
				}
				return Blocks{}, fmt.Errorf("%s: block %q: node %q is also in block %q (line %d)", f.at(r.line), r.name, n, raws[j].name, raws[j].line)
			}
			blockOf[n] = i
		}
		out.Blocks[i] = Block{Name: r.name, Comment: r.comment, Nodes: nodes, Line: r.line}
	}
	for i, s := range sizes {
		if s < 1 {
			return Blocks{}, fmt.Errorf("%s: %s %v: %d is under 1", f.at(sizesLine), f.sizesKey, sizes, s)
		}
		if i > 0 {
			prev := sizes[i-1]
			if s <= prev || s%prev != 0 || bits.OnesCount(uint(s/prev)) != 1 {
				return Blocks{}, fmt.Errorf("%s: %s %v: %d is not a power of two times %d", f.at(sizesLine), f.sizesKey, sizes, s, prev)
			}
		}
	}
	if len(sizes) > 0 {
		for _, bl := range out.Blocks {
			if len(bl.Nodes) < sizes[0] {
				return Blocks{}, fmt.Errorf("%s: block %q: %d nodes, under the base block size %d (the first of %s %v)",
					f.at(bl.Line), bl.Name, len(bl.Nodes), sizes[0], f.sizesKey, sizes)
			}
		}
	}
	return out, nil
}
