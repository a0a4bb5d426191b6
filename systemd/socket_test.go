package systemd

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// unitFile is a unit file's settings: section, then key, then every value
// in order (a key may repeat). Comments and blank lines are dropped; the
// file has no line continuations (a test below would fail on one).
type unitFile map[string]map[string][]string

// readUnit parses a unit file in the syntax of systemd.syntax(7): [Section]
// headers, Key=Value lines, # and ; comments.
func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		case strings.HasSuffix(line, `\`):
			t.Fatalf("%s:%d: line continuation, which readUnit does not join", path, n)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not Key=Value in a section: %q", path, n, line)
			}
			k = strings.TrimSpace(k)
			u[section][k] = append(u[section][k], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// systemd-analyze verify accepts the socket next to the service it
// activates, and does check the socket: one naming a service that does
// not exist is refused.
func TestSocketVerifies(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	service := unitCopy(t)
	socket := filepath.Join(filepath.Dir(service), "gpuaffinity.socket")
	verify(t, analyze, socket, service)

	unit, err := os.ReadFile(socket)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "gpuaffinity.socket")
	if err := os.WriteFile(broken, []byte(strings.ReplaceAll(string(unit),
		"Service=gpuaffinity.service", "Service=gpuaffinity-nosuch.service")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", broken).CombinedOutput()
	// systemd 252: "gpuaffinity.socket: service gpuaffinity-nosuch.service
	// not loaded, socket cannot be started." (src/core/socket.c).
	if err == nil || !strings.Contains(string(out), "gpuaffinity-nosuch.service not loaded") {
		t.Errorf("verify of a socket for a missing service: %v\n%s", err, out)
	}
}

// The socket listens where the agent does by default, activates
// gpuaffinity.service, and is started by sockets.target; the service
// takes the agent's flags from GPUAFFINITY_AGENT_ARGS, which is how
// --web.systemd-socket reaches it (README.md).
func TestSocketMatchesAgent(t *testing.T) {
	u := readUnit(t, "gpuaffinity.socket")
	// 19400: the default of the agent's --web.listen-address, ":19400"
	// (cmd/gpuaffinity/agent.go; docs/agent.md).
	if got, want := u["Socket"]["ListenStream"], []string{"19400"}; !slices.Equal(got, want) {
		t.Errorf("ListenStream = %q, want %q", got, want)
	}
	if got, want := u["Socket"]["Service"], []string{"gpuaffinity.service"}; !slices.Equal(got, want) {
		t.Errorf("Service = %q, want %q", got, want)
	}
	if got := u["Socket"]["Accept"]; len(got) != 0 && got[0] != "no" {
		t.Errorf("Accept = %q: the agent serves every connection itself (Accept=no)", got)
	}
	if got, want := u["Install"]["WantedBy"], []string{"sockets.target"}; !slices.Equal(got, want) {
		t.Errorf("WantedBy = %q, want %q", got, want)
	}

	// The built agent's own help states the default the socket copies.
	dir := t.TempDir()
	out, err := exec.Command(buildAgent(t, dir), "agent", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("gpuaffinity agent --help: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "(default [:19400])") {
		t.Errorf("gpuaffinity agent --help no longer gives --web.listen-address's default as [:19400]:\n%s", out)
	}
	if !strings.Contains(string(out), "--web.systemd-socket") {
		t.Errorf("gpuaffinity agent has no --web.systemd-socket:\n%s", out)
	}

	s := readUnit(t, "gpuaffinity.service")
	execStart := s["Service"]["ExecStart"]
	if len(execStart) != 1 || !strings.HasSuffix(execStart[0], " $GPUAFFINITY_AGENT_ARGS") {
		t.Errorf("ExecStart = %q, want one line ending in $GPUAFFINITY_AGENT_ARGS", execStart)
	}
	if got, want := s["Service"]["EnvironmentFile"], []string{"-/etc/default/gpuaffinity"}; !slices.Equal(got, want) {
		t.Errorf("EnvironmentFile = %q, want %q", got, want)
	}
}
