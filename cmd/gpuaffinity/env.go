//go:build !agent_only

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/launch"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// topoFileName is the file --write-topo writes in its directory: the
// name the agent gives it in its state directory.
const topoFileName = cache.NCCLTopoFile

func newEnvCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var cf cacheFlags
	var (
		localRank int
		output    string
		allRanks  bool
		writeTopo string
		writeCu   string
		platform  bool
		noMNNVL   bool
	)
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print the NCCL/UCX/libfabric environment for one local rank",
		Long: `env prints the environment one local rank needs: the front-end interface
for NCCL's sockets, the fabric variables of this node (InfiniBand/RoCE HCA
list and GID index, AWS EFA, Google GPUDirect-TCPX(O) and gIB, OCI's RoCE
settings), and the rank's GPU,
NICs, CPUs and NUMA node (GPUAFFINITY_*). Rules: docs/nccl-env.md.

On multi-node NVLink (GB200/GB300 NVL racks) NCCL decides itself whether to
use it; env warns where the NVLink fabric or the IMEX channel is not ready
(NCCL then runs without multi-node NVLink, or fails the job with a system
error), and --no-mnnvl sets NCCL_MNNVL_ENABLE=0.

The local rank comes from --local-rank, else from LOCAL_RANK, SLURM_LOCALID,
OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or PMI_LOCAL_RANK; its GPU is
entry [rank] of CUDA_VISIBLE_DEVICES when that is set. Use it as

  out=$(gpuaffinity env) || exit 1; eval "$out"

(eval "$(gpuaffinity env)" would go on after a failure). On any error
nothing is printed on stdout. Warnings (discovery's and env's own, each
once) go to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if allRanks && cmd.Flags().Changed("local-rank") {
				return fmt.Errorf("--all-ranks and --local-rank exclude each other")
			}
			format := output
			if allRanks && !cmd.Flags().Changed("output") {
				format = "table"
			}
			switch {
			case allRanks && format != "table" && format != "json":
				return fmt.Errorf("-o %q with --all-ranks: want table or json", output)
			case !allRanks && format != "sh" && format != "json" && format != "dotenv":
				return fmt.Errorf("-o %q: want sh, json or dotenv", output)
			}
			load := cf.launchNode
			if writeTopo != "" || writeCu != "" {
				// The XML is rendered from every PCI function, cufile.json
				// from the storage layer: neither is in launch.node.
				load = cf.node
			}
			n, err := load(cmd, g, &nf)
			defer nf.cleanup()
			if err != nil {
				return err
			}
			// The node's discovery warnings (an unreadable
			// Cpus_allowed_list taken as every online CPU, …) first, then
			// env's own, each once; all on stderr, so that stdout stays
			// what eval reads.
			warnings := slices.Clone(n.Warnings)
			defer func() {
				for _, w := range dedupe(warnings) {
					fmt.Fprintln(cmd.ErrOrStderr(), "gpuaffinity: warning:", w)
				}
			}()

			req := nccl.EnvRequest{TopoFile: n.TopoFile, Preset: os.LookupEnv, NoPlatform: !platform, NoMNNVL: noMNNVL}
			if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
				req.CUDAVisibleDevices = &v
			}
			if writeTopo != "" {
				if nccl.PluginWritesTopology(n) {
					warnings = append(warnings, "--write-topo: not written: on EFA nodes aws-ofi-nccl writes its own NCCL topology")
				} else {
					path, err := writeTopoFile(writeTopo, n)
					if err != nil {
						return err
					}
					req.TopoFile = path
				}
			}

			if writeCu != "" {
				path, warns, err := writeCuFile(writeCu, n)
				if err != nil {
					return err
				}
				warnings = append(warnings, warns...)
				req.CuFileJSON = path
			}

			var out bytes.Buffer
			if allRanks {
				envs, err := envAllRanks(n, req)
				if err != nil {
					return err
				}
				for _, e := range envs {
					warnings = append(warnings, e.Warnings...)
				}
				if format == "json" {
					err = nccl.WriteJSONRanks(&out, envs)
				} else {
					err = nccl.WriteRanks(&out, n, envs)
				}
				if err != nil {
					return err
				}
			} else {
				if cmd.Flags().Changed("local-rank") {
					req.Rank = &localRank
				} else {
					rank, source, err := launch.LocalRankFromEnv(os.Getenv)
					if err != nil {
						return err
					}
					req.Rank = rank
					if rank == nil {
						warnings = append(warnings, "no local rank (--local-rank, "+strings.Join(launch.LocalRankVars, ", ")+"): node-level variables only")
					} else {
						g.log.Debug("local rank", "source", source, "rank", *rank)
					}
				}
				e, err := nccl.BuildEnv(n, req)
				if err != nil {
					return err
				}
				warnings = append(warnings, e.Warnings...)
				switch format {
				case "json":
					err = nccl.WriteJSON(&out, e)
				case "dotenv":
					err = nccl.WriteDotenv(&out, e.Vars)
				default:
					err = nccl.WriteSh(&out, e.Vars)
				}
				if err != nil {
					return err
				}
			}
			_, err = cmd.OutOrStdout().Write(out.Bytes())
			return err
		},
	}
	nf.register(cmd)
	cf.register(cmd)
	cmd.Flags().IntVar(&localRank, "local-rank", 0, localRankHelp)
	cmd.Flags().StringVarP(&output, "output", "o", "sh", "output format: sh (export lines for eval), json, dotenv (systemd EnvironmentFile=, docker --env-file); with --all-ranks: table or json")
	cmd.Flags().BoolVar(&allRanks, "all-ranks", false, "show every local rank (one per GPU, or per CUDA_VISIBLE_DEVICES entry)")
	cmd.Flags().BoolVar(&platform, "platform-settings", true, "set the NCCL settings the platform publishes for its fabric (OCI RoCE QoS, Google gIB); one already in the environment keeps its value")
	cmd.Flags().BoolVar(&noMNNVL, "no-mnnvl", false, "set NCCL_MNNVL_ENABLE=0: NCCL does not use multi-node NVLink (where the fabric or IMEX is not ready; see the warnings)")
	cmd.Flags().StringVar(&writeTopo, "write-topo", "", "write the NCCL topology XML to DIR/"+topoFileName+" and point NCCL_TOPO_FILE at it (not on EFA nodes)")
	cmd.Flags().StringVar(&writeCu, "write-cufile", "", "write the node's cufile.json (as gpuaffinity cufile) to DIR/"+cufileName+" and point CUFILE_ENV_PATH_JSON at it")
	return cmd
}

// envAllRanks builds the env of every local rank: one per GPU of
// CUDA_VISIBLE_DEVICES when it is set (on an AMD node, of
// ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES: topology.ProcessGPUs), else
// one per GPU, or per compute partition where the AMD GPUs are split
// alike (nccl.RanksPerGPU).
func envAllRanks(n topology.Node, req nccl.EnvRequest) ([]nccl.Env, error) {
	sel, err := topology.ProcessGPUs(n, req.CUDAVisibleDevices, req.Preset)
	if err == nil {
		err = sel.Hidden()
	}
	if err != nil && len(n.GPUs) > 0 {
		return nil, err
	}
	// One rank per compute partition on a partitioned AMD node
	// (nccl.RanksPerGPU), else one per GPU.
	count := sel.Count() * nccl.RanksPerGPU(n, req)
	if count == 0 {
		// No GPU: the error rank 0 gets says why, instead of an empty table.
		r := 0
		req.Rank = &r
		if _, err := nccl.BuildEnv(n, req); err != nil {
			return nil, err
		}
	}
	envs := make([]nccl.Env, 0, count)
	for r := range count {
		req.Rank = &r
		e, err := nccl.BuildEnv(n, req)
		if err != nil {
			return nil, err
		}
		envs = append(envs, e)
	}
	return envs, nil
}

// writeTopoFile renders the topology XML into dir/nccl-topo.xml
// atomically (temporary file in dir, fsync, rename: internal/atomicfile)
// and returns the file's absolute path.
func writeTopoFile(dir string, n topology.Node) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--write-topo: %w", err)
	}
	var buf bytes.Buffer
	if err := nccl.TopologyXML(&buf, n, nccl.XMLOptions{}); err != nil {
		return "", fmt.Errorf("--write-topo: render the topology XML: %w", err)
	}
	path := filepath.Join(abs, topoFileName)
	if err := atomicfile.Write(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("--write-topo: %w", err)
	}
	return path, nil
}

// localRankHelp is --local-rank's help for env and exec: the variables
// are launch.LocalRankVars, the one list (TestLocalRankVarsOnce holds the
// commands' prose to it).
var localRankHelp = "local rank (default: from " + strings.Join(launch.LocalRankVars, ", ") + ")"
