package pkgbuild

import (
	"debug/elf"
	"fmt"
	"strconv"
	"strings"
)

// glibcLibraries are the shared objects glibc itself provides on x86-64
// (the libc6 package on Debian, glibc on Fedora and RHEL): a binary that
// needs only these needs only glibc.
var glibcLibraries = map[string]bool{
	"libc.so.6": true, "libm.so.6": true, "libpthread.so.0": true, "libdl.so.2": true,
	"librt.so.1": true, "libresolv.so.2": true, "libutil.so.1": true, "libanl.so.1": true,
	"ld-linux-x86-64.so.2": true,
}

// glibcMarkers are version names glibc defines that are not GLIBC_x.y
// but stand for the release that introduced them. GLIBC_ABI_DT_RELR
// (binaries linked with -z pack-relative-relocs) came with glibc 2.36
// (its NEWS file, "Version 2.36").
var glibcMarkers = map[string]string{"GLIBC_ABI_DT_RELR": "2.36"}

// GLIBC returns the lowest glibc release that can run every ELF file in
// paths: the highest GLIBC_x.y version they require, read from their
// SHT_GNU_verneed sections (what `objdump -p` prints under "Version
// References"; the dynamic linker refuses to start a binary whose
// versions its glibc lacks). It is "" when none needs glibc (a static
// build). A file that needs a shared library glibc does not provide, or
// GLIBC_PRIVATE (which ties it to one glibc build), is an error: the
// packages would not declare what it needs.
func GLIBC(paths ...string) (string, error) {
	best := ""
	for _, p := range paths {
		v, err := fileGLIBC(p)
		if err != nil {
			return "", err
		}
		if v != "" && (best == "" || compareDotted(v, best) > 0) {
			best = v
		}
	}
	return best, nil
}

func fileGLIBC(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	// glibcLibraries and the packages' architecture are x86-64's.
	if f.Machine != elf.EM_X86_64 {
		return "", fmt.Errorf("%s: ELF machine %v: the packages are built for amd64 (x86-64) only", path, f.Machine)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", fmt.Errorf("%s: DT_NEEDED: %w", path, err)
	}
	for _, lib := range libs {
		if !glibcLibraries[lib] {
			return "", fmt.Errorf("%s needs %s, which glibc does not provide: the packages do not depend on it", path, lib)
		}
	}
	if f.Section(".gnu.version_r") == nil {
		if len(libs) > 0 {
			return "", fmt.Errorf("%s needs %s but has no symbol version references (.gnu.version_r): which glibc it needs cannot be told", path, strings.Join(libs, ", "))
		}
		return "", nil // static
	}
	needs, err := f.DynamicVersionNeeds()
	if err != nil {
		return "", fmt.Errorf("%s: version references: %w", path, err)
	}
	best := ""
	for _, n := range needs {
		for _, d := range n.Needs {
			v, err := glibcRelease(d.Dep)
			if err != nil {
				return "", fmt.Errorf("%s: %s from %s: %w", path, d.Dep, n.Name, err)
			}
			if v != "" && (best == "" || compareDotted(v, best) > 0) {
				best = v
			}
		}
	}
	return best, nil
}

// glibcRelease is the glibc release a version name stands for: "2.34"
// for GLIBC_2.34, "" for a name that is not glibc's.
func glibcRelease(name string) (string, error) {
	if v, ok := glibcMarkers[name]; ok {
		return v, nil
	}
	rest, ok := strings.CutPrefix(name, "GLIBC_")
	if !ok {
		return "", nil
	}
	if rest == "PRIVATE" {
		return "", fmt.Errorf("GLIBC_PRIVATE ties the binary to one glibc build")
	}
	for _, part := range strings.Split(rest, ".") {
		if _, err := strconv.Atoi(part); err != nil {
			return "", fmt.Errorf("not a glibc version")
		}
	}
	return rest, nil
}

// compareDotted compares dotted decimal versions part by part, as
// numbers: 2.3.2 < 2.32 < 2.34.
func compareDotted(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
