//go:build !agent_only

package main

import (
	"bytes"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/nccl"
)

func newNCCLTopoCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var out string
	var synth bool
	cmd := &cobra.Command{
		Use:   "nccl-topo [-f FILE]",
		Short: "Write the node's NCCL topology XML (for NCCL_TOPO_FILE)",
		Long: `nccl-topo writes this node's PCIe tree as an NCCL topology file, in the
form NCCL's own loader accepts (docs/nccl-topo.md): one <cpu> per NUMA node
holding a GPU or NIC, a <pci> per PCIe switch and per GPU and compute NIC.
With -f the file is replaced atomically. --synthesize-switches groups each
GPU with its paired NIC(s) under a virtual switch where a VM hides the real
ones (Azure ND); the grouping is inferred and says so in a comment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := nf.discover(cmd, g)
			defer nf.cleanup()
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := nccl.TopologyXML(&buf, n, nccl.XMLOptions{SynthesizeSwitches: synth}); err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			if err := atomicfile.Write(out, buf.Bytes(), 0o644); err != nil {
				return fmt.Errorf("nccl-topo: %w", err)
			}
			return nil
		},
	}
	nf.register(cmd)
	outputFileFlag(cmd, &out, "write to FILE (atomically) instead of stdout")
	cmd.Flags().BoolVar(&synth, "synthesize-switches", false, "group each GPU with its paired NIC(s) under a virtual switch where the VM hides the switches (inferred)")
	return cmd
}
