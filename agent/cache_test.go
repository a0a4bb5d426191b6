package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadCache(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	n, err := discover.Discover(discover.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, _, err := writeState(dir, n); err != nil {
		t.Fatal(err)
	}
	topo := filepath.Join(dir, cache.TopologyFile)
	// The fixture has no proc/stat: only a named state directory trusts
	// the file.
	if _, err := cache.Load(cache.Options{Dir: dir, Root: root}); err == nil || !strings.Contains(err.Error(), "cannot tell whether it is from this boot") {
		t.Errorf("no boot time, not trusted: %v", err)
	}
	got, err := cache.Load(cache.Options{Dir: dir, Root: root, TrustWithoutBoot: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GPUs) != 8 || got.Pairs[3].NICs[0] != "mlx5_5" || !got.CPU.Allowed.Equal(n.CPU.Allowed) {
		t.Errorf("cached node: %d GPUs, pair 3 %v, allowed %s (want %s)", len(got.GPUs), got.Pairs[3].NICs, got.CPU.Allowed, n.CPU.Allowed)
	}

	// Boot an hour ago: the file (written now) is from this boot; boot in
	// a minute: it is not.
	stat := filepath.Join(root, "proc/stat")
	writeFile(t, stat, "cpu  1 2 3 4\nbtime "+itoa(time.Now().Add(-time.Hour).Unix())+"\nprocesses 5\n")
	if _, err := cache.Load(cache.Options{Dir: dir, Root: root}); err != nil {
		t.Errorf("file from this boot: %v", err)
	}
	writeFile(t, stat, "btime "+itoa(time.Now().Add(time.Minute).Unix())+"\n")
	if _, err := cache.Load(cache.Options{Dir: dir, Root: root, TrustWithoutBoot: true}); err == nil || !strings.Contains(err.Error(), "before the boot") {
		t.Errorf("file from before the boot: %v", err)
	}
	writeFile(t, stat, "btime x\n")
	if _, err := cache.Load(cache.Options{Dir: dir, Root: root, TrustWithoutBoot: true}); err == nil {
		t.Error("bad btime accepted")
	}
	os.Remove(stat)

	// The reading process's allowed CPUs replace the agent's.
	status := filepath.Join(root, "proc/self/status")
	writeFile(t, status, "Name:\tlauncher\nCpus_allowed_list:\t0-3,112-115\n")
	got, err = cache.Load(cache.Options{Dir: dir, Root: root, TrustWithoutBoot: true})
	if err != nil || got.CPU.Allowed.String() != "0-3,112-115" {
		t.Errorf("allowed CPUs %s, %v", got.CPU.Allowed, err)
	}

	for name, content := range map[string]string{
		"torn":         `{"schema": "gpuaffinity.topology/v1", "gpus": [`,
		"other schema": `{"schema": "gpuaffinity.topology/v2"}`,
		"no schema":    `{}`,
	} {
		writeFile(t, topo, content)
		if _, err := cache.Load(cache.Options{Dir: dir, Root: root, TrustWithoutBoot: true}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	os.Remove(topo)
	if _, err := cache.Load(cache.Options{Dir: dir, Root: root, TrustWithoutBoot: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestBootTimeLive(t *testing.T) {
	bt, err := cache.BootTime("/")
	if err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	if bt.After(time.Now()) || bt.Before(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("boot time %v", bt)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
