package rdma

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestReadPortCounters(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/counters")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "symbol_error"), []byte("12\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "link_downed"), []byte("0\n"), 0o644)
	got, err := ReadPortCounters(root, "mlx5_0", 1, ErrorCounters)
	if err != nil || got["symbol_error"] != 12 || got["link_downed"] != 0 || len(got) != 2 {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ReadPortCounters(root, "mlx5_1", 1, ErrorCounters); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing device: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "symbol_error"), []byte("x\n"), 0o644)
	if _, err := ReadPortCounters(root, "mlx5_0", 1, ErrorCounters); err == nil {
		t.Error("garbage counter: want an error")
	}
}
