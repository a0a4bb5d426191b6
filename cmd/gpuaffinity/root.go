package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// globals are the flags every command shares.
type globals struct {
	root      string
	topoFile  string
	logLevel  string
	logFormat string
	log       *slog.Logger
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	cmd := &cobra.Command{
		Use:   "gpuaffinity",
		Short: "GPU/NIC/NUMA affinity for multi-node GPU training",
		Long: `gpuaffinity discovers a GPU node (GPUs, NICs and RDMA ports, NUMA nodes,
the PCIe tree), pairs every GPU with the NIC next to it using the path
classes of nvidia-smi topo -m (PIX/PXB/PHB/NODE/SYS), and renders it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			level := g.logLevel
			if cmd.Name() == "agent" && !cmd.Flags().Changed("log.level") && !cmd.Flags().Changed("log-level") {
				// The daemon says it started, what it found and each
				// rescan; a command run per rank stays quiet.
				level = "info"
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(level)); err != nil {
				return fmt.Errorf("--log.level %q: want debug, info, warn or error", level)
			}
			// No time stamps: a command's stderr is read at once, and the
			// agent's goes to journald or the container log, which stamp it.
			opts := &slog.HandlerOptions{Level: lvl,
				ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey && len(groups) == 0 {
						return slog.Attr{}
					}
					return a
				}}
			switch g.logFormat {
			case "logfmt":
				g.log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), opts))
			case "json":
				g.log = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), opts))
			default:
				return fmt.Errorf("--log.format %q: want logfmt or json", g.logFormat)
			}
			if g.root == "" {
				return fmt.Errorf("--root must not be empty")
			}
			return nil
		},
	}
	root := rootfs.Clean(os.Getenv("GPUAFFINITY_ROOT"))
	cmd.PersistentFlags().StringVar(&g.root, "root", root,
		"filesystem root to read sys/ and proc/ (and nvml.json) under; env GPUAFFINITY_ROOT")
	// --log.level and --log.format as the Prometheus exporters spell them;
	// --log-level, the first spelling, still works.
	cmd.PersistentFlags().StringVar(&g.logLevel, "log.level", "warn", "log level: debug, info, warn, error (the agent: info)")
	cmd.PersistentFlags().StringVar(&g.logLevel, "log-level", "warn", "log level (as --log.level)")
	cmd.PersistentFlags().MarkHidden("log-level")
	cmd.PersistentFlags().StringVar(&g.logFormat, "log.format", "logfmt", "log format: logfmt, json")
	cmd.PersistentFlags().StringVar(&g.topoFile, "topo-file", "",
		"a vendor NCCL topology file (Azure's, AWS's p4d file) taken as the authority for the PCIe placement of the devices it names")
	// --version, as the Prometheus exporters and most CLIs take it: the
	// same line as the version command.
	cmd.Version = version
	cmd.SetVersionTemplate(versionLine())
	addCommands(cmd, g)
	return cmd
}

// splitList splits a comma-separated flag value, dropping empty entries.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
