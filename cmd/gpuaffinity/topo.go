//go:build !agent_only

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/internal/demo"
	"github.com/gpuaffinity/gpuaffinity/render"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

var renderers = map[string]func(io.Writer, topology.Node) error{
	"table":   render.Table,
	"json":    render.JSON,
	"dot":     render.DOT,
	"mermaid": render.Mermaid,
}

func newTopoCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var output string
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Show GPUs, NICs, path classes and GPU→NIC pairs",
		Long: `topo prints the node's topology: by default a matrix in the style of
nvidia-smi topo -m followed by the GPU→NIC pairs; -o json gives the stable
contract (schema gpuaffinity.topology/v1, docs/topology-json.md); -o dot and
-o mermaid draw the node.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if nf.demo == "list" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), strings.Join(demo.Machines(), "\n"))
				return err
			}
			r, ok := renderers[output]
			if !ok {
				return fmt.Errorf("-o %q: want table, json, dot or mermaid", output)
			}
			n, err := nf.discover(cmd, g)
			defer nf.cleanup()
			if err != nil {
				return err
			}
			return r(cmd.OutOrStdout(), n)
		},
	}
	nf.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json, dot, mermaid")
	return cmd
}
