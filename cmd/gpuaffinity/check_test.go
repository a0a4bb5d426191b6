package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// runCheck runs `gpuaffinity check args...` in-process: through the real
// root command where check is registered, else under a stand-in root
// with the same --root flag. It returns stdout and the exit code.
func runCheck(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, _, code := runCheckStderr(t, args...)
	return out, code
}

// runCheckStderr is runCheck with stderr.
func runCheckStderr(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	out, stderr, err := runCheckErr(t, args...)
	code := 0
	if err != nil {
		code = 1
		var ee exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
	}
	return out, stderr, code
}

// runCheckErr runs check and returns its stdout, its stderr and the error
// main would print.
func runCheckErr(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	if c, _, err := root.Find([]string{"check"}); err != nil || c.Name() != "check" {
		g := &globals{root: "/", log: slog.New(slog.DiscardHandler)}
		root = &cobra.Command{Use: "gpuaffinity", SilenceUsage: true, SilenceErrors: true}
		root.PersistentFlags().StringVar(&g.root, "root", "/", "")
		root.PersistentFlags().StringVar(&g.topoFile, "topo-file", "", "")
		root.AddCommand(newCheckCmd(g))
	}
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"check"}, args...))
	err := root.Execute()
	return out.String(), errb.String(), err
}

func checkRoot(t *testing.T, machine string) string {
	t.Helper()
	t.Setenv("SLURM_JOB_GPUS", "")
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	root := fakesystest.Root(t, machine)
	os.MkdirAll(filepath.Join(root, "sys/module/nvidia_peermem"), 0o755)
	return root
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckHealthyAndFormats(t *testing.T) {
	root := checkRoot(t, "dgx-h100")
	out, code := runCheck(t, "--root", root, "--interval", "0")
	if code != 0 || !strings.Contains(out, "PASS  topo.aligned") || !strings.HasSuffix(out, "healthy (profile pretrain)\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = runCheck(t, "--root", root, "--interval", "0", "-o", "json")
	var rep health.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Schema != health.Schema || !rep.Healthy || len(rep.Results) != len(health.Checks()) {
		t.Fatalf("json exit %d, %v:\n%.300s", code, err, out)
	}
	if out, code = runCheck(t, "--root", root, "--interval", "0", "-o", "nhc"); code != 0 || out != "" {
		t.Errorf("nhc healthy: exit %d %q", code, out)
	}
	if out, code = runCheck(t, "--root", root, "--interval", "0", "-o", "npd"); code != 0 || out != "gpuaffinity: healthy\n" {
		t.Errorf("npd healthy: exit %d %q", code, out)
	}
	nfd := filepath.Join(t.TempDir(), "gpuaffinity")
	if _, code = runCheck(t, "--root", root, "--interval", "0", "--nfd-file", nfd); code != 0 {
		t.Fatal(code)
	}
	b, _ := os.ReadFile(nfd)
	for _, want := range []string{"gpuaffinity.io/healthy=true\n", "gpuaffinity.io/fabric=infiniband\n", "gpuaffinity.io/aligned=true\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("nfd file lacks %q:\n%s", want, b)
		}
	}
}

// check --nfd-file heads the file with NFD's expiry directive, --nfd-expiry
// (default 30 minutes) after the check, so the labels of a cron that
// stopped go; a zero or negative --nfd-expiry is refused before anything
// is written.
func TestCheckNFDExpiry(t *testing.T) {
	root := checkRoot(t, "dgx-h100")
	for _, c := range []struct {
		args []string
		ttl  time.Duration
	}{
		{nil, 30 * time.Minute},
		{[]string{"--nfd-expiry", "2h"}, 2 * time.Hour},
	} {
		nfd := filepath.Join(t.TempDir(), "gpuaffinity")
		before := time.Now().Truncate(time.Second) // the directive has whole seconds
		if _, code := runCheck(t, append([]string{"--root", root, "--interval", "0", "--only", "gpu.count", "--nfd-file", nfd}, c.args...)...); code != 0 {
			t.Fatalf("%q: exit %d", c.args, code)
		}
		after := time.Now()
		b, err := os.ReadFile(nfd)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		v, ok := strings.CutPrefix(first, "# +expiry-time=")
		exp, err := time.Parse(time.RFC3339, v)
		if !ok || err != nil || !strings.HasSuffix(v, "Z") || exp.Before(before.Add(c.ttl)) || exp.After(after.Add(c.ttl)) {
			t.Errorf("%q: first line %q: want # +expiry-time= %s after the check, in UTC (%v)", c.args, first, c.ttl, err)
		}
	}
	for _, bad := range []string{"0", "-5m"} {
		nfd := filepath.Join(t.TempDir(), "gpuaffinity")
		_, _, err := runCheckErr(t, "--root", root, "--interval", "0", "--nfd-file", nfd, "--nfd-expiry", bad)
		var ee exitError
		if !errors.As(err, &ee) || ee.code != checkExitUnknown || !strings.Contains(err.Error(), "--nfd-expiry") {
			t.Errorf("--nfd-expiry %s: %v; want exit 2 naming the flag", bad, err)
		}
		if _, err := os.Stat(nfd); !os.IsNotExist(err) {
			t.Errorf("--nfd-expiry %s wrote %s (%v)", bad, nfd, err)
		}
	}
}

func TestCheckUnhealthy(t *testing.T) {
	root := checkRoot(t, "dgx-h100")
	writeFile(t, filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/state"), "1: DOWN\n")
	writeFile(t, filepath.Join(root, "dev/kmsg"), "4,1235,5679,-;NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n")
	out, code := runCheck(t, "--root", root, "--interval", "0")
	if code != 1 || !strings.Contains(out, "FAIL  nic.port_state      NIC mlx5_0 (0000:18:00.0) port 1 is DOWN/LinkUp") || !strings.Contains(out, "hint: ") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	out, code = runCheck(t, "--root", root, "--interval", "0", "-o", "nhc")
	if code != 1 || !strings.HasPrefix(out, "ERROR:  nhc:  Health check failed:  check_gpuaffinity:  ") || strings.Count(out, "\n") != 1 {
		t.Errorf("nhc: exit %d %q", code, out)
	}
	out, code = runCheck(t, "--root", root, "--interval", "0", "-o", "npd")
	if code != 1 || len(strings.TrimSuffix(out, "\n")) > 80 {
		t.Errorf("npd: exit %d %q", code, out)
	}
	// inference: fabric failures warn; the XID (if on a GPU) still fails.
	out, code = runCheck(t, "--root", root, "--interval", "0", "--profile", "inference", "--only", "nic.port_state")
	if code != 0 || !strings.Contains(out, "WARN  nic.port_state") {
		t.Errorf("inference: exit %d\n%s", code, out)
	}
	nfd := filepath.Join(t.TempDir(), "f")
	runCheck(t, "--root", root, "--interval", "0", "--nfd-file", nfd)
	if b, _ := os.ReadFile(nfd); !strings.Contains(string(b), "gpuaffinity.io/healthy=false\n") {
		t.Errorf("nfd:\n%s", b)
	}
}

func TestCheckFixtureFailures(t *testing.T) {
	for _, c := range []struct {
		name, id, want string
		edit           func(root string)
	}{
		{"xid", "gpu.xid", "XID 79", func(root string) {
			writeFile(t, filepath.Join(root, "dev/kmsg"), "4,1,2,-;NVRM: Xid (PCI:0000:1b:00): 79, pid=1, GPU has fallen off the bus.\n")
		}},
		{"width", "gpu.pcie_link", "PCIe link x8 of x16", func(root string) {
			writeFile(t, filepath.Join(root, "sys/bus/pci/devices/0000:1b:00.0/current_link_width"), "8\n")
		}},
		{"rate", "nic.rate", "at 200 Gb/s, expected 400", func(root string) {
			writeFile(t, filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/rate"), "200 Gb/sec (4X HDR)\n")
		}},
		{"firmware", "nic.firmware", "NIC mlx5_0 runs firmware 1.2.3", func(root string) {
			writeFile(t, filepath.Join(root, "sys/class/infiniband/mlx5_0/fw_ver"), "1.2.3\n")
		}},
		{"peermem", "topo.gdr", "nvidia_peermem not loaded", func(root string) {
			os.RemoveAll(filepath.Join(root, "sys/module/nvidia_peermem"))
			os.Remove(filepath.Join(root, "proc/sys/kernel/osrelease")) // no dma-buf fallback either
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := checkRoot(t, "dgx-h100")
			c.edit(root)
			out, code := runCheck(t, "--root", root, "--interval", "0", "-o", "json")
			var rep health.Report
			json.Unmarshal([]byte(out), &rep)
			if code != 1 || rep.Summary() == "" || !strings.HasPrefix(rep.Summary(), c.id+": ") || !strings.Contains(rep.Summary(), c.want) {
				t.Errorf("exit %d, summary %q", code, rep.Summary())
			}
		})
	}
}

func TestCheckLearnExpect(t *testing.T) {
	root := checkRoot(t, "dgx-h100")
	y, code := runCheck(t, "--root", root, "--learn")
	if code != 0 || !strings.Contains(y, "count: 8") {
		t.Fatalf("learn: %d\n%s", code, y)
	}
	p := filepath.Join(t.TempDir(), "expect.yaml")
	writeFile(t, p, y)
	if out, code := runCheck(t, "--root", root, "--interval", "0", "--expect", p); code != 0 {
		t.Errorf("expect on the learned node: %d\n%s", code, out)
	}
	writeFile(t, p, strings.Replace(y, "compute_count: 8", "compute_count: 9", 1))
	if out, code := runCheck(t, "--root", root, "--interval", "0", "--expect", p, "-o", "nhc"); code != 1 || !strings.Contains(out, "nic.count: 8 compute NICs, expected 9") {
		t.Errorf("expect 9 NICs: %d %q", code, out)
	}
	if _, code := runCheck(t, "--root", root, "--expect", filepath.Join(t.TempDir(), "none.yaml")); code != 2 {
		t.Errorf("missing expect file: exit %d, want 2", code)
	}
}

func TestCheckGPUSelection(t *testing.T) {
	root := checkRoot(t, "dgx-h100")
	// GPU 0 (0000:1b:00.0) pairs with mlx5_0; take its port down.
	writeFile(t, filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/state"), "1: DOWN\n")
	if _, code := runCheck(t, "--root", root, "--interval", "0", "--gpus", "1-2,3"); code != 0 {
		t.Errorf("--gpus 1-3: exit %d", code)
	}
	t.Setenv("SLURM_JOB_GPUS", "0")
	if _, code := runCheck(t, "--root", root, "--interval", "0"); code != 1 {
		t.Errorf("SLURM_JOB_GPUS=0: exit %d", code)
	}
	t.Setenv("SLURM_JOB_GPUS", "")
	t.Setenv("CUDA_VISIBLE_DEVICES", "4,5")
	if _, code := runCheck(t, "--root", root, "--interval", "0"); code != 0 {
		t.Errorf("CUDA_VISIBLE_DEVICES=4,5: exit %d", code)
	}
	if out, code := runCheck(t, "--root", root, "--gpus", "12", "-o", "npd"); code != 2 || !strings.HasPrefix(out, "gpuaffinity: could not check") {
		t.Errorf("--gpus 12: exit %d %q", code, out)
	}
}

// stubScontrol puts an scontrol on PATH that logs its arguments and
// answers show node -o with reason and comment, in Slurm's one-line
// form.
func stubScontrol(t *testing.T, reason string, comment ...string) string {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	state, tail := "IDLE", ""
	if reason != "" { // scontrol prints Reason= only where one is set
		state, tail = "IDLE+DRAIN", " Reason="+reason+" [root@2026-01-01T00:00:00]"
	}
	for _, c := range comment {
		tail += " Comment=" + c
	}
	script := "#!/bin/sh\necho \"$@\" >> " + log + "\nif [ \"$1 $2 $3\" = \"show node -o\" ]; then\n  echo \"NodeName=$4 Arch=x86_64 CoresPerSocket=56 State=" + state + " ThreadsPerCore=2 CurrentWatts=0 AveWatts=0" + tail + "\"\nfi\n"
	writeFile(t, filepath.Join(dir, "scontrol"), script)
	os.Chmod(filepath.Join(dir, "scontrol"), 0o755)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return log
}

func readLog(p string) string { b, _ := os.ReadFile(p); return string(b) }

func TestCheckSlurm(t *testing.T) {
	root := checkRoot(t, "dgx-h100")
	log := stubScontrol(t, "gpuaffinity: nic.port_state: down")
	// Healthy + drained by gpuaffinity: resume.
	if _, code := runCheck(t, "--root", root, "--interval", "0", "--slurm-resume", "--slurm-drain", "--slurm-node", "gpu-01.cluster"); code != 0 {
		t.Fatal(code)
	}
	if got := readLog(log); got != "show node -o gpu-01\nupdate nodename=gpu-01 state=resume\n" {
		t.Errorf("resume calls:\n%s", got)
	}
	// Healthy + drained by a human: leave it.
	log = stubScontrol(t, "bad DIMM, ticket 42")
	runCheck(t, "--root", root, "--interval", "0", "--slurm-resume", "--slurm-node", "gpu-01")
	if got := readLog(log); got != "show node -o gpu-01\n" {
		t.Errorf("human drain touched:\n%s", got)
	}
	// Healthy + drained by a human whose Comment quotes an old
	// gpuaffinity reason: leave it.
	log = stubScontrol(t, "admin: replacing DIMM", "ticket 42 Reason=gpuaffinity: old")
	runCheck(t, "--root", root, "--interval", "0", "--slurm-resume", "--slurm-node", "gpu-01")
	if got := readLog(log); got != "show node -o gpu-01\n" {
		t.Errorf("human drain with a quoting Comment touched:\n%s", got)
	}
	// Unhealthy: drain with the first failure.
	writeFile(t, filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/state"), "1: DOWN\n")
	log = stubScontrol(t, "")
	out, code := runCheck(t, "--root", root, "--interval", "0", "-o", "nhc", "--slurm-drain", "--slurm-resume", "--slurm-node", "gpu-01")
	if code != 1 || !strings.HasPrefix(out, "ERROR:  nhc:  Health check failed:  check_gpuaffinity:  nic.port_state: NIC mlx5_0") {
		t.Errorf("exit %d %q", code, out)
	}
	if got := readLog(log); !strings.HasPrefix(got, "show node -o gpu-01\nupdate nodename=gpu-01 state=drain reason=gpuaffinity: nic.port_state: NIC mlx5_0 (0000:18:00.0) port 1 is DOWN") || strings.Count(got, "\n") != 2 {
		t.Errorf("drain calls:\n%s", got)
	}
	// Unhealthy + drained by a human: keep the human's reason (draining
	// would replace it with ours, and a healthy run would then resume).
	log = stubScontrol(t, "bad DIMM, ticket 42")
	_, stderr, code := runCheckStderr(t, "--root", root, "--interval", "0", "--slurm-drain", "--slurm-resume", "--slurm-node", "gpu-01")
	if code != 1 {
		t.Errorf("unhealthy, human drain: exit %d", code)
	}
	// Not silently: stderr says the node was left, and whose reason it keeps.
	if want := "gpuaffinity: slurm: node gpu-01 left as it is: unhealthy, but drained by someone else (Reason=bad DIMM, ticket 42 [root@2026-01-01T00:00:00])\n"; stderr != want {
		t.Errorf("unhealthy, human drain: stderr %q, want %q", stderr, want)
	}
	if got := readLog(log); got != "show node -o gpu-01\n" {
		t.Errorf("human drain replaced:\n%s", got)
	}
	// scontrol missing: could not act.
	t.Setenv("PATH", t.TempDir())
	if _, code := runCheck(t, "--root", root, "--interval", "0", "--slurm-drain", "--slurm-node", "gpu-01"); code != 2 {
		t.Errorf("no scontrol: exit %d", code)
	}
}

func TestCheckBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-o", "yaml", "--demo", "dgx-h100"}, {"--profile", "train", "--demo", "dgx-h100"}, {"--root", "/nonexistent-root"}, {"--only", "gpu.nosuch", "--demo", "dgx-h100"}} {
		if _, code := runCheck(t, args...); code != 2 {
			t.Errorf("check %s: exit %d, want 2", strings.Join(args, " "), code)
		}
	}
	if out, code := runCheck(t, "--demo", "dgx-h100", "--interval", "0", "--only", "gpu.count,nvlink.active"); code != 0 || !strings.Contains(out, "PASS  nvlink.active") {
		t.Errorf("demo: %d\n%s", code, out)
	}
}

// NVML replay variants: the health answers travel nvml.json → replayer →
// discovery → check, as they would from a live NVML.
func TestCheckReplayFailures(t *testing.T) {
	for _, c := range []struct {
		name, id, want string
		edit           func(d *nvml.ReplayDevice)
	}{
		{"remap pending", "gpu.row_remap", "0000:1b:00.0", func(d *nvml.ReplayDevice) {
			d.RemappedRows = &nvml.Answer[nvml.ReplayRemappedRows]{Value: nvml.ReplayRemappedRows{Uncorrectable: 1, Pending: true}}
		}},
		{"ecc", "gpu.ecc", "0000:1b:00.0", func(d *nvml.ReplayDevice) {
			d.ECCUncorrectedVolatile = &nvml.Answer[uint64]{Value: 3}
		}},
		{"nvlink down", "nvlink.active", "0000:1b:00.0", func(d *nvml.ReplayDevice) {
			d.NVLinks[5].State = nvml.Answer[int]{Value: 0}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := checkRoot(t, "dgx-h100")
			p := filepath.Join(root, "nvml.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var f nvml.ReplayFile
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatal(err)
			}
			c.edit(&f.Devices[0]) // NVML index 0 = 0000:1b:00.0
			if b, err = json.Marshal(f); err != nil {
				t.Fatal(err)
			}
			writeFile(t, p, string(b))
			out, code := runCheck(t, "--root", root, "--interval", "0", "-o", "json")
			var rep health.Report
			json.Unmarshal([]byte(out), &rep)
			if code != 1 || !strings.HasPrefix(rep.Summary(), c.id+": ") || !strings.Contains(rep.Summary(), c.want) {
				t.Errorf("exit %d, summary %q", code, rep.Summary())
			}
		})
	}
}
