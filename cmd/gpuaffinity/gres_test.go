package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gresRun runs the gres command alone (the root command's pre-run sets
// the logger; here it logs into stderr).
func gresRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv("GPUAFFINITY_ROOT", "")
	var out, errb bytes.Buffer
	g := &globals{root: "/", log: slog.New(slog.NewTextHandler(&errb, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	cmd := newGresCmd(g)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

func TestGresCmdDGX(t *testing.T) {
	out, stderr, err := gresRun(t, "--demo", "dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	// By hand: 56 cores per socket with SMT; GPUs 0-3 on socket 0.
	for _, want := range []string{
		"AutoDetect=off\n",
		"\nName=gpu Type=h100 File=/dev/nvidia0 Cores=0-55 Links=-1,18,18,18,18,18,18,18\n",
		"\nName=gpu Type=h100 File=/dev/nvidia7 Cores=56-111 Links=18,18,18,18,18,18,18,-1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "Name=gpu "); n != 8 {
		t.Errorf("%d GPU lines, want 8", n)
	}
	if stderr != "" {
		t.Errorf("stderr %q", stderr)
	}
}

func TestGresCmdOptionsAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gres.conf")
	out, _, err := gresRun(t, "--demo", "aws-p5", "--type", "h100_sxm", "--no-links", "--dev-dir", "/host/dev", "-f", path)
	if err != nil {
		t.Fatal(err)
	}
	if out != "" {
		t.Errorf("stdout with -o: %q", out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nName=gpu Type=h100_sxm File=/host/dev/nvidia4 Cores=48-95\n") {
		t.Errorf("file:\n%s", b)
	}
}

func TestGresCmdErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--demo", "dgx-h100", "--type", "h100 sxm"},
		{"--demo", "dgx-h100", "--dev-dir", "dev"},
		{"--demo", "no-such-machine"},
	} {
		out, _, err := gresRun(t, args...)
		if err == nil {
			t.Errorf("%q: no error", args)
		}
		if out != "" {
			t.Errorf("%q: stdout on error: %q", args, out)
		}
	}
}
