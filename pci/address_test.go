package pci

import "testing"

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"0000:18:00.0", "0000:18:00.0", true},
		{"00000000:18:00.0", "0000:18:00.0", true}, // NVML's 8-digit domain
		{"0000:1A:00.1", "0000:1a:00.1", true},     // upper case from NVML
		{"18:00.0", "0000:18:00.0", true},          // BDF without domain
		{"0101:00:00.0", "0101:00:00.0", true},     // Hyper-V domains
		{"10001:00:00.0", "10001:00:00.0", true},   // VMD domains are 5 digits
		{"0000:18:00", "", false},
		{"0000:18:20.0", "", false}, // device > 0x1f
		{"0000:18:00.8", "", false}, // function > 7
		{"0000:118:00.0", "", false},
		{"pci0000:00", "", false},
		{"", "", false},
		{"0000:18:00.0.1", "", false},
	} {
		a, err := ParseAddress(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseAddress(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && a.String() != tc.want {
			t.Errorf("ParseAddress(%q) = %s, want %s", tc.in, a, tc.want)
		}
	}
}

// TestCanonical: the bus ids NVML writes, and the sysfs form, come out in
// the sysfs form (the NVML reader names GPUs so; it once had its own
// parser for this).
func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		wantErr  bool
	}{
		{in: "00000000:18:00.0", want: "0000:18:00.0"},  // NVML's 8-digit domain
		{in: "00000000:9A:00.0", want: "0000:9a:00.0"},  // NVML writes upper case
		{in: "0000:3b:00.1", want: "0000:3b:00.1"},      // already sysfs form
		{in: "3b:00.0", want: "0000:3b:00.0"},           // no domain
		{in: "00010000:01:1f.7", want: "10000:01:1f.7"}, // a domain above 16 bits keeps its digits
		{in: "", wantErr: true},
		{in: "0000:18:00", wantErr: true},
		{in: "0000:zz:00.0", wantErr: true},
		{in: "0000:100:00.0", wantErr: true},
		{in: "0000:18:20.0", wantErr: true},
		{in: "0000:18:00.8", wantErr: true},
		{in: "0000:18:00.-1", wantErr: true},
	} {
		got, err := Canonical(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"0000:18:00.0", "00000000:18:00.0", "18:00.0", "::.", "0:0:0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			return
		}
		b, err := ParseAddress(a.String())
		if err != nil || a != b {
			t.Fatalf("ParseAddress(%q) = %v; reparse of %q = %v, %v", s, a, a.String(), b, err)
		}
	})
}

func TestGen(t *testing.T) {
	for in, want := range map[string]int{"2.5 GT/s PCIe": 1, "5.0 GT/s PCIe": 2, "8.0 GT/s PCIe": 3, "16.0 GT/s PCIe": 4, "32.0 GT/s PCIe": 5, "64.0 GT/s PCIe": 6, "Unknown": 0} {
		if got := Gen(in); got != want {
			t.Errorf("Gen(%q) = %d, want %d", in, got, want)
		}
	}
}
