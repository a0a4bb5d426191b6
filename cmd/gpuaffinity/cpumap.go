//go:build !agent_only

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/binding"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

var cpumapWriters = map[string]func(io.Writer, binding.Map) error{
	"table":   binding.WriteTable,
	"json":    binding.WriteJSON,
	"numactl": binding.WriteNumactl,
	"taskset": binding.WriteTaskset,
}

func newCpumapCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var cf cacheFlags
	var mode, output string
	var ranksPerGPU, localRank int
	cmd := &cobra.Command{
		Use:   "cpumap",
		Short: "Show the CPUs and memory node(s) of every local rank",
		Long: `cpumap prints, for each local rank, the GPU it drives (rank r drives
device r / --ranks-per-gpu of CUDA_VISIBLE_DEVICES when set, else of the
GPUs in index order; exec and env map ranks the same way), the CPUs it should run on and the
NUMA node(s) its memory should come from. Modes: node (every allowed CPU
of the GPU's NUMA node), socket (every allowed CPU of its socket),
exclusive (default: the node's allowed physical cores split evenly among
its GPUs' ranks, whole cores with their SMT siblings, no CPU given twice).
Never a CPU outside this process's Cpus_allowed_list. -o numactl prints
"--physcpubind=... --membind=..." per rank, -o taskset the CPU list per
rank; warnings then go to stderr. See docs/cpumap.md.`,
		Example: `  gpuaffinity cpumap
  numactl $(gpuaffinity cpumap -o numactl --local-rank "$LOCAL_RANK") -- python train.py
  taskset -c "$(gpuaffinity cpumap -o taskset --mode node --local-rank "$LOCAL_RANK")" python train.py`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			write, ok := cpumapWriters[output]
			if !ok {
				return fmt.Errorf("-o %q: want table, json, numactl or taskset", output)
			}
			m, err := binding.ParseMode(mode)
			if err != nil {
				return fmt.Errorf("--mode: %w", err)
			}
			if ranksPerGPU < 1 {
				return fmt.Errorf("--ranks-per-gpu %d: want at least 1", ranksPerGPU)
			}
			n, err := cf.launchNode(cmd, g, &nf)
			defer nf.cleanup()
			if err != nil {
				return err
			}
			// Ranks drive the GPUs this process sees, as under exec and env.
			var cvd *string
			if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
				cvd = &v
			}
			if !cmd.Flags().Changed("ranks-per-gpu") {
				// One rank per compute partition on a partitioned AMD node.
				ranksPerGPU = nccl.RanksPerGPU(n, nccl.EnvRequest{CUDAVisibleDevices: cvd, Preset: os.LookupEnv})
			}
			bm, err := binding.Compute(n, binding.Options{Mode: m, RanksPerGPU: ranksPerGPU})
			if err != nil {
				return fmt.Errorf("cpumap: %w", err)
			}
			sel, err := topology.ProcessGPUs(n, cvd, os.LookupEnv)
			if err != nil {
				return fmt.Errorf("cpumap: %w", err)
			}
			if cmd.Flags().Changed("local-rank") {
				if bm, err = bm.Only(n, sel, localRank); err != nil {
					return fmt.Errorf("--local-rank: %w", err)
				}
			} else if bm, err = bm.ForSelection(n, sel); err != nil {
				return fmt.Errorf("cpumap: %w", err)
			}
			var out bytes.Buffer
			if err := write(&out, bm); err != nil {
				return err
			}
			if output == "numactl" || output == "taskset" {
				// These forms are spliced into command lines: warnings go
				// to stderr, those of the ranks shown only.
				var warns []string
				for _, r := range bm.Ranks {
					for _, w := range r.Warnings {
						if !slices.Contains(warns, w) {
							warns = append(warns, w)
						}
					}
				}
				for _, w := range bm.Warnings {
					if !strings.HasPrefix(w, "GPU ") && !slices.Contains(warns, w) {
						warns = append(warns, w)
					}
				}
				for _, w := range warns {
					fmt.Fprintln(cmd.ErrOrStderr(), "gpuaffinity cpumap: warning:", w)
				}
			}
			_, err = cmd.OutOrStdout().Write(out.Bytes())
			return err
		},
	}
	nf.register(cmd)
	cf.register(cmd)
	cmd.Flags().StringVar(&mode, "mode", string(binding.ModeExclusive), "binding mode: node, socket or exclusive")
	cmd.Flags().IntVar(&ranksPerGPU, "ranks-per-gpu", 1, "local ranks per GPU; exclusive mode splits a GPU's share among them (default 1; on AMD GPUs split into K compute partitions, K: one rank per partition)")
	cmd.Flags().IntVar(&localRank, "local-rank", 0, "print only this local rank (default: every rank)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json, numactl, taskset")
	return cmd
}
