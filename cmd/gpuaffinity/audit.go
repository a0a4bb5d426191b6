//go:build !agent_only

package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/audit"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

var auditWriters = map[string]func(io.Writer, audit.Report) error{
	"table": audit.WriteTable,
	"json":  audit.WriteJSON,
}

func newAuditCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var output string
	var noEnv bool
	var fabricInterval time.Duration
	// The audit reads the root's /proc and KFD files after discovery: a
	// --demo machine is built on disk.
	nf.onDisk = true
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Hold every running GPU process to its GPU's CPUs, memory node and NICs",
		Long: `audit lists every process using a GPU (NVIDIA: NVML's running compute and
graphics processes; AMD: KFD's /sys/class/kfd/kfd/proc entries) with its
user, Slurm job and step or Kubernetes pod (from /proc/PID/cgroup), the
GPUs it drives, its allowed CPUs and memory nodes (/proc/PID/status, and
each thread's where they differ), and a verdict: aligned (every allowed
CPU is local to its GPU), partly (some are not), misaligned (none is),
unbound (every online CPU, the default of an unbound process) or unknown.
Where /proc/PID/environ is readable (root, or the process's owner), its
CUDA_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES, NCCL_IB_HCA,
NCCL_SOCKET_IFNAME and UCX_NET_DEVICES are held to what env sets for its
GPUs. What could not be read is said, with why. -o json gives schema
gpuaffinity.audit/v1. See docs/audit.md.

With --fabric-interval D it also reads every RDMA port's transmit data
counter twice, D apart, and reports the fabric balance: the compute NIC
ports a busy GPU leaves idle (under 1% of the busiest compute port's rate
while that port carries at least 1% of its link rate) and the storage
NIC ports that transmit the compute fabric's volume (at least the median
busy compute port's rate). A counter reset, or a port that vanished, is
said, never turned into a rate. See docs/audit.md, "Fabric balance".`,
		Example: `  sudo gpuaffinity audit
  sudo gpuaffinity audit --fabric-interval 10s
  gpuaffinity audit -o json --root /tmp/node-snapshot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			write, ok := auditWriters[output]
			if !ok {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			if fabricInterval < 0 {
				return fmt.Errorf("--fabric-interval %s: want a positive duration, or 0 for none", fabricInterval)
			}
			n, err := nf.discover(cmd, g)
			defer nf.cleanup()
			if err != nil {
				return err
			}
			root, err := rootfs.Open(nf.root(g))
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			defer root.Close()
			lib, _, err := nvml.OpenRoot(root)
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			uses, unread := audit.Uses(n, root, lib)
			rep := audit.Run(n, root, uses, unread, audit.Options{NoEnv: noEnv})
			if fabricInterval > 0 {
				f, err := sampleFabric(cmd.Context(), audit.NewFabricSampler(root), fabricInterval)
				if err != nil {
					return fmt.Errorf("audit: --fabric-interval: %w", err)
				}
				fb := audit.FabricBalance(n, uses, f[0], f[1])
				rep.Fabric = &fb
			}
			return write(cmd.OutOrStdout(), rep)
		},
	}
	nf.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json")
	cmd.Flags().BoolVar(&noEnv, "no-env", false, "do not read the processes' environments")
	cmd.Flags().DurationVar(&fabricInterval, "fabric-interval", 0, "read the RDMA ports' transmit counters twice this far apart and report the fabric balance (idle compute NICs, storage NICs carrying compute traffic); 0 (the default) reads none")
	return cmd
}

// sampleFabric takes two fabric samples d apart; it stops early, with
// ctx's error, when ctx ends.
func sampleFabric(ctx context.Context, s *audit.FabricSampler, d time.Duration) ([2]audit.FabricSample, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var out [2]audit.FabricSample
	out[0] = s.Sample(ctx)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return out, ctx.Err()
	case <-t.C:
	}
	out[1] = s.Sample(ctx)
	return out, ctx.Err()
}
