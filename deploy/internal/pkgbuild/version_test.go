package pkgbuild

import (
	"os/exec"
	"strings"
	"testing"
)

// Version's rules, from what `git describe --tags --always --dirty`
// prints (git-describe(1): TAG, TAG-N-gHASH, HASH, each with -dirty).
func TestVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.0":                  "1.2.0",
		"1.2":                     "1.2",
		"v1.2.0-rc1":              "1.2.0~rc1",
		"v1.2.0-rc.1":             "1.2.0~rc.1",
		"v1.2.0-3-gabc1234":       "1.2.0+git3.abc1234",
		"v1.2.0-rc1-12-g0123abcd": "1.2.0~rc1+git12.0123abcd",
		"v1.2.0-3-gabc1234-dirty": "1.2.0+git3.abc1234.dirty",
		"v1.2.0-dirty":            "1.2.0+dirty",
		"2824304":                 "0.0.0~git.2824304",
		"2824304-dirty":           "0.0.0~git.2824304.dirty",
		"dev":                     "0.0.0~dev",
		" v1.2.0\n":               "1.2.0",
	} {
		if got, err := Version(in); err != nil || got != want {
			t.Errorf("Version(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "release-one", "v1.2.0_beta", "vx", "v1.2.0-3-gxyz"} {
		if got, err := Version(in); err == nil {
			t.Errorf("Version(%q) = %q, want an error", in, got)
		}
	}
}

// dpkg and rpm, asked themselves, order the versions as the commits go:
// each is older than the next.
func TestVersionOrder(t *testing.T) {
	dpkg := needTool(t, "dpkg", "dpkg")
	rpmTool := needTool(t, "rpm", "rpm")
	order := []string{
		"dev",
		"v1.2.0-rc1",
		"v1.2.0-rc1-2-gabc1234",
		"v1.2.0",
		"v1.2.0-dirty",
		"v1.2.0-3-gabc1234",
		"v1.2.0-3-gabc1234-dirty",
		"v1.2.0-10-g0000000",
		"v1.2.1",
		"v1.10.0",
	}
	for i := 0; i+1 < len(order); i++ {
		a, err := Version(order[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := Version(order[i+1])
		if err != nil {
			t.Fatal(err)
		}
		// dpkg(1): --compare-versions a lt b exits 0 when a is older.
		if err := exec.Command(dpkg, "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg: %s (from %s) is not older than %s (from %s)", a, order[i], b, order[i+1])
		}
		// rpm's Lua rpm.vercmp(a, b): -1 when a is older.
		out, err := exec.Command(rpmTool, "--eval", `%{lua:print(rpm.vercmp("`+a+`", "`+b+`"))}`).Output()
		if err != nil || strings.TrimSpace(string(out)) != "-1" {
			t.Errorf("rpm: vercmp(%s, %s) = %q, %v; want -1", a, b, out, err)
		}
	}
}
