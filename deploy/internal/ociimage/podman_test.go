package ociimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

// podman takes the tarball as `make image` writes it: `podman load`
// names it Repository:Release, `podman image inspect` shows our
// entrypoint and labels, and what `podman save` gives back has our layers
// (by DiffID) and runs in a chroot like the original. `podman run
// --network=none` is tried too; on machines where crun may not set
// rlimits (sandboxed VMs such as this project's), it is reported, not
// failed. podman's storage is a scratch directory (vfs driver), so the
// host's images are untouched.
func TestPodman(t *testing.T) {
	needBins(t)
	podman, err := exec.LookPath("podman")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("podman missing under CI (Debian package podman; make test installs it)")
		}
		t.Skip("podman not installed (Debian package podman)")
	}
	if os.Geteuid() != 0 {
		t.Skip("rootful podman with scratch storage needs root (CI runs as root)")
	}
	img, err := Build(Spec{Binaries: []string{bins.lean, bins.agent, bins.fleet}, Version: bins.version, Revision: "test"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "image.tar")
	ref := Repository + ":" + Release
	if err := Write(file, ref, img); err != nil {
		t.Fatal(err)
	}
	// podman's storage is not under t.TempDir: after a `podman run`,
	// conmon starts `podman container cleanup` on its own, which may
	// still write there when the test ends. Cleanup waits for such
	// processes before removing it.
	store, err := os.MkdirTemp("", "ociimage-podman-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeStore(t, store) })
	pm := func(args ...string) (string, error) {
		base := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"),
			"--storage-driver", "vfs", "--events-backend", "none", "--cgroup-manager", "cgroupfs"}
		// A hung podman (conmon, crun) fails this test, not the package's
		// whole go test run.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, podman, append(base, args...)...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF=/dev/null", "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := pm("load", "-i", file)
	if err != nil {
		t.Fatalf("podman load: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Loaded image: "+ref) {
		t.Errorf("podman load did not name %s:\n%s", ref, out)
	}
	out, err = pm("image", "inspect", "--format", "{{json .Config.Entrypoint}} {{index .Config.Labels \"org.opencontainers.image.version\"}}", ref)
	if err != nil {
		t.Fatalf("podman image inspect: %v\n%s", err, out)
	}
	if want := `["/usr/bin/gpuaffinity"] ` + bins.version; strings.TrimSpace(out) != want {
		t.Errorf("podman image inspect: %q, want %q", strings.TrimSpace(out), want)
	}

	saved := filepath.Join(dir, "saved.tar")
	if out, err := pm("save", "--format", "docker-archive", "-o", saved, ref); err != nil {
		t.Fatalf("podman save: %v\n%s", err, out)
	}
	tag, _ := name.NewTag(ref)
	back, err := tarball.ImageFromPath(saved, &tag)
	if err != nil {
		t.Fatalf("podman's saved image: %v", err)
	}
	ours, theirs := diffIDs(t, img), diffIDs(t, back)
	if !slices.Equal(ours, theirs) {
		t.Errorf("layers after podman load/save: %v, built %v", theirs, ours)
	}
	root := t.TempDir()
	unpack(t, back, root)
	checkRuns(t, root)

	out, err = pm("run", "--rm", "--network=none", "--pull=never", ref, "version")
	switch {
	case err != nil && strings.Contains(out, "setrlimit"):
		t.Logf("podman run is not possible on this machine (crun cannot set rlimits), so the image was run by chroot only:\n%s", out)
	case err != nil:
		t.Errorf("podman run: %v\n%s", err, out)
	case !strings.HasPrefix(out, "gpuaffinity "+bins.version+" "):
		t.Errorf("podman run version: %q", out)
	}
}

func diffIDs(t *testing.T, img v1.Image) []string {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range cf.RootFS.DiffIDs {
		ids = append(ids, h.String())
	}
	if len(ids) != 2 {
		t.Errorf("%d layers, want 2", len(ids))
	}
	return ids
}

// removeStore removes podman's scratch storage once no process names it
// on its command line (podman, conmon and their cleanup), waiting up to
// 30 s for them.
func removeStore(t *testing.T, store string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && usedBy(store) != "" {
		time.Sleep(100 * time.Millisecond)
	}
	if p := usedBy(store); p != "" {
		t.Errorf("podman processes still use %s after 30 s: %s", store, p)
	}
	if err := os.RemoveAll(store); err != nil {
		t.Errorf("remove podman's storage: %v", err)
	}
}

// usedBy is the command line of a process whose arguments name dir, or "".
func usedBy(dir string) string {
	pids, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), dir) {
			return strings.ReplaceAll(string(b), "\x00", " ")
		}
	}
	return ""
}
