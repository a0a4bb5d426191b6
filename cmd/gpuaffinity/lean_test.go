package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goDeps lists the packages the build of this command with tags links.
func goDeps(t *testing.T, tags string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-tags", tags, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -tags %q: %v\n%s", tags, err, out)
	}
	return strings.Fields(string(out))
}

// The launch-path build (-tags omit_agent) links no metrics library; the
// agent's build (-tags agent_only) links the exporter but none of the
// fleet commands' clients and writers. The launch-path binary's agent
// command runs gpuaffinity-agent from beside it with the same arguments,
// its fleet command gpuaffinity-fleet (the full build); without them it
// says what to install.
func TestLeanBuildRunsAgentBinary(t *testing.T) {
	for _, dep := range goDeps(t, "omit_agent") {
		if strings.HasPrefix(dep, "github.com/prometheus/") || strings.HasSuffix(dep, "/gpuaffinity/exporter") {
			t.Errorf("the omit_agent build links %s", dep)
		}
	}
	agentDeps := goDeps(t, "agent_only")
	if !slices.Contains(agentDeps, "github.com/gpuaffinity/gpuaffinity/exporter") {
		t.Errorf("the agent_only build does not link the exporter: not the agent's package list")
	}
	for _, dep := range agentDeps {
		switch {
		case dep == "github.com/gpuaffinity/gpuaffinity/fleet" || strings.HasPrefix(dep, "github.com/gpuaffinity/gpuaffinity/fleet/") && dep != "github.com/gpuaffinity/gpuaffinity/fleet/nodeview",
			dep == "github.com/json-iterator/go", dep == "go.yaml.in/yaml/v3",
			strings.HasSuffix(dep, "/gpuaffinity/snapshot"), strings.HasSuffix(dep, "/gpuaffinity/gres"), strings.HasSuffix(dep, "/gpuaffinity/launch"):
			t.Errorf("the agent_only build links %s, which only other commands use", dep)
		}
	}

	dir := t.TempDir()
	lean := filepath.Join(dir, "gpuaffinity")
	for _, b := range []struct{ out, tags string }{
		{lean, "omit_agent"}, {filepath.Join(dir, "gpuaffinity-agent"), "agent_only"}, {filepath.Join(dir, "gpuaffinity-fleet"), ""},
	} {
		if out, err := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %q: %v\n%s", b.tags, err, out)
		}
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(lean, args...)
		cmd.Env = append(os.Environ(), "PATH=/nonexistent")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if got, err := run("--log-level", "error", "agent", "--demo", "list"); err != nil || !strings.Contains(got, "dgx-h100") {
		t.Errorf("lean `agent --demo list`: %v\n%s", err, got)
	}
	// The fleet command's own help (its subcommands), from gpuaffinity-fleet.
	if got, err := run("fleet", "--help"); err != nil || !strings.Contains(got, "slurm-block") || !strings.Contains(got, "labels") {
		t.Errorf("lean `fleet --help`: %v\n%s", err, got)
	}
	// The agent's binary has the agent alone.
	if out, err := exec.Command(filepath.Join(dir, "gpuaffinity-agent"), "topo", "--demo", "dgx-h100").CombinedOutput(); err == nil || !strings.Contains(string(out), `unknown command "topo"`) {
		t.Errorf("gpuaffinity-agent topo: want unknown command, got %v\n%s", err, out)
	}
	for _, b := range []struct{ binary, command string }{{"gpuaffinity-agent", "agent"}, {"gpuaffinity-fleet", "fleet"}} {
		os.Remove(filepath.Join(dir, b.binary))
		if got, err := run(b.command, "--help"); err == nil || !strings.Contains(got, "install "+b.binary+" beside it") {
			t.Errorf("lean `%s` without %s: %v\n%s", b.command, b.binary, err, got)
		}
	}
}
