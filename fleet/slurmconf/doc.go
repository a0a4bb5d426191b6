// Package slurmconf parses and validates the three files gpuaffinity
// fleet writes for Slurm, as Slurm's man pages give their grammar and
// as slurmctld enforces it, so that a writer can read its own output
// back (and the file an earlier run wrote) and refuse to install a file
// slurmctld would reject:
//
//   - topology.conf(5) for TopologyPlugin=topology/tree (ParseTree):
//     "SwitchName=<name> Nodes=<hostlist>" or "SwitchName=<name>
//     Switches=<hostlist>", optional LinkSpeed=<n>, parameter names
//     case-insensitive, '#' a comment to the end of the line.
//   - topology.conf(5) for TopologyPlugin=topology/block (ParseBlocks):
//     "BlockName=<name> Nodes=<hostlist>" lines and, last,
//     "BlockSizes=<n>[,<n>...]": "Each block must have at least the
//     planning base block size count of nodes. Successive BlockSizes
//     must be a power of two larger than the prior values."
//   - topology.yaml(5) (Slurm 25.05 and newer; ParseYAML): a list of
//     topologies, each with "topology" (a unique name, the first
//     attribute), optional "cluster_default", and exactly one of "block"
//     {block_sizes, blocks: [{block, nodes}]}, "flat: true" or "tree"
//     {switches: [{switch, children | nodes}]}.
//
// It is written from the man pages and Slurm's sources, not from package
// fleet's writers (it has its own hostlist expander and never imports
// fleet), so that it checks them rather than repeating them. It exists
// because the Slurm a test machine can install does not read all of
// these files: Debian's slurmctld (22.05) has topology/tree but neither
// the topology/block plugin (Slurm 23.11) nor topology.yaml (25.05).
//
// Parsing does no I/O and is linear in the file's size and the names
// its hostlists expand to; those are bounded by MaxNames per file, so a
// broken or hostile file ("Nodes=n[0-999999999]") is an error, not an
// exhausted memory. Every error names the file and where in it: the
// line for topology.conf, the line, topology and switch or block for
// topology.yaml.
//
// The parsed values are plain data: names as written, hostlists
// expanded, in file order, with the comment line above each switch or
// block (which fleet's writers use for the ID a name stands for). What
// not to add here: anything that knows fleet's nodes or writes files.
package slurmconf
