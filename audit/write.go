package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpuaffinity/gpuaffinity/nccl"
)

// WriteJSON writes r as indented JSON (schema gpuaffinity.audit/v1).
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes one line per process (and per thread bound
// otherwise), then each process's reason, environment problems and what
// could not be read, then the sources that could not be listed.
func WriteTable(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tUSER\tJOB\tGPU\tCPUS\tMEMS\tGPU CPUS\tVERDICT\tENV")
	for _, p := range r.Processes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.PID, or(p.User, "?"), jobOf(p), or(joinInts(p.GPUs), "-"),
			or(p.CPUs.String(), "?"), or(p.Mems.String(), "?"), or(p.GPUCPUs.String(), "?"), p.Verdict, envSummary(p))
		for _, t := range p.Threads {
			fmt.Fprintf(tw, "  %d (thread)\t\t\t\t%s\t%s\t\t%s\t\n", t.TID, t.CPUs, t.Mems, t.Verdict)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Processes {
		fmt.Fprintf(w, "\n%d %s: %s: %s\n", p.PID, or(p.Command, "?"), p.Verdict, p.Reason)
		for _, c := range p.Env {
			switch {
			case c.Problem == "":
			case c.Status == nccl.EnvUnset:
				fmt.Fprintf(w, "  %s unset: %s\n", c.Name, c.Problem)
			default:
				fmt.Fprintf(w, "  %s=%s: %s: %s\n", c.Name, c.Value, c.Status, c.Problem)
			}
		}
		for _, u := range p.Unread {
			fmt.Fprintf(w, "  not read: %s\n", u)
		}
	}
	switch {
	case len(r.Processes) == 0 && len(r.Unread) == 0:
		fmt.Fprintln(w, "no process uses a GPU")
	case len(r.Processes) == 0:
		// Not "no process": a list that could not be read may hold some.
		fmt.Fprintf(w, "no GPU process found, but %d process list(s) could not be read (below): processes there are not shown\n", len(r.Unread))
	}
	for _, u := range r.Unread {
		fmt.Fprintf(w, "not listed: %s\n", u)
	}
	return nil
}

// jobOf names the process's Slurm step or pod for the table.
func jobOf(p Process) string {
	switch {
	case p.Job != nil && p.Job.Step != "":
		return "slurm:" + p.Job.ID + "." + p.Job.Step
	case p.Job != nil:
		return "slurm:" + p.Job.ID
	case p.Pod != nil:
		return "pod:" + p.Pod.UID
	}
	return "-"
}

// envSummary is the ENV column: "ok", the wrong variables, or why the
// environment was not read.
func envSummary(p Process) string {
	if p.Env == nil {
		for _, u := range p.Unread {
			if rest, ok := strings.CutPrefix(u, "environ: "); ok {
				return "unread (" + rest + ")"
			}
		}
		return "-"
	}
	var wrong []string
	for _, c := range p.Env {
		if c.Status == nccl.EnvWrong {
			wrong = append(wrong, c.Name)
		}
	}
	if len(wrong) == 0 {
		return "ok"
	}
	return "wrong: " + strings.Join(wrong, ",")
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
