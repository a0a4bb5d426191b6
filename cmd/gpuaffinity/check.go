//go:build !agent_only

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/gres"
	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/internal/clip"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Exit codes of check.
const (
	checkExitUnhealthy = 1
	checkExitUnknown   = 2
)

func newCheckCmd(g *globals) *cobra.Command {
	nf := nodeFlags{onDisk: true} // its checks read the root after discovery
	var (
		output, profile, expectFile, gpus, nfdFile, slurmNode, kmsg string
		learn, multiNode, drain, resume, nfdGFDClique, jobs         bool
		interval, timeout, nfdExpiry                                time.Duration
		only                                                        []string
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check GPU, NVLink, NIC and GPU↔NIC health (exit 0 healthy, 1 unhealthy, 2 could not check)",
		Long: `check runs quick health checks (sysfs, NVML answers from discovery, the
kernel log, RDMA port counters) and prints one verdict per check: pass, warn,
fail or skip. Exit status: 0 healthy, 1 unhealthy, 2 could not check.

--learn prints the node's expectations as YAML; --expect FILE holds the node
to them. --gpus (else SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES) checks only
those GPUs and their paired NICs. -o nhc prints an LBNL NHC failure line,
-o npd follows the node-problem-detector plugin protocol, --slurm-drain and
--slurm-resume drain or resume this node through scontrol, --nfd-file writes
a Node Feature Discovery feature file. --jobs also runs jobs.aligned: it
fails where a running GPU process is misaligned (none of its allowed CPUs
local to its GPU) and warns where one is unbound or partly bound; it is not
for shared nodes, nodes where unbound jobs are the norm, a prolog, or a run
as another user than root. See docs/health.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			unknown := func(err error) error { return exitError{code: checkExitUnknown, err: err} }
			switch output {
			case "text", "json", "nhc", "npd":
			default:
				return unknown(fmt.Errorf("-o %q: want text, json, nhc or npd", output))
			}
			if nfdExpiry <= 0 {
				return unknown(fmt.Errorf("--nfd-expiry %s: want more than 0 (labels that never expire outlive a check that stopped running)", nfdExpiry))
			}
			prof, err := health.ParseProfile(profile)
			if err != nil {
				return unknown(err)
			}
			n, err := nf.discover(cmd, g)
			defer nf.cleanup()
			if err != nil {
				return checkUnknown(cmd, output, unknown(fmt.Errorf("discovery: %w", err)))
			}
			if learn {
				b, err := health.Learn(n).YAML()
				if err != nil {
					return unknown(err)
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			opts := health.Options{Root: nf.root(g), Profile: prof, MultiNode: multiNode, Interval: interval,
				Timeout: timeout, Kmsg: kmsg, Only: splitList(only), Jobs: jobs}
			if expectFile != "" {
				if opts.Expect, err = loadExpect(expectFile); err != nil {
					return checkUnknown(cmd, output, unknown(err))
				}
			}
			var flag *string
			if cmd.Flags().Changed("gpus") {
				flag = &gpus
			}
			sel, narrowed, err := topology.JobGPUs(n, flag, os.LookupEnv)
			if err != nil {
				return checkUnknown(cmd, output, unknown(err))
			}
			if narrowed {
				opts.GPUs = sel.GPUs
			}
			rep, err := health.Run(cmd.Context(), n, opts)
			if err != nil {
				return checkUnknown(cmd, output, unknown(err))
			}
			if err := writeCheck(cmd.OutOrStdout(), output, rep); err != nil {
				return unknown(err)
			}
			if nfdFile != "" {
				nfd := health.NFDOptions{GFDClique: nfdGFDClique}.Features(rep, n, time.Now().Add(nfdExpiry))
				if err := atomicfile.Write(nfdFile, []byte(nfd), 0o644); err != nil {
					return unknown(err)
				}
			}
			if drain || resume {
				name := slurmNode
				if name == "" {
					if name, err = os.Hostname(); err != nil {
						return unknown(err)
					}
				}
				name = gres.ShortName(name)
				if err := slurmAct(cmd.Context(), cmd.ErrOrStderr(), name, rep, drain, resume); err != nil {
					return unknown(err)
				}
			}
			if !rep.Healthy {
				return exitError{code: checkExitUnhealthy, err: errors.New("unhealthy: " + rep.Summary())}
			}
			return nil
		},
	}
	nf.register(cmd)
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "text", "output format: text, json, nhc, npd")
	f.StringVar(&profile, "profile", string(health.Pretrain), "what the node is for: pretrain (all checks enforced), finetune (fabric enforced only with --multi-node), inference (GPU checks enforced, fabric failures warn)")
	f.BoolVar(&multiNode, "multi-node", false, "the job spans nodes: the finetune profile then enforces the fabric checks")
	f.StringVar(&expectFile, "expect", "", "hold the node to expectations from this YAML file (see --learn)")
	f.BoolVar(&learn, "learn", false, "print this node's expectations as YAML and exit")
	f.StringVar(&gpus, "gpus", "", "check only these GPUs (indices, UUIDs or bus ids) and their paired NICs; default SLURM_JOB_GPUS, then CUDA_VISIBLE_DEVICES")
	f.DurationVar(&interval, "interval", time.Second, "time between the two reads of the NIC error counters; 0 skips nic.errors")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "deadline of each check; a check past it fails with 'timed out'")
	listVar(f, &only, "only", nil, "run only these check ids")
	f.BoolVar(&jobs, "jobs", false, "also run jobs.aligned: fail where a running GPU process is bound to none of its GPU's local CPUs, warn where one is unbound or partly bound (reads every GPU process's /proc: run as root; see docs/health.md for when not to use it)")
	f.StringVar(&kmsg, "kmsg", "", "kernel log to scan for XIDs (default /dev/kmsg under --root)")
	f.BoolVar(&drain, "slurm-drain", false, `when unhealthy, drain this node (unless drained with another reason): scontrol update nodename=<host> state=drain reason="gpuaffinity: <reason>"`)
	f.BoolVar(&resume, "slurm-resume", false, "when healthy, resume this node if its drain reason starts with gpuaffinity:")
	f.StringVar(&slurmNode, "slurm-node", "", "Slurm node name (default: the short hostname)")
	f.StringVar(&nfdFile, "nfd-file", "", "write a Node Feature Discovery local feature file here (atomically)")
	f.DurationVar(&nfdExpiry, "nfd-expiry", defaultNFDExpiry, "NFD drops --nfd-file's labels this long after the check wrote them (# +expiry-time=); set it to two or three times the period of the timer or cron that runs check")
	f.BoolVar(&nfdGFDClique, "nfd-gfd-clique", false, "also write GPU Feature Discovery's nvidia.com/gpu.clique label in --nfd-file (off: GFD owns it where it runs)")
	return cmd
}

// defaultNFDExpiry is --nfd-expiry's default: the agent's own TTL
// (three of its 10-minute refreshes), which suits a timer or cron that
// runs check every 10 minutes or more often. A check that stops running
// (the cron died, the node was taken out of it) leaves no label behind
// for longer than this: NFD drops the file's features at its
// "# +expiry-time=" and the node loses gpuaffinity.io/healthy rather
// than keeping the last verdict forever.
const defaultNFDExpiry = 30 * time.Minute

// checkUnknown reports a could-not-check error in the machine formats
// too: npd wants its message on stdout.
func checkUnknown(cmd *cobra.Command, output string, err error) error {
	if output == "npd" {
		fmt.Fprintln(cmd.OutOrStdout(), clip.Bytes("gpuaffinity: could not check: "+err.Error(), health.NPDMaxMessage))
	}
	return err
}

func writeCheck(w io.Writer, output string, rep health.Report) error {
	switch output {
	case "json":
		return health.WriteJSON(w, rep)
	case "nhc":
		if l := health.NHCLine(rep); l != "" {
			_, err := fmt.Fprintln(w, l)
			return err
		}
		return nil
	case "npd":
		_, err := fmt.Fprintln(w, health.NPDMessage(rep))
		return err
	}
	return health.WriteText(w, rep)
}

// slurmAct drains an unhealthy node or resumes a healthy one that
// gpuaffinity drained (gres.PlanNodeAction decides, from the one-line
// `scontrol show node -o`), with scontrol from PATH. A node drained by
// someone else is left as it is, and stderr says so: an unhealthy node
// then keeps the other reason, which a healthy run will not resume.
func slurmAct(ctx context.Context, stderr io.Writer, name string, rep health.Report, drain, resume bool) error {
	if (rep.Healthy && !resume) || (!rep.Healthy && !drain) {
		return nil
	}
	show, err := scontrol(ctx, "show", "node", "-o", name)
	if err != nil {
		return err
	}
	act := gres.PlanNodeAction(name, rep.Healthy, rep.Summary(), show, drain, resume)
	if act.Args == nil {
		if act.Foreign {
			fmt.Fprintf(stderr, "gpuaffinity: slurm: node %s left as it is: %s\n", name, strings.TrimPrefix(act.Why, "leave: "))
		}
		return nil
	}
	_, err = scontrol(ctx, act.Args...)
	return err
}

// scontrol runs scontrol from PATH with a 20 s deadline.
func scontrol(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scontrol", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("scontrol %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
