package main

import (
	"fmt"
	"io"

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
gpuaffinity.audit/v1. See docs/audit.md.`,
		Example: `  sudo gpuaffinity audit
  gpuaffinity audit -o json --root /tmp/node-snapshot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			write, ok := auditWriters[output]
			if !ok {
				return fmt.Errorf("-o %q: want table or json", output)
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
			return write(cmd.OutOrStdout(), rep)
		},
	}
	nf.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json")
	cmd.Flags().BoolVar(&noEnv, "no-env", false, "do not read the processes' environments")
	return cmd
}
