package rdma

import "testing"

func TestParseState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		id   int
		text string
		ok   bool
	}{
		{"4: ACTIVE", 4, "ACTIVE", true},
		{"5: LinkUp\n", 5, "LinkUp", true},
		{"1: DOWN", 1, "DOWN", true},
		{"3: Disabled", 3, "Disabled", true},
		{"ACTIVE", 0, "", false},
		{"x: ACTIVE", 0, "", false},
		{"-1: ACTIVE", 0, "", false},
	} {
		id, text, err := ParseState(tc.in)
		if (err == nil) != tc.ok || id != tc.id || text != tc.text {
			t.Errorf("ParseState(%q) = %d %q %v", tc.in, id, text, err)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"400 Gb/sec (4X NDR)", 400, true},
		{"200 Gb/sec (4X HDR)", 200, true},
		{"2.5 Gb/sec (1X SDR)", 2.5, true}, // a port that trained down to SDR
		{"100 Gb/sec", 100, true},          // EFA prints no width
		{"400", 0, false},
		{"fast Gb/sec", 0, false},
		{"400 Mb/sec", 0, false},
	} {
		got, err := ParseRate(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseRate(%q) = %v %v", tc.in, got, err)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"400 Gb/sec (4X NDR)", "100 Gb/sec", "", "NaN Gb/sec"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate(s)
		if err == nil && (v < 0 || v > 1e6 || v != v) {
			t.Fatalf("ParseRate(%q) = %v", s, v)
		}
	})
}

func FuzzParseState(f *testing.F) {
	for _, s := range []string{"4: ACTIVE", "5: LinkUp", ":", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if id, _, err := ParseState(s); err == nil && id < 0 {
			t.Fatalf("ParseState(%q) = %d", s, id)
		}
	})
}
