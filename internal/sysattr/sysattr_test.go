package sysattr

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
