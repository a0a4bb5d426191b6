package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Exit codes of check.
const (
	checkExitUnhealthy = 1
	checkExitUnknown   = 2
)

const slurmReasonPrefix = "gpuaffinity:"

func newCheckCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var (
		output, profile, expectFile, gpus, nfdFile, slurmNode, kmsg string
		learn, multiNode, drain, resume                             bool
		interval, timeout                                           time.Duration
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
a Node Feature Discovery feature file. See docs/health.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			unknown := func(err error) error { return exitError{code: checkExitUnknown, err: err} }
			switch output {
			case "text", "json", "nhc", "npd":
			default:
				return unknown(fmt.Errorf("-o %q: want text, json, nhc or npd", output))
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
				Timeout: timeout, Kmsg: kmsg, Only: splitList(only)}
			if expectFile != "" {
				if opts.Expect, err = health.LoadExpect(expectFile); err != nil {
					return checkUnknown(cmd, output, unknown(err))
				}
			}
			sel, from := gpus, "--gpus"
			if !cmd.Flags().Changed("gpus") {
				for _, env := range []string{"SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"} {
					if v, ok := os.LookupEnv(env); ok && strings.TrimSpace(v) != "" {
						sel, from = v, env
						break
					}
				}
			}
			if sel != "" {
				if opts.GPUs, err = parseGPUList(sel, n); err != nil {
					return checkUnknown(cmd, output, unknown(fmt.Errorf("%s: %w", from, err)))
				}
			}
			rep, err := health.Run(cmd.Context(), n, opts)
			if err != nil {
				return checkUnknown(cmd, output, unknown(err))
			}
			if err := writeCheck(cmd.OutOrStdout(), output, rep); err != nil {
				return unknown(err)
			}
			if nfdFile != "" {
				if err := atomicfile.Write(nfdFile, []byte(health.NFDFeatures(rep, n)), 0o644); err != nil {
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
				name, _, _ = strings.Cut(name, ".")
				if err := slurmAct(cmd.Context(), name, rep, drain, resume); err != nil {
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
	f.StringSliceVar(&only, "only", nil, "run only these check ids")
	f.StringVar(&kmsg, "kmsg", "", "kernel log to scan for XIDs (default /dev/kmsg under --root)")
	f.BoolVar(&drain, "slurm-drain", false, `when unhealthy, drain this node (unless drained with another reason): scontrol update nodename=<host> state=drain reason="gpuaffinity: <reason>"`)
	f.BoolVar(&resume, "slurm-resume", false, "when healthy, resume this node if its drain reason starts with gpuaffinity:")
	f.StringVar(&slurmNode, "slurm-node", "", "Slurm node name (default: the short hostname)")
	f.StringVar(&nfdFile, "nfd-file", "", "write a Node Feature Discovery local feature file here (atomically)")
	return cmd
}

// checkUnknown reports a could-not-check error in the machine formats
// too: npd wants its message on stdout.
func checkUnknown(cmd *cobra.Command, output string, err error) error {
	if output == "npd" {
		fmt.Fprintln(cmd.OutOrStdout(), health.Truncate("gpuaffinity: could not check: "+err.Error(), health.NPDMaxMessage))
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

// parseGPUList reads a list of GPU indices (ranges allowed), UUIDs or bus
// ids into GPU indices.
func parseGPUList(s string, n topology.Node) ([]int, error) {
	var out []int
	for _, tok := range splitList([]string{s}) {
		if lo, hi, ok := strings.Cut(tok, "-"); ok && !strings.HasPrefix(tok, "GPU-") {
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || b < a {
				return nil, fmt.Errorf("bad GPU range %q", tok)
			}
			for i := a; i <= b; i++ {
				out = append(out, i)
			}
			continue
		}
		if i, err := strconv.Atoi(tok); err == nil {
			out = append(out, i)
			continue
		}
		found := false
		for _, g := range n.GPUs {
			if strings.EqualFold(g.UUID, tok) || strings.EqualFold(g.BusID, tok) || strings.EqualFold(strings.TrimSuffix(g.BusID, ".0"), tok) {
				out, found = append(out, g.Index), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no GPU %q on this node", tok)
		}
	}
	return out, nil
}

// slurmAct drains an unhealthy node or resumes a healthy one that
// gpuaffinity drained, with scontrol from PATH. A node that carries
// someone else's reason (an admin's drain, Slurm's "Prolog error" or
// "Not responding") is left alone both ways: draining it would replace
// that reason with ours, which a later healthy run would then resume.
func slurmAct(ctx context.Context, name string, rep health.Report, drain, resume bool) error {
	scontrol := func(args ...string) (string, error) {
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
	if (rep.Healthy && !resume) || (!rep.Healthy && !drain) {
		return nil
	}
	out, err := scontrol("show", "node", name)
	if err != nil {
		return err
	}
	r, has := slurmReason(out)
	ours := has && strings.HasPrefix(r, slurmReasonPrefix)
	if !rep.Healthy {
		reason := health.Truncate(slurmReasonPrefix+" "+rep.Summary(), 200)
		if has && !ours {
			return nil
		}
		_, err := scontrol("update", "nodename="+name, "state=drain", "reason="+reason)
		return err
	}
	if ours {
		_, err := scontrol("update", "nodename="+name, "state=resume")
		return err
	}
	return nil
}

// slurmReason finds Reason= in scontrol show node output; it runs to the
// end of its line.
func slurmReason(out string) (string, bool) {
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "Reason="); ok {
			return v, true
		}
		if i := strings.Index(line, " Reason="); i >= 0 {
			return line[i+len(" Reason="):], true
		}
	}
	return "", false
}
