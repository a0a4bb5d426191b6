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
		for _, note := range p.Notes {
			fmt.Fprintf(w, "  note: %s\n", note)
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
	if r.Fabric != nil {
		return writeFabric(w, *r.Fabric)
	}
	return nil
}

// writeFabric writes the fabric section: one line per compute and
// storage port, then what the rule found, then the degraded ports.
func writeFabric(w io.Writer, f Fabric) error {
	fmt.Fprintf(w, "\nFabric balance over %.1f s (busy GPUs: %s):\n", f.Seconds, or(joinInts(f.BusyGPUs), "none"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tROLE\tGPU\tTX\tFINDING")
	for _, p := range f.Ports {
		tx := "-"
		if p.BytesPerSecond != nil {
			tx = bytesRate(*p.BytesPerSecond)
		}
		finding := p.Note
		switch {
		case p.Idle:
			finding = "idle"
		case p.ComputeTraffic:
			finding = "compute traffic"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name(), p.Role, or(joinInts(p.GPUs), "-"), tx, finding)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case len(f.BusyGPUs) == 0:
		fmt.Fprintln(w, "no GPU is busy: nothing judged")
	case !f.Active && f.Busiest == "":
		fmt.Fprintln(w, "no compute port was measured: nothing judged")
	case !f.Active:
		fmt.Fprintf(w, "the compute fabric carried no traffic (busiest port %s at %s, below %s): nothing judged\n",
			f.Busiest, bytesRate(f.BusiestBytesPerSecond), bytesRate(f.FloorBytesPerSecond))
	default:
		found := false
		for _, g := range f.GPUs {
			if len(g.Idle) > 0 {
				found = true
				fmt.Fprintf(w, "GPU %s: leaves compute port(s) %s idle (under %s, while %s transmits %s)\n",
					joinInts(g.GPUs), strings.Join(g.Idle, ","), bytesRate(f.IdleBelowBytesPerSecond), f.Busiest, bytesRate(f.BusiestBytesPerSecond))
			}
		}
		for _, p := range f.Ports {
			if p.ComputeTraffic {
				found = true
				fmt.Fprintf(w, "storage port %s carries the compute fabric's volume (%s, at least the median busy compute port's %s)\n",
					p.Name(), bytesRate(*p.BytesPerSecond), bytesRate(f.StorageFromBytesPerSecond))
			}
		}
		if !found {
			fmt.Fprintln(w, "every busy GPU's compute ports carry traffic; no storage port carries the compute fabric's volume")
		}
	}
	for _, d := range f.Degraded {
		fmt.Fprintf(w, "not measured: %s\n", d)
	}
	return nil
}

// bytesRate writes a rate in bytes per second with an SI prefix.
func bytesRate(v float64) string {
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e9, "GB/s"}, {1e6, "MB/s"}, {1e3, "kB/s"}} {
		if v >= u.div {
			return fmt.Sprintf("%.1f %s", v/u.div, u.unit)
		}
	}
	return fmt.Sprintf("%.0f B/s", v)
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
