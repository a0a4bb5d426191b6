package slurmconf_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/fleet/slurmconf"
)

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"tux[0-3,12,18-20]", []string{"tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20"}},
		{"node[01-04]", []string{"node01", "node02", "node03", "node04"}},
		{"n[08-10]", []string{"n08", "n09", "n10"}},
		{"n[8-10]", []string{"n8", "n9", "n10"}},
		{"a,b[1-2],c", []string{"a", "b1", "b2", "c"}},
		{"r[1-2]-t", []string{"r1-t", "r2-t"}},
		{"solo", []string{"solo"}},
		// Order and duplicates as written: the parsers, not the
		// expander, decide whether a duplicate is an error.
		{"b,a,a", []string{"b", "a", "a"}},
		// A name may be 64 characters with its number.
		{strings.Repeat("p", 62) + "[08-10]", []string{strings.Repeat("p", 62) + "08", strings.Repeat("p", 62) + "09", strings.Repeat("p", 62) + "10"}},
	}
	for _, tt := range tests {
		got, err := slurmconf.ExpandHostlist(tt.expr)
		if err != nil {
			t.Errorf("ExpandHostlist(%q): %v", tt.expr, err)
			continue
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("ExpandHostlist(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
	for _, bad := range []string{
		"", "n[1-", "n1]", "n[3-1]", "n[a-b]", "a,,b", "n[[1]]", "n[1][2]", "n[]", "n[1,]", "n[-1]",
		"n[1-2", "n]1[", ",a", "a,",
		"n[0000000001]",                         // ten digits
		"a b", "a#b", "a=b", "n\t1", "n[1]\x01", // characters a name may not hold
		strings.Repeat("p", 65),            // a name over 64 characters
		strings.Repeat("p", 63) + "[9-10]", // n10 makes it 65
	} {
		if got, err := slurmconf.ExpandHostlist(bad); err == nil {
			t.Errorf("ExpandHostlist(%q) = %q, want an error", bad, got)
		}
	}
}

// TestExpandHostlistRoundTrip reads back expressions of the forms
// fleet.Hostlist writes (folded trailing numbers of one width, groups
// sorted and joined by commas), written out by hand here because
// slurmconf may not import fleet; package fleet's own test runs
// Hostlist's output through ExpandHostlist.
func TestExpandHostlistRoundTrip(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		{"a[1-2,4]", "a1 a2 a4"},
		{"n[10-11],n[8-9]", "n10 n11 n8 n9"},
		{"n[008-010,100]", "n008 n009 n010 n100"},
		{"alpha,b001,b01,b1,beta", "alpha b001 b01 b1 beta"},
		{"r1-t[01-02],r2-t[01,03],x", "r1-t01 r1-t02 r2-t01 r2-t03 x"},
		{"gb200-r1-t[01-18]", "gb200-r1-t01 gb200-r1-t02 gb200-r1-t03 gb200-r1-t04 gb200-r1-t05 gb200-r1-t06 gb200-r1-t07 gb200-r1-t08 gb200-r1-t09 gb200-r1-t10 gb200-r1-t11 gb200-r1-t12 gb200-r1-t13 gb200-r1-t14 gb200-r1-t15 gb200-r1-t16 gb200-r1-t17 gb200-r1-t18"},
	}
	for _, tt := range tests {
		got, err := slurmconf.ExpandHostlist(tt.expr)
		if err != nil {
			t.Errorf("ExpandHostlist(%q): %v", tt.expr, err)
			continue
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("ExpandHostlist(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

// TestMaxNames: an expression past the bound is an error naming it,
// found by counting, before any name is made.
func TestMaxNames(t *testing.T) {
	for _, expr := range []string{
		"n[0-999999999]",
		"a[1-2000000],b[1-2000001]",
		"n[0-999999999],m[0-999999999],o[0-999999999]",
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := slurmconf.ExpandHostlist(expr)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("ExpandHostlist(%q) = %d names, want an error", expr, len(got))
			continue
		}
		if !strings.Contains(err.Error(), "4000000") {
			t.Errorf("ExpandHostlist(%q) = %v, want the error to name MaxNames (4000000)", expr, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("ExpandHostlist(%q) allocated %d bytes before failing", expr, n)
		}
	}
	// Just at the limit of ExpandHostlistLimit, and one past it.
	if got, err := slurmconf.ExpandHostlistLimit("n[1-3],m", 4); err != nil || len(got) != 4 {
		t.Errorf("ExpandHostlistLimit(n[1-3],m, 4) = %q, %v; want 4 names", got, err)
	}
	if _, err := slurmconf.ExpandHostlistLimit("n[1-3],m,o", 4); err == nil || !strings.Contains(err.Error(), "limit of 4 names") {
		t.Errorf("ExpandHostlistLimit(n[1-3],m,o, 4) = %v, want an error naming the limit of 4", err)
	}
}

func TestValidName(t *testing.T) {
	for _, s := range []string{"a", "leaf-r1", "x" + strings.Repeat("f", 63), "ocid1.x_y", "ünï"} {
		if err := slurmconf.ValidName("switch", s); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"", strings.Repeat("s", 65), "a b", "a\tb", "a#b", "a=b", "a,b", "a[1]", "a]", "a\x00", "a\u00a0b", "a\xff"} {
		if err := slurmconf.ValidName("switch", s); err == nil {
			t.Errorf("ValidName(%q) = nil, want an error", s)
		} else if !strings.HasPrefix(err.Error(), "switch") {
			t.Errorf("ValidName(%q) = %v, want it to start with the kind", s, err)
		}
	}
}
