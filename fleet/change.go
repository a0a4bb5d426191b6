package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
)

// Change is how a file a run writes differs from the one an earlier run
// wrote (the previous file): what a Guard judges before the file
// replaces it.
type Change struct {
	// Previous is how many nodes the previous file holds; 0 where there
	// is none.
	Previous int `json:"previous"`
	// Dropped are the nodes the previous file holds and the new one
	// does not (gone longer than the reader's lookback, refused, left
	// out), sorted.
	Dropped []string `json:"dropped"`
	// Kept are the nodes whose placement is empty or partial now and
	// that keep what the previous file gave them, sorted.
	Kept []string `json:"kept"`
	// Moved are the nodes under another leaf, or in another block, than
	// in the previous file, sorted.
	Moved []string `json:"moved"`
	// SizesBefore and SizesAfter are BlockSizes in the previous file
	// and the new one where they differ; nil where they do not.
	SizesBefore []int `json:"sizes_before,omitempty"`
	SizesAfter  []int `json:"sizes_after,omitempty"`
}

// compare fills the change from each node's place (leaf or block) in the
// previous file and in the new one.
func (c *Change) compare(before, after map[string]string) {
	c.Previous = len(before)
	for n, p := range before {
		switch q, ok := after[n]; {
		case !ok:
			c.Dropped = append(c.Dropped, n)
		case q != p:
			c.Moved = append(c.Moved, n)
		}
	}
	sort.Strings(c.Dropped)
	sort.Strings(c.Moved)
	sort.Strings(c.Kept)
}

// warnings are the change's lines for a run's warnings: the nodes
// dropped from what (the tree, the blocks) and moved to another place
// (leaf, block) since the previous file, so that no node leaves a file
// unnamed.
func (c *Change) warnings(what, place string) []string {
	var out []string
	if len(c.Dropped) > 0 {
		out = append(out, fmt.Sprintf("%d nodes of the previous file are not in the %s now (gone longer than the lookback, refused or left out): %s",
			len(c.Dropped), what, nameList(c.Dropped)))
	}
	if len(c.Moved) > 0 {
		out = append(out, fmt.Sprintf("%d nodes are in another %s than in the previous file: %s", len(c.Moved), place, nameList(c.Moved)))
	}
	return out
}

// Threshold is how many nodes a run may drop: Count nodes, or Percent
// of the previous file's (one of them is set).
type Threshold struct {
	Count   int
	Percent float64
}

// DefaultMaxDrop is the Threshold a run may drop without --force: 1 %
// of the previous file's nodes (rounded down, so on a cluster under 100
// nodes any drop needs --force). Nodes are dropped when they are gone
// for longer than the reader's lookback, refused, or left out; a whole
// rack retired is a reviewed change, a Prometheus that lost a shard is
// not.
var DefaultMaxDrop = Threshold{Percent: 1}

// ParseThreshold reads "N" (nodes) or "P%" (percent of the previous
// file's nodes).
func ParseThreshold(s string) (Threshold, error) {
	if p, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v < 0 || v > 100 || math.IsNaN(v) {
			return Threshold{}, fmt.Errorf("threshold %q: want a percentage from 0%% to 100%%", s)
		}
		return Threshold{Percent: v}, nil
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 {
		return Threshold{}, fmt.Errorf("threshold %q: want a number of nodes or a percentage (5%%)", s)
	}
	return Threshold{Count: v}, nil
}

// String is the threshold as ParseThreshold reads it.
func (t Threshold) String() string {
	if t.Count > 0 || t.Percent == 0 {
		return strconv.Itoa(t.Count)
	}
	return strconv.FormatFloat(t.Percent, 'f', -1, 64) + "%"
}

// Allowed is how many of previous nodes the threshold lets a run drop.
func (t Threshold) Allowed(previous int) int {
	if t.Count > 0 || t.Percent == 0 {
		return t.Count
	}
	return int(math.Floor(t.Percent / 100 * float64(previous)))
}

// Guard refuses a change larger than a site allows unless forced: more
// dropped nodes than MaxDrop, or other BlockSizes than the previous
// file's.
type Guard struct {
	MaxDrop Threshold
	Force   bool
}

// ErrRefused is wrapped by Guard.Check's error.
var ErrRefused = errors.New("refused without --force")

// Check returns nil where the change is within the guard (or forced, or
// there is no previous file), else an error naming what it refuses and
// the nodes.
func (g Guard) Check(c Change) error {
	if g.Force || c.Previous == 0 {
		return nil
	}
	var why []string
	if allowed := g.MaxDrop.Allowed(c.Previous); len(c.Dropped) > allowed {
		why = append(why, fmt.Sprintf("it drops %d of the previous file's %d nodes, more than --max-drop %s allows (%d): %s",
			len(c.Dropped), c.Previous, g.MaxDrop, allowed, nameList(c.Dropped)))
	}
	if c.SizesAfter != nil && !slices.Equal(c.SizesBefore, c.SizesAfter) {
		why = append(why, fmt.Sprintf("it changes BlockSizes from %s to %s", intList(c.SizesBefore), intList(c.SizesAfter)))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (nothing written; check the nodes and the agents' series, then run again with --force to accept it)",
		ErrRefused, strings.Join(why, "; "))
}

// parsePrevious parses the previous file (nil where there is none) with
// parse; one that does not parse is an error unless g is forced, and is
// then not used.
func parsePrevious[T any](previous []byte, parse func([]byte) (T, error), g Guard) (*T, error) {
	if previous == nil {
		return nil, nil
	}
	v, err := parse(previous)
	switch {
	case err == nil:
		return &v, nil
	case g.Force:
		return nil, nil
	}
	return nil, fmt.Errorf("the previous file: %w (fix or remove it, or run with --force to write without it)", err)
}

// TreeFile is what `fleet slurm-tree` writes: Tree's plan for the nodes,
// with the file previous (nil: none) as TreeOptions.Previous, rendered
// by WriteTree once g accepts its change. A previous file that does not
// parse is an error unless g is forced (then it is not used).
func TreeFile(nodes []Node, previous []byte, o TreeOptions, g Guard) ([]byte, TreePlan, error) {
	prev, err := parsePrevious(previous, slurmconf.ParseTree, g)
	if err != nil {
		return nil, TreePlan{}, err
	}
	if prev != nil {
		o.Previous = prev
	}
	plan, err := Tree(nodes, o)
	if err != nil {
		return nil, plan, err
	}
	if len(plan.Switches) == 0 {
		return nil, plan, errors.New("no node has network tiers: nothing to write (see the agent's --placement flags)")
	}
	if err := g.Check(plan.Change); err != nil {
		return nil, plan, err
	}
	var b bytes.Buffer
	err = WriteTree(&b, plan.Switches)
	return b.Bytes(), plan, err
}

// BlockFile is what `fleet slurm-block` writes: Blocks' plan for the
// nodes with the file previous (nil: none) as BlockOptions.Previous,
// rendered by WriteBlocks once g accepts its change.
func BlockFile(nodes []Node, previous []byte, o BlockOptions, g Guard) ([]byte, BlockPlan, error) {
	prev, err := parsePrevious(previous, slurmconf.ParseBlocks, g)
	if err != nil {
		return nil, BlockPlan{}, err
	}
	if prev != nil {
		o.Previous = prev
	}
	plan, err := Blocks(nodes, o)
	if err != nil {
		return nil, plan, err
	}
	if len(plan.Blocks) == 0 {
		return nil, plan, errors.New("no node is in an NVLink clique: nothing to write")
	}
	if err := g.Check(plan.Change); err != nil {
		return nil, plan, err
	}
	var b bytes.Buffer
	err = WriteBlocks(&b, plan.Blocks, plan.Sizes)
	return b.Bytes(), plan, err
}

// YAMLFile is what `fleet slurm-yaml` writes: the tree and the blocks,
// each planned against its topology in the file previous (nil: none),
// rendered by WriteTopologyYAML once g accepts both changes.
func YAMLFile(nodes []Node, previous []byte, to TreeOptions, bo BlockOptions, g Guard) ([]byte, TreePlan, BlockPlan, error) {
	topos, err := parsePrevious(previous, slurmconf.ParseYAML, g)
	if err != nil {
		return nil, TreePlan{}, BlockPlan{}, err
	}
	if topos != nil {
		to.Previous, bo.Previous = PreviousYAML(*topos)
	}
	tp, err := Tree(nodes, to)
	if err != nil {
		return nil, tp, BlockPlan{}, err
	}
	bp, err := Blocks(nodes, bo)
	if err != nil {
		return nil, tp, bp, err
	}
	if len(tp.Switches) == 0 && len(bp.Blocks) == 0 {
		return nil, tp, bp, errors.New("no node has network tiers or an NVLink clique: nothing to write")
	}
	if err := g.Check(tp.Change); err != nil {
		return nil, tp, bp, fmt.Errorf("the tree: %w", err)
	}
	if err := g.Check(bp.Change); err != nil {
		return nil, tp, bp, fmt.Errorf("the blocks: %w", err)
	}
	var b bytes.Buffer
	err = WriteTopologyYAML(&b, tp.Switches, bp.Blocks, bp.Sizes)
	return b.Bytes(), tp, bp, err
}
