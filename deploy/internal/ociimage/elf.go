package ociimage

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Loader finds shared objects the way glibc's dynamic loader does for a
// program started without LD_LIBRARY_PATH: the needing object's
// DT_RPATH (when it has no DT_RUNPATH), its DT_RUNPATH, the directories
// of ld.so.conf (what ldconfig puts in ld.so.cache), then the built-in
// default directories. A candidate whose ELF class or machine differs
// from the program's is passed over, as ld.so passes it over.
//
// Root is the file system the program's libraries come from ("/" for
// this host); every path Loader returns is absolute within it.
type Loader struct {
	Root string
	// Dirs, when set, replaces ld.so.conf and the defaults (tests).
	Dirs []string
}

// Libraries returns the shared objects the dynamic loader maps to start
// the ELF program at prog (a host path): its interpreter (PT_INTERP)
// first, then every DT_NEEDED object, transitively, in breadth-first
// load order, each once. A static program has none. A needed object
// that is found nowhere is an error naming it and the object that needs
// it.
func (l Loader) Libraries(prog string) ([]string, error) {
	f, err := elf.Open(prog)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", prog, err)
	}
	defer f.Close()
	class, machine := f.Class, f.Machine
	interp, err := interpreter(f)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", prog, err)
	}
	if interp == "" {
		return nil, nil // static
	}
	dirs := l.Dirs
	if dirs == nil {
		if dirs, err = l.systemDirs(class); err != nil {
			return nil, err
		}
	}

	out := []string{interp}
	seen := map[string]bool{} // by DT_NEEDED name, as ld.so dedups by soname
	type pending struct {
		name           string // DT_NEEDED entry
		by             string // path of the object that needs it (in Root)
		rpath, runpath []string
	}
	rp, rn, needed, err := dynamic(f)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", prog, err)
	}
	// The program's $ORIGIN is a host directory, not one in Root, where
	// find looks: refused rather than searched in the wrong tree.
	if l.Root != "" && l.Root != "/" && strings.Contains(strings.Join(append(rp, rn...), ":"), "ORIGIN") {
		return nil, fmt.Errorf("ociimage: %s: a run path with $ORIGIN is not supported with a Root (%s)", prog, l.Root)
	}
	origin := filepath.Dir(prog)
	var queue []pending
	for _, n := range needed {
		queue = append(queue, pending{n, prog, expandOrigin(rp, origin), expandOrigin(rn, origin)})
	}
	// The interpreter is also the object that satisfies its soname
	// (ld-linux-x86-64.so.2 is in libc's DT_NEEDED).
	seen[path.Base(interp)] = true
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p.name] {
			continue
		}
		seen[p.name] = true
		found, err := l.find(p.name, class, machine, p.rpath, p.runpath, dirs)
		if err != nil {
			return nil, fmt.Errorf("ociimage: %s, needed by %s: %w", p.name, p.by, err)
		}
		out = append(out, found)
		lf, err := elf.Open(l.host(found))
		if err != nil {
			return nil, fmt.Errorf("ociimage: %s: %w", l.host(found), err)
		}
		rp, rn, needed, err := dynamic(lf)
		lf.Close()
		if err != nil {
			return nil, fmt.Errorf("ociimage: %s: %w", l.host(found), err)
		}
		origin := path.Dir(found)
		for _, n := range needed {
			queue = append(queue, pending{n, found, expandOrigin(rp, origin), expandOrigin(rn, origin)})
		}
	}
	return out, nil
}

// host is the host path of p, a path within Root.
func (l Loader) host(p string) string {
	if l.Root == "" || l.Root == "/" {
		return p
	}
	return filepath.Join(l.Root, p)
}

// find looks name up as ld.so does; a name with a slash is a path.
func (l Loader) find(name string, class elf.Class, machine elf.Machine, rpath, runpath, dirs []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	var search []string
	if len(runpath) == 0 {
		search = append(search, rpath...)
	}
	search = append(search, runpath...)
	search = append(search, dirs...)
	for _, d := range search {
		cand := path.Join(d, name)
		f, err := elf.Open(l.host(cand))
		if err != nil {
			continue // absent, or not ELF: ld.so goes on to the next directory
		}
		ok := f.Class == class && f.Machine == machine
		f.Close()
		if ok {
			return cand, nil
		}
	}
	return "", fmt.Errorf("not found in %s", strings.Join(search, ":"))
}

// systemDirs is ld.so.cache's directories (from ld.so.conf and its
// includes), then glibc's defaults for the class.
func (l Loader) systemDirs(class elf.Class) ([]string, error) {
	var dirs []string
	seen := map[string]bool{}
	if err := l.readConf("/etc/ld.so.conf", &dirs, seen, 0); err != nil {
		return nil, err
	}
	def := []string{"/lib", "/usr/lib"}
	if class == elf.ELFCLASS64 {
		def = []string{"/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	}
	for _, d := range def {
		if !seen[d] {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// readConf reads one ld.so.conf file: directories, one or more a line
// (separated by blanks, commas or colons), "include GLOB" lines (a
// relative glob is relative to the including file's directory) and
// "hwcap" lines, which name no directory. A missing file is no error, as
// for ldconfig.
func (l Loader) readConf(name string, dirs *[]string, seen map[string]bool, depth int) error {
	if depth > 8 {
		return fmt.Errorf("ociimage: %s: includes nested deeper than 8", l.host(name))
	}
	data, err := os.ReadFile(l.host(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.FieldsFunc(line, func(r rune) bool {
			return r == ' ' || r == '\t' || r == ',' || r == ':'
		})
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "include":
			for _, g := range fields[1:] {
				if !path.IsAbs(g) {
					g = path.Join(path.Dir(name), g)
				}
				matches, err := filepath.Glob(l.host(g))
				if err != nil {
					return fmt.Errorf("ociimage: %s: include %q: %w", l.host(name), g, err)
				}
				for _, m := range matches {
					rel := m
					if l.Root != "" && l.Root != "/" {
						rel = "/" + strings.TrimPrefix(strings.TrimPrefix(m, l.Root), "/")
					}
					if err := l.readConf(rel, dirs, seen, depth+1); err != nil {
						return err
					}
				}
			}
		case "hwcap":
		default:
			for _, d := range fields {
				d = path.Clean(d)
				if path.IsAbs(d) && !seen[d] {
					seen[d] = true
					*dirs = append(*dirs, d)
				}
			}
		}
	}
	return nil
}

// interpreter is the program's PT_INTERP, "" for a static program.
func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("PT_INTERP: %w", err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// dynamic is the object's DT_RPATH, DT_RUNPATH and DT_NEEDED entries.
func dynamic(f *elf.File) (rpath, runpath, needed []string, err error) {
	if needed, err = f.DynString(elf.DT_NEEDED); err != nil {
		return nil, nil, nil, fmt.Errorf("DT_NEEDED: %w", err)
	}
	rp, err := f.DynString(elf.DT_RPATH)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("DT_RPATH: %w", err)
	}
	rn, err := f.DynString(elf.DT_RUNPATH)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("DT_RUNPATH: %w", err)
	}
	split := func(v []string) []string {
		var out []string
		for _, s := range v {
			for _, d := range strings.Split(s, ":") {
				if d != "" {
					out = append(out, d)
				}
			}
		}
		return out
	}
	return split(rp), split(rn), needed, nil
}

// expandOrigin substitutes $ORIGIN (the needing object's directory).
func expandOrigin(dirs []string, origin string) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		d = strings.ReplaceAll(d, "${ORIGIN}", origin)
		d = strings.ReplaceAll(d, "$ORIGIN", origin)
		out = append(out, path.Clean(d))
	}
	return out
}
