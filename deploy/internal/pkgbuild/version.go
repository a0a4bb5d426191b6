package pkgbuild

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	// describeRE is `git describe --tags` on a commit after a tag:
	// TAG-N-gHASH (git-describe(1)).
	describeRE = regexp.MustCompile(`^(.+)-([0-9]+)-g([0-9a-f]{4,64})$`)
	// hashRE is `git describe --always` with no tag to describe from: the
	// abbreviated commit name alone.
	hashRE = regexp.MustCompile(`^[0-9a-f]{4,64}$`)
	// tagRE is a release tag: v1.2.3, 1.2, v1.2.0-rc1, v1.2.0-rc.1.
	tagRE = regexp.MustCompile(`^v?([0-9]+(?:\.[0-9]+)*)(?:[-.~]?([A-Za-z][A-Za-z0-9.]*))?$`)
)

// Version turns the Makefile's VERSION (`git describe --tags --always
// --dirty`, or "dev" outside a git tree) into a version that dpkg and rpm
// both accept and order the way the commits go (for tags and builds
// after a tag; two untagged builds compare by hash, in no useful order).
// Only digits, letters and
// . + ~ appear in it: dpkg takes a hyphen as the start of the Debian
// revision (deb-version(5)) and rpm refuses one in a version.
//
//	v1.2.0                    1.2.0
//	v1.2.0-rc1                1.2.0~rc1            (~ sorts before 1.2.0)
//	v1.2.0-3-gabc1234         1.2.0+git3.abc1234   (+ sorts after 1.2.0)
//	v1.2.0-3-gabc1234-dirty   1.2.0+git3.abc1234.dirty
//	v1.2.0-dirty              1.2.0+dirty
//	abc1234                   0.0.0~git.abc1234    (no tag yet)
//	abc1234-dirty             0.0.0~git.abc1234.dirty
//	dev                       0.0.0~dev            (not a git tree)
func Version(describe string) (string, error) {
	d := strings.TrimSpace(describe)
	base, dirty := strings.CutSuffix(d, "-dirty")
	var v string
	switch m := describeRE.FindStringSubmatch(base); {
	case base == "dev" && !dirty:
		return "0.0.0~dev", nil
	case m != nil:
		tag, err := tagVersion(m[1])
		if err != nil {
			return "", fmt.Errorf("version %q: %w", describe, err)
		}
		v = tag + "+git" + m[2] + "." + m[3]
	case hashRE.MatchString(base):
		v = "0.0.0~git." + base
	default:
		tag, err := tagVersion(base)
		if err != nil {
			return "", fmt.Errorf("version %q: %w", describe, err)
		}
		v = tag
	}
	if dirty {
		if strings.Contains(v, "+") || strings.Contains(v, "~git.") {
			v += ".dirty"
		} else {
			v += "+dirty"
		}
	}
	return v, nil
}

// tagVersion is a release tag's version: the leading v dropped, a
// pre-release suffix after ~.
func tagVersion(tag string) (string, error) {
	m := tagRE.FindStringSubmatch(tag)
	if m == nil {
		return "", fmt.Errorf("tag %q is not a version (want v1.2.3 or v1.2.3-rc1)", tag)
	}
	if m[2] != "" {
		return m[1] + "~" + m[2], nil
	}
	return m[1], nil
}
