package sysattr

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestParseHex(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"0x10de", 0x10de, true},
		{"0x030200\n", 0x030200, true},
		{"10de", 0, false}, // sysfs always writes the prefix
		{"0x", 0, false},
		{"0xzz", 0, false},
		{"0x1ffffffff", 0, false}, // wider than 32 bits
	} {
		got, err := ParseHex(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseHex(%q) = %#x, %v; want %#x ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestReadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	_, err := Int(filepath.Join(dir, "numa_node"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "numa_node") {
		t.Fatalf("missing file: got %v", err)
	}
	p := filepath.Join(dir, "garbage")
	os.WriteFile(p, []byte("abc\n"), 0o644)
	if _, err := Int(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("garbage: got %v", err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, MaxSize+10), 0o644)
	if _, err := String(big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("big: got %v", err)
	}
}

// A directory is refused as not a regular file; a file on disk that says
// it is over the bound is refused unread (no buffer of its size); one
// that fits is read whole, across several reads.
func TestReadFileLimitShapes(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadFileLimit(dir, MaxSize); !errors.Is(err, ErrNotRegular) {
		t.Errorf("directory: %v; want ErrNotRegular", err)
	}
	sparse := filepath.Join(dir, "sparse")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	_, err = ReadFileLimit(sparse, 16<<20)
	runtime.ReadMemStats(&b)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1073741824 bytes") {
		t.Errorf("1 GiB file: %v; want ErrTooLarge naming its size", err)
	}
	if got := b.TotalAlloc - a.TotalAlloc; got > 1<<20 {
		t.Errorf("refusing a 1 GiB file allocated %d bytes", got)
	}
	whole := filepath.Join(dir, "whole")
	want := strings.Repeat("0123456789abcdef", 20000) // 320,000 bytes
	os.WriteFile(whole, []byte(want), 0o644)
	if got, err := ReadFileLimit(whole, len(want)); err != nil || string(got) != want {
		t.Errorf("a file exactly at the bound: %d bytes, %v", len(got), err)
	}
	if _, err := ReadFileLimit(whole, len(want)-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a file one byte over the bound: %v", err)
	}
}

func FuzzParseHex(f *testing.F) {
	for _, s := range []string{"0x10de", "0x", "-1", "0x030200"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseHex(s); err == nil && v == 0 && !strings.Contains(s, "0") {
			t.Fatalf("ParseHex(%q) = 0 without error", s)
		}
	})
}
