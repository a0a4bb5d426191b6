package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// Another user must not steer launchers: a state directory or
// topology.json another user could write is refused (cache.ErrUntrusted), and
// so is a FIFO or link in the file's place, at once (a FIFO must not hang
// every rank of a job).
func TestLoadCacheTrust(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	n, err := discover.Discover(discover.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	fresh := func(t *testing.T) (string, string) {
		dir := t.TempDir()
		if _, _, err := writeState(dir, n); err != nil {
			t.Fatal(err)
		}
		return dir, filepath.Join(dir, cache.TopologyFile)
	}
	load := func(dir string) error {
		done := make(chan error, 1)
		go func() {
			_, err := cache.Load(cache.Options{Dir: dir, Root: root, TrustWithoutBoot: true})
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("LoadCache hangs")
			return nil
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir, topo string)
		want  string
		is    error
	}{
		{"file writable by others", func(t *testing.T, dir, topo string) { os.Chmod(topo, 0o666) }, "writable by its group or others (mode 0666)", cache.ErrUntrusted},
		{"directory writable by others", func(t *testing.T, dir, topo string) { os.Chmod(dir, 0o777) }, "directory is writable by its group or others", cache.ErrUntrusted},
		{"a FIFO in the file's place", func(t *testing.T, dir, topo string) {
			os.Remove(topo)
			if err := syscall.Mkfifo(topo, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file", cache.ErrUntrusted},
		{"a link in the file's place", func(t *testing.T, dir, topo string) {
			other := filepath.Join(t.TempDir(), "evil.json")
			data, _ := os.ReadFile(topo)
			os.WriteFile(other, data, 0o644)
			os.Remove(topo)
			os.Symlink(other, topo)
		}, "too many levels of symbolic links", nil},
		{"file owned by another user", func(t *testing.T, dir, topo string) {
			if os.Geteuid() != 0 {
				t.Skip("not root: cannot chown")
			}
			os.Chown(topo, 65534, 65534)
		}, "owned by uid 65534", cache.ErrUntrusted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, topo := fresh(t)
			if err := load(dir); err != nil {
				t.Fatalf("before: %v", err)
			}
			tc.setup(t, dir, topo)
			err := load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// The agent makes the state directory it creates 0755 whatever the
// umask, and refuses one that others can write.
func TestStateDirTrust(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "state")
	if err := cleanStateDir(dir, ""); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("created state dir: %v %v", fi.Mode(), err)
	}
	os.Chmod(dir, 0o777)
	if err := cleanStateDir(dir, ""); !errors.Is(err, cache.ErrUntrusted) || !strings.Contains(err.Error(), "writable by its group or others") {
		t.Errorf("0777 state dir: %v", err)
	}
}

// Disk full: the state files are one generation, so a topology that does
// not fit leaves every file as it was (not a new env beside an old
// topology.json). A 64 KiB tmpfs holds the small fixture's files but not
// the DGX's topology.json (about 100 kB).
func TestWriteStateDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	small, err := discover.Discover(discover.Options{Root: fakesystest.Root(t, "h200-vm")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := writeState(dir, small); err != nil {
		t.Fatalf("small node: %v", err)
	}
	before := map[string]string{}
	for _, name := range []string{cache.TopologyFile, cache.EnvFile, cache.NCCLTopoFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		before[name] = string(b)
	}
	big, err := discover.Discover(discover.Options{Root: fakesystest.Root(t, "dgx-h100")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := writeState(dir, big); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("writing the DGX's state into 64 KiB: %v", err)
	}
	for name, want := range before {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("%s changed after a failed write", name)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// A value dotenv cannot hold is left out of the env file with a warning;
// the other state files are written.
func TestWriteStateDotenvUnholdable(t *testing.T) {
	n, err := discover.Discover(discover.Options{Root: fakesystest.Root(t, "dgx-h100")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n.NICs {
		for j := range n.NICs[i].Interfaces {
			if n.NICs[i].Interfaces[j].Name == n.DefaultRouteInterface {
				n.NICs[i].Interfaces[j].Name = "eth 0$(x)"
			}
		}
	}
	n.DefaultRouteInterface = "eth 0$(x)"
	dir := t.TempDir()
	_, warns, err := writeState(dir, n)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := os.ReadFile(filepath.Join(dir, cache.EnvFile))
	if strings.Contains(string(env), "eth 0") || !strings.Contains(string(env), "NCCL_IB_HCA=") {
		t.Errorf("env file:\n%s", env)
	}
	if !strings.Contains(strings.Join(warns, "\n"), "left out: dotenv cannot hold it") {
		t.Errorf("warnings %q", warns)
	}
	if _, err := os.Stat(filepath.Join(dir, cache.TopologyFile)); err != nil {
		t.Error(err)
	}
}

// A state directory root gave to another user (systemd's RuntimeDirectory=
// of a DynamicUser= agent: /run/gpuaffinity owned by the dynamic user) is
// trusted, with the files that user wrote; the same directory where that
// user could have made it itself (a sticky or foreign parent) is not.
func TestLoadCacheServiceUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot chown")
	}
	root := fakesystest.Root(t, "dgx-h100")
	n, err := discover.Discover(discover.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	os.Chmod(run, 0o755)
	dir := filepath.Join(run, "gpuaffinity")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := writeState(dir, n); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, cache.TopologyFile)} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cache.Load(cache.Options{Dir: dir, Root: root, TrustWithoutBoot: true}); err != nil {
		t.Errorf("the service user's directory in a root-only parent: %v", err)
	}
	os.Chmod(run, 0o1777)
	if _, err := cache.Load(cache.Options{Dir: dir, Root: root, TrustWithoutBoot: true}); !errors.Is(err, cache.ErrUntrusted) || !strings.Contains(err.Error(), "is not root's alone") {
		t.Errorf("the same directory in a sticky parent: %v", err)
	}
}
