package rdma

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// PortCounters reads the named counters/ files of one port with the
// reader's bounded read (readAttr by default): missing files are left
// out, a missing port is fs.ErrNotExist, a file that is not a number is
// an error naming it.
func TestCounterReaderPortCounters(t *testing.T) {
	root := scrapeRoot(t)
	r := &CounterReader{Root: root}
	got, err := r.PortCounters("mlx5_0", 1, ErrorCounters)
	if err != nil {
		t.Fatal(err)
	}
	// scrapeRoot's mlx5_0 port 1 has symbol_error only of the four.
	if d := cmp.Diff(map[string]uint64{"symbol_error": 7}, got); d != "" {
		t.Errorf("mlx5_0 port 1 (-want +got):\n%s", d)
	}
	if got, err := r.PortCounters("mlx5_1", 2, ErrorCounters); err != nil || got["link_downed"] != 21 || len(got) != 1 {
		t.Errorf("mlx5_1 port 2: %v, %v", got, err)
	}
	if _, err := r.PortCounters("mlx5_9", 1, ErrorCounters); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing device: %v", err)
	}
	if _, err := r.PortCounters("mlx5_0", 1, []string{"../state"}); err == nil {
		t.Error("a name with a slash: want an error")
	}
	c := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/counters")
	if err := os.WriteFile(filepath.Join(c, "link_downed"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = r.PortCounters("mlx5_0", 1, ErrorCounters)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(c, "link_downed")) {
		t.Errorf("garbage counter: want an error naming the file, got %v", err)
	}
	if got["symbol_error"] != 7 {
		t.Errorf("garbage counter: the others are lost: %v", got)
	}
}

// Every file PortCounters reads goes through ReadFile (the bounded read
// seam), and an EINVAL file is read once, remembered and left out; the
// memory is the reader's, shared with Read (the scrape).
func TestCounterReaderPortCountersEINVAL(t *testing.T) {
	root := scrapeRoot(t)
	c := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/counters")
	bad := filepath.Join(c, "VL15_dropped")
	var mu sync.Mutex
	reads := map[string]int{}
	r := &CounterReader{Root: root, ReadFile: func(name string) ([]byte, error) {
		mu.Lock()
		reads[name]++
		mu.Unlock()
		if name == bad {
			return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EINVAL}
		}
		return os.ReadFile(name)
	}}
	names := []string{"symbol_error", "VL15_dropped", "link_downed"}
	for i := range 3 {
		got, err := r.PortCounters("mlx5_0", 1, names)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if d := cmp.Diff(map[string]uint64{"symbol_error": 7}, got); d != "" {
			t.Errorf("read %d (-want +got):\n%s", i, d)
		}
	}
	if reads[bad] != 1 {
		t.Errorf("EINVAL file read %d times in 3 reads, want once", reads[bad])
	}
	for p := range reads {
		if filepath.Dir(p) != c {
			t.Errorf("read %s, outside the port's counters/", p)
		}
	}
	if reads[filepath.Join(c, "symbol_error")] != 3 {
		t.Errorf("symbol_error read %d times, want 3 (through ReadFile)", reads[filepath.Join(c, "symbol_error")])
	}
	if d := cmp.Diff([]string{bad}, r.DisabledFiles()); d != "" {
		t.Errorf("DisabledFiles (-want +got):\n%s", d)
	}
	// The scrape on the same reader does not read it again.
	got, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if reads[bad] != 1 || got[0].Disabled != 1 {
		t.Errorf("after Read: EINVAL file read %d times, Disabled %d; want 1 and 1", reads[bad], got[0].Disabled)
	}
	// A port whose only named counters are disabled has none to give.
	if _, err := r.PortCounters("mlx5_0", 1, []string{"VL15_dropped"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("only a disabled counter: %v", err)
	}
}
