package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/render"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// A kill -9 while the state files are being written never leaves a torn
// file: the test binary is re-run as a writer (TestMain, writerEnv) that
// rewrites the files with megabytes of distinct content in a loop and is
// killed at random moments. After each kill every file is absent or a
// complete document, and at most one temporary file is left (the writer
// removes its predecessor's at start, as the agent does).
func TestStateFilesSurviveKill(t *testing.T) {
	n, err := discover.Discover(discover.Options{Root: fakesystest.Root(t, "dgx-h100")})
	if err != nil {
		t.Fatal(err)
	}
	nodeFile := filepath.Join(t.TempDir(), "node.json")
	f, err := os.Create(nodeFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := render.JSON(f, n); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dotenvLine := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=[A-Za-z0-9_.,:=^/@%+-]*$`)
	killedMidWrite := 0
	for i := range 30 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+dir, writerEnv+"_NODE="+nodeFile)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "writing\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("writer %d: %q %v; stderr:\n%s", i, line, err, stderr.String())
		}
		time.Sleep(time.Duration(rand.IntN(40_000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, stdout)
		if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("writer %d ended with %v before the kill; stderr:\n%s", i, err, stderr.String())
		}

		// One generation is written to temporary files first (one per
		// state file), then renamed: a kill leaves at most those.
		temps, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
		if len(temps) > 4 { // topology.json, launch.node, nccl-topo.xml, env
			t.Fatalf("after kill %d: %d temporary files: %v", i, len(temps), temps)
		}
		killedMidWrite += len(temps)
		checkStateFiles(t, dir, dotenvLine)
	}
	t.Logf("%d temporary files left behind by 30 kills (removed by the next writer)", killedMidWrite)
}

// checkStateFiles fails unless each state file is absent or complete.
func checkStateFiles(t *testing.T, dir string, dotenvLine *regexp.Regexp) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, f := range []string{cache.TopologyFile, cache.LaunchFile} {
		b := read(f)
		if b == nil {
			continue
		}
		var n topology.Node
		var err error
		if f == cache.LaunchFile {
			n, err = cache.DecodeLaunch(f, b)
		} else {
			err = json.Unmarshal(b, &n)
		}
		if err != nil {
			t.Fatalf("torn %s (%d bytes): %v", f, len(b), err)
		}
		// The writer pairs host name and warning; a mix of two writes
		// would not.
		if len(n.Warnings) != 1 || !strings.HasPrefix(n.Warnings[0], strings.TrimPrefix(n.Hostname, "writer-")+":") {
			t.Fatalf("%s mixes writes: host %q", f, n.Hostname)
		}
	}
	if b := read(cache.NCCLTopoFile); b != nil {
		dec := xml.NewDecoder(bytes.NewReader(b))
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("torn %s (%d bytes): %v", cache.NCCLTopoFile, len(b), err)
			}
		}
		if !bytes.HasSuffix(bytes.TrimSpace(b), []byte("</system>")) {
			t.Fatalf("torn %s: ends %q", cache.NCCLTopoFile, b[max(0, len(b)-40):])
		}
	}
	if b := read(cache.EnvFile); b != nil {
		if !bytes.HasSuffix(b, []byte("\n")) {
			t.Fatalf("torn %s: last line incomplete: %q", cache.EnvFile, b)
		}
		ls := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		for _, l := range ls {
			if !dotenvLine.MatchString(l) {
				t.Fatalf("torn %s: line %q", cache.EnvFile, l)
			}
		}
		if !strings.HasPrefix(ls[len(ls)-1], "NCCL_TOPO_FILE=") {
			t.Fatalf("%s: last line %q", cache.EnvFile, ls[len(ls)-1])
		}
	}
}

// removeStaleTemps removes exactly the temporary files of its target.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{".env.tmp-123", ".env.tmp-456", "env", ".topology.json.tmp-1", "other.tmp-1", ".envx.tmp-1"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	if err := removeStaleTemps(filepath.Join(dir, "env")); err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if got := strings.Join(left, " "); got != ".envx.tmp-1 .topology.json.tmp-1 env other.tmp-1" {
		t.Errorf("left %s", got)
	}
}
