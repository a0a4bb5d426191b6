package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
	"github.com/gpuaffinity/gpuaffinity/snapshot"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// run executes the CLI in-process and returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, _, err := runErr(t, args...)
	return out, err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("gpuaffinity %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func TestVersion(t *testing.T) {
	out := mustRun(t, "version")
	if !strings.HasPrefix(out, "gpuaffinity dev (revision unknown, "+runtime.Version()) {
		t.Errorf("version = %q", out)
	}
}

func TestDemoList(t *testing.T) {
	out := mustRun(t, "topo", "--demo", "list")
	for _, want := range []string{"dgx-h100", "h200-vm", "aws-p4d", "aws-p5", "azure-nd-h100-v5", "gcp-a3-mega", "oci-bm-gpu-h100", "grace-hopper"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("--demo list lacks %s:\n%s", want, out)
		}
	}
}

func TestDemoTable(t *testing.T) {
	out := mustRun(t, "topo", "--demo", "dgx-h100")
	for _, want := range []string{"GPU0", "NIC Legend:", "mlx5_0 (ibp24s0)", "Pairs:", "CPU Affinity", "NV18"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoJSONAndPins(t *testing.T) {
	var n topology.Node
	if err := json.Unmarshal([]byte(mustRun(t, "topo", "--demo", "dgx-h100", "-o", "json")), &n); err != nil {
		t.Fatal(err)
	}
	if n.Schema != topology.Schema || len(n.GPUs) != 8 || n.Pairs[0].NICs[0] != "mlx5_0" {
		t.Fatalf("schema %q, %d GPUs, pair %+v", n.Schema, len(n.GPUs), n.Pairs[0])
	}
	// --exclude-nics by netdev name moves GPU 0 off its PIX NIC.
	if err := json.Unmarshal([]byte(mustRun(t, "topo", "--demo", "dgx-h100", "-o", "json", "--exclude-nics", "ibp24s0")), &n); err != nil {
		t.Fatal(err)
	}
	if slices := n.Pairs[0].NICs; len(slices) == 0 || slices[0] == "mlx5_0" || n.Pairs[0].Class == topology.ClassPIX {
		t.Errorf("after --exclude-nics: %+v", n.Pairs[0])
	}
}

func TestDotAcceptedByGraphviz(t *testing.T) {
	if _, err := exec.LookPath("dot"); err != nil {
		if testenv.InCI() {
			t.Fatal("dot missing in CI (Debian graphviz; make test installs it)")
		}
		t.Skip("dot not installed (Debian package graphviz)")
	}
	out := mustRun(t, "topo", "--demo", "dgx-h100", "-o", "dot")
	cmd := exec.Command("dot", "-Tsvg")
	cmd.Stdin = strings.NewReader(out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	svg, err := cmd.Output()
	if err != nil || !bytes.Contains(svg, []byte("<svg")) || stderr.Len() > 0 {
		t.Fatalf("dot -Tsvg: %v\n%s", err, stderr.String())
	}
	if m := mustRun(t, "topo", "--demo", "dgx-h100", "-o", "mermaid"); !strings.Contains(m, "\nflowchart TB\n") {
		t.Errorf("mermaid output starts %q", m[:min(40, len(m))])
	}
}

// TestRootEnvAndSnapshot: GPUAFFINITY_ROOT selects the root; a snapshot
// of it, read with --root, prints the same JSON.
func TestRootEnvAndSnapshot(t *testing.T) {
	root := fakesystest.Root(t, "azure-nd-h100-v5")
	t.Setenv("GPUAFFINITY_ROOT", root)
	want := mustRun(t, "topo", "-o", "json")
	if !strings.Contains(want, `"cloud": "azure"`) {
		t.Fatalf("GPUAFFINITY_ROOT not used:\n%.400s", want)
	}
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	mustRun(t, "snapshot", "-f", snap)
	dir := t.TempDir()
	f, err := os.Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := snapshot.Extract(f, dir); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, "topo", "--root", dir, "-o", "json"); got != want {
		t.Errorf("snapshot round trip differs")
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"topo", "-o", "yaml", "--demo", "dgx-h100"},
		{"topo", "--demo", "nosuch"},
		{"topo", "--demo", "dgx-h100", "--root", "/"},
		{"--log-level", "loud", "version"},
		{"snapshot"},
		{"topo", "--root", "/nonexistent-root"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("gpuaffinity %s: want an error", strings.Join(args, " "))
		}
	}
}

// On Azure, the topology file the HPC image installs decides the pairs,
// env points NCCL_TOPO_FILE at it, and a snapshot carries it.
func TestAzureInstalledTopoFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "ncclxml", "testdata", "nccl-topo-refs", "azure-ndv5-topo.xml"))
	if err != nil {
		t.Fatal(err)
	}
	root := fakesystest.Root(t, "azure-nd-h100-v5")
	os.MkdirAll(filepath.Join(root, "opt/microsoft/ndv5"), 0o755)
	if err := os.WriteFile(filepath.Join(root, "opt/microsoft/ndv5/topo.xml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "env", "--root", root, "--local-rank", "2")
	for _, want := range []string{"export NCCL_TOPO_FILE='/opt/microsoft/ndv5/topo.xml'\n", "export GPUAFFINITY_NICS='mlx5_ib2'\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("env lacks %q:\n%s", want, out)
		}
	}
	snap := filepath.Join(t.TempDir(), "snap")
	mustRun(t, "snapshot", "--root", root, "-f", snap)
	if got, want := mustRun(t, "topo", "--root", snap, "-o", "json"), mustRun(t, "topo", "--root", root, "-o", "json"); got != want {
		t.Errorf("snapshot without the Azure topology file changes the topology")
	}
}

// --version prints what the version command prints.
func TestVersionFlag(t *testing.T) {
	flag, err := run(t, "--version")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if flag != cmd || !strings.HasPrefix(flag, "gpuaffinity "+version+" (revision ") {
		t.Errorf("--version printed %q, version %q", flag, cmd)
	}
}

// --log.format json writes one JSON object a line; --log.level filters,
// and --log-level is the same flag; a bad format is refused.
func TestLogFlags(t *testing.T) {
	_, stderr, err := runErr(t, "topo", "--demo", "dgx-h100-faults", "--log.level", "debug", "--log.format", "json")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["level"] != "DEBUG" || rec["msg"] != "discovery" {
			t.Errorf("--log.format json line %q: %v", l, err)
		}
	}
	if len(lines) < 2 {
		t.Errorf("--log.level debug logged %d lines; want the discovery warnings", len(lines))
	}
	_, logfmt, _ := runErr(t, "topo", "--demo", "dgx-h100-faults", "--log-level", "debug")
	if !strings.HasPrefix(logfmt, "level=DEBUG msg=discovery warning=") {
		t.Errorf("--log-level debug, logfmt: %.200q", logfmt)
	}
	if _, quiet, _ := runErr(t, "topo", "--demo", "dgx-h100-faults"); strings.Contains(quiet, "DEBUG") {
		t.Errorf("debug lines at the default level: %.200q", quiet)
	}
	if _, _, err := runErr(t, "topo", "--demo", "dgx-h100", "--log.format", "xml"); err == nil || !strings.Contains(err.Error(), "--log.format") {
		t.Errorf("--log.format xml: %v", err)
	}
}

// Shell completion offers the values of -o, --demo, --profile, --mode and
// the log flags (cobra's __complete is what the completion scripts call).
func TestFlagCompletion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"topo", "-o", ""}, []string{"table", "json", "dot", "mermaid"}},
		{[]string{"check", "-o", ""}, []string{"text", "json", "nhc", "npd"}},
		{[]string{"cpumap", "--mode", ""}, []string{"node", "socket", "exclusive"}},
		{[]string{"agent", "--profile", ""}, []string{"pretrain", "finetune", "inference"}},
		{[]string{"env", "--demo", ""}, append(fakesys.Machines(), "list")},
		{[]string{"gres", "--log.level", ""}, []string{"debug", "info", "warn", "error"}},
	} {
		out, _, err := runErr(t, append([]string{"__complete"}, tc.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := lines[:len(lines)-1]; strings.Join(got, " ") != strings.Join(tc.want, " ") || lines[len(lines)-1] != ":4" {
			t.Errorf("complete %v = %q; want %q and no file completion", tc.args, lines, tc.want)
		}
	}
}
