//go:build !agent_only

package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/cufile"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// cufileName is the file env --write-cufile writes in its directory.
const cufileName = "cufile.json"

func newCuFileCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var out, merge string
	cmd := &cobra.Command{
		Use:   "cufile [-f FILE] [--merge FILE]",
		Short: "Write cuFile's cufile.json for this node (GPUDirect Storage)",
		Long: `cufile writes the GPUDirect Storage configuration file cufile.json
(docs/cufile.md): each mounted network file system's client RDMA addresses
(fs.<fs>.rdma_dev_addr_list, or fs.<fs>.mount_table per mount point where
the mounts use different NICs), P2PDMA on where the node supports it, and
dynamic routing where a GPU shares no PCIe switch with a storage NIC.
Every other setting is NVIDIA's default; with --merge FILE it is FILE's,
kept as written (comments are dropped). FILE holding an object that
gpuaffinity writes into twice (two "properties", two fs.nfs) is refused,
naming the key and its lines, and nothing is written: cuFile does not
document which copy it reads. With -f the file is replaced atomically;
--merge /etc/cufile.json -f /etc/cufile.json updates it in place. Point a job at another file with CUFILE_ENV_PATH_JSON (env
--write-cufile DIR does). Warnings go to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := nf.discover(cmd, g)
			defer nf.cleanup()
			if err != nil {
				return err
			}
			data, warnings, err := renderCuFile(n, merge)
			defer func() {
				for _, w := range dedupe(warnings) {
					fmt.Fprintln(cmd.ErrOrStderr(), "gpuaffinity: warning:", w)
				}
			}()
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := atomicfile.Write(out, data, 0o644); err != nil {
				return fmt.Errorf("cufile: %w", err)
			}
			return nil
		},
	}
	nf.register(cmd)
	outputFileFlag(cmd, &out, "write to FILE (atomically) instead of stdout")
	cmd.Flags().StringVar(&merge, "merge", "", "start from FILE (an existing cufile.json, comments allowed) instead of NVIDIA's default, keeping every setting gpuaffinity does not own")
	return cmd
}

// renderCuFile renders node n's cufile.json, into the file at merge when
// that is set, and returns it with the node's warnings and the
// renderer's.
func renderCuFile(n topology.Node, merge string) ([]byte, []string, error) {
	s := cufile.FromNode(n)
	warnings := append(slices.Clone(n.Warnings), s.Warnings...)
	if merge == "" {
		data, err := cufile.Render(s)
		return data, warnings, err
	}
	// A bounded, non-blocking read: a FIFO or device named as the file
	// is refused, not waited on or read for ever.
	src, err := sysattr.ReadFileLimit(merge, cufile.MaxFileSize)
	switch {
	case errors.Is(err, sysattr.ErrTooLarge):
		return nil, warnings, fmt.Errorf("--merge %s: more than %d bytes: %w", merge, cufile.MaxFileSize, err)
	case err != nil:
		return nil, warnings, fmt.Errorf("--merge %s: %w", merge, err)
	}
	data, notes, err := cufile.Merge(merge, src, s)
	if err != nil {
		return nil, warnings, fmt.Errorf("--merge: %w", err)
	}
	return data, append(warnings, notes...), nil
}

// writeCuFile renders the node's cufile.json into dir/cufile.json
// atomically and returns the file's absolute path.
func writeCuFile(dir string, n topology.Node) (string, []string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, fmt.Errorf("--write-cufile: %w", err)
	}
	s := cufile.FromNode(n)
	data, err := cufile.Render(s)
	if err != nil {
		return "", nil, fmt.Errorf("--write-cufile: %w", err)
	}
	path := filepath.Join(abs, cufileName)
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return "", nil, fmt.Errorf("--write-cufile: %w", err)
	}
	return path, s.Warnings, nil
}
