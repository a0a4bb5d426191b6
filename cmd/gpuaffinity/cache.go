//go:build !agent_only

package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// cacheFlags is --state-dir of the commands that can take the node from
// the agent's topology.json instead of discovering it again.
type cacheFlags struct{ stateDir string }

func (c *cacheFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.stateDir, "state-dir", stateDirDefault(),
		`take the node from the agent's DIR/topology.json when it is from this boot (env GPUAFFINITY_STATE_DIR): on the live root without --demo, --topo-file or NIC role flags, or under any --root when the directory is given explicitly; "" never`)
}

// node returns the node: the agent's cached one where that is the truth,
// else a fresh discovery. The cache is used only without --demo,
// --topo-file, --compute-nics, --exclude-nics and --storage-nics: flags given to this
// command are honoured by discovering with them. (An agent started with
// --topo-file or role flags writes its node with them applied; a plain
// command then takes that node, as the node's configured truth.) It is
// used only on the live root unless the state
// directory was named (--state-dir or GPUAFFINITY_STATE_DIR). A cache
// that is missing, older than the boot, undecodable or of another schema
// is passed over with a debug log.
func (c *cacheFlags) node(cmd *cobra.Command, g *globals, nf *nodeFlags) (topology.Node, error) {
	return c.load(cmd, g, nf, false)
}

// launchNode is node for a command that renders no PCI function list,
// path matrix or NVLink (env without --write-topo, cpumap): from the
// agent's compact launch.node where it wrote one.
func (c *cacheFlags) launchNode(cmd *cobra.Command, g *globals, nf *nodeFlags) (topology.Node, error) {
	return c.load(cmd, g, nf, true)
}

func (c *cacheFlags) load(cmd *cobra.Command, g *globals, nf *nodeFlags, launch bool) (topology.Node, error) {
	explicit := cmd.Flags().Changed("state-dir") || os.Getenv("GPUAFFINITY_STATE_DIR") != ""
	roles := nf.roles()
	if c.stateDir != "" && nf.demo == "" && g.topoFile == "" && len(roles.ComputeNICs) == 0 &&
		len(roles.ExcludeNICs) == 0 && len(roles.StorageNICs) == 0 && (explicit || rootfs.IsLive(g.root)) {
		n, err := cache.Load(cache.Options{Dir: c.stateDir, Root: g.root, TrustWithoutBoot: explicit, Launch: launch})
		if err == nil {
			g.log.Debug("node from the agent's state directory", "dir", c.stateDir)
			warnUnsupported(g, n)
			return n, nil
		}
		if errors.Is(err, cache.ErrUntrusted) {
			g.log.Warn("agent's topology not used (another user could have written it); discovering", "reason", err)
		} else {
			g.log.Debug("agent's topology not used; discovering", "reason", err)
		}
	}
	return nf.discover(cmd, g)
}
