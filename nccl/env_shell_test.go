package nccl

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

var envShells = []string{"bash", "dash", "zsh"}

// envShell returns the path of shell, skipping the test where it is not
// installed locally and failing it in CI (env CI set), where `make test`
// installs every shell.
func envShell(t *testing.T, shell string) string {
	t.Helper()
	p, err := exec.LookPath(shell)
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("%s not installed (CI is set: the shell-safety test must run on every shell)", shell)
		}
		t.Skipf("%s not installed: install it to run the shell-safety test (make test does)", shell)
	}
	return p
}

// envEval runs `out; printf '%s\0' "$NAME"...` in shell, in an empty
// directory, and returns the printed values and the directory's entries
// afterwards.
func envEval(t *testing.T, shell, out string, names []string) (vals []string, created []string) {
	t.Helper()
	dir := t.TempDir()
	var script strings.Builder
	script.WriteString(out)
	script.WriteString("\nprintf '%s\\0'")
	for _, n := range names {
		script.WriteString(` "$` + n + `"`)
	}
	script.WriteString("\n")
	cmd := exec.Command(envShell(t, shell), "-c", script.String())
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr: %s\nscript:\n%s", shell, err, stderr.String(), script.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("%s wrote to stderr: %s", shell, stderr.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		created = append(created, e.Name())
	}
	s := stdout.String()
	if !strings.HasSuffix(s, "\x00") {
		t.Fatalf("%s: output %q does not end in NUL", shell, s)
	}
	return strings.Split(strings.TrimSuffix(s, "\x00"), "\x00"), created
}

func envCheckShells(t *testing.T, vars []Var) {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSh(&b, vars); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vars {
		names = append(names, v.Name)
	}
	for _, shell := range envShells {
		t.Run(shell, func(t *testing.T) {
			vals, created := envEval(t, shell, b.String(), names)
			if len(vals) != len(vars) {
				t.Fatalf("%d values back, want %d: %q", len(vals), len(vars), vals)
			}
			for i, v := range vars {
				if vals[i] != v.Value {
					t.Errorf("%s: %s = %q, want %q", shell, v.Name, vals[i], v.Value)
				}
			}
			if len(created) > 0 {
				t.Errorf("%s: evaluating the output created %q", shell, created)
			}
		})
	}
}

// TestWriteShInert: values that would expand, split, glob or run
// something unquoted arrive byte for byte.
func TestWriteShInert(t *testing.T) {
	envCheckShells(t, []Var{
		{"A", "=mlx5_0:1,mlx5_1:1"},
		{"B", "^docker,lo"},
		{"C", "$(touch x)"},
		{"D", "`touch x`"},
		{"E", "a'b"},
		{"F", "x;touch x"},
		{"G", `back\slash\n`},
		{"H", "line1\nline2"},
		{"I", "*"},
		{"J", "~root"},
		{"K", "${HOME}"},
		{"L", "!!"},
		{"M", "'"},
		{"N", "''\\''"},
		{"O", "tab\there"},
		{"P", ""},
		{"Q", "-n"},
		{"R", "\x01\xff"},
		{"S", "a > x"},
		{"_u9", "=(touch x)"},
	})
}

// envRename renames a netdev or RDMA device of a fake root the way the
// kernel does: the class link and the device's directory, plus the route
// table.
func envRename(t *testing.T, root, class, old, new string) {
	t.Helper()
	classDir := filepath.Join(root, "sys/class", class)
	target, err := os.Readlink(filepath.Join(classDir, old))
	if err != nil {
		t.Fatal(err)
	}
	newTarget := filepath.Join(filepath.Dir(target), new)
	if err := os.Rename(filepath.Join(classDir, target), filepath.Join(classDir, newTarget)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(classDir, old)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(newTarget, filepath.Join(classDir, new)); err != nil {
		t.Fatal(err)
	}
	route := filepath.Join(root, "proc/net/route")
	if data, err := os.ReadFile(route); err == nil {
		data = bytes.ReplaceAll(data, []byte(old+"\t"), []byte(new+"\t"))
		if err := os.WriteFile(route, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEnvHostileNames: interface and RDMA device names are data from the
// machine; Linux allows quotes, $, ` and ; in them (at most 15 bytes for
// netdevs). The rendered env must carry them inert through every shell.
func TestEnvHostileNames(t *testing.T) {
	for _, tc := range []struct {
		machine string
		renames [][3]string // class, old, new
		want    map[string]string
	}{
		{"dgx-h100", [][3]string{
			{"net", "enp4s0f0", "$(touch${IFS}x)"}, // 15 bytes
			{"net", "ibp24s0", "a'b"},
			{"infiniband", "mlx5_0", "x;y`touch x`'"},
		}, map[string]string{
			"NCCL_SOCKET_IFNAME": "=$(touch${IFS}x)",
			"GPUAFFINITY_NICS":   "x;y`touch x`'",
			"UCX_NET_DEVICES":    "x;y`touch x`':1",
		}},
		{"gcp-a3-mega", [][3]string{
			{"net", "enp0s12", "a'b"},
			{"net", "enp6s0", "$(>x)"},
			{"net", "enp7s0", "`id`;x"},
		}, map[string]string{
			"NCCL_SOCKET_IFNAME":    "=a'b",
			"NCCL_FASTRAK_CTRL_DEV": "a'b",
			"NCCL_FASTRAK_IFNAME":   "$(>x),`id`;x,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0",
			"GPUAFFINITY_NICS":      "$(>x)",
		}},
	} {
		t.Run(tc.machine, func(t *testing.T) {
			root := fakesystest.Root(t, tc.machine)
			for _, r := range tc.renames {
				envRename(t, root, r[0], r[1], r[2])
			}
			n, err := discover.Discover(discover.Options{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			e := envMustBuild(t, n, EnvRequest{Rank: envIntp(0)})
			for name, want := range tc.want {
				envMustGet(t, e, name, want)
			}
			if v, _ := e.Get("NCCL_IB_HCA"); tc.machine == "dgx-h100" && !strings.HasPrefix(v, "=x;y`touch x`':1,") {
				t.Errorf("NCCL_IB_HCA = %q", v)
			}
			envCheckShells(t, e.Vars)
		})
	}
}
