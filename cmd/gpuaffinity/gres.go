//go:build !agent_only

package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/gres"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/internal/demo"
)

func newGresCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var opts gres.Options
	var out string
	cmd := &cobra.Command{
		Use:   "gres [-f FILE]",
		Short: "Write Slurm gres.conf lines for the node's GPUs",
		Long: `gres writes a Slurm gres.conf for this node's GPUs (docs/gres.md): one
line per GPU in PCI bus order (Slurm's device order),

  Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55 Links=-1,18,...

Cores= holds Slurm core indices (socket 0's physical cores first, one index
per core whatever its SMT threads), not CPU ids; Links= the NVLink count to
each GPU where NVML reports NVLink. The file starts with AutoDetect=off. With
-f the file is replaced atomically; warnings (a GPU without locality, model
or minor number) go to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if nf.demo == "list" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), strings.Join(demo.Machines(), "\n"))
				return err
			}
			n, err := nf.discover(cmd, g)
			defer nf.cleanup()
			if err != nil {
				return err
			}
			lines, warns, err := gres.GresConf(n, opts)
			for _, w := range warns {
				g.log.Warn("gres", "warning", w)
			}
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := gres.Write(&buf, lines); err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			if err := atomicfile.Write(out, buf.Bytes(), 0o644); err != nil {
				return fmt.Errorf("gres: %w", err)
			}
			return nil
		},
	}
	nf.register(cmd)
	outputFileFlag(cmd, &out, "write to FILE (atomically) instead of stdout")
	cmd.Flags().StringVar(&opts.Type, "type", "", `Type= for every GPU (default: from the model, "NVIDIA H100 80GB HBM3" → h100)`)
	cmd.Flags().StringVar(&opts.DevDir, "dev-dir", "/dev", "directory of the nvidiaN device files File= names")
	cmd.Flags().BoolVar(&opts.NoLinks, "no-links", false, "omit Links= (needed with AutoDetect=nvml on NVSwitch systems)")
	return cmd
}
