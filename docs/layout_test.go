package docs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

// modulePath is the product module's path; the deploy module's packages
// sit below it.
const modulePath = "github.com/gpuaffinity/gpuaffinity"

// pkgInfo is one package as `go list` has it, its path relative to the
// repository and its imports of the repository's own packages.
type pkgInfo struct {
	imports     []string // non-test
	testImports []string // _test.go files, both kinds
}

// listPackages runs `go list` in every module of the workspace and
// returns the repository's packages by relative path.
func listPackages(t *testing.T) map[string]pkgInfo {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("go is not on PATH: %v", err)
		}
		t.Skipf("go is not on PATH: %v", err)
	}
	mods, err := exec.Command(gobin, "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	pkgs := map[string]pkgInfo{}
	rel := func(p string) (string, bool) {
		if p == modulePath {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, modulePath+"/")
		return r, ok
	}
	own := func(list string) []string {
		var out []string
		for _, p := range strings.Fields(list) {
			if r, ok := rel(p); ok {
				out = append(out, r)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for _, dir := range strings.Fields(string(mods)) {
		cmd := exec.Command(gobin, "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list ./... in %s: %v\n%s", dir, err, stderr.Bytes())
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Split(sc.Text(), "\t")
			if len(f) != 3 {
				t.Fatalf("go list in %s: odd line %q", dir, sc.Text())
			}
			r, ok := rel(f[0])
			if !ok {
				continue
			}
			pkgs[r] = pkgInfo{imports: own(f[1]), testImports: own(f[2])}
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

// section returns the lines of a markdown file from the heading that
// starts with heading up to the next heading of the same or a higher
// level.
func section(t *testing.T, file, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Index(heading, " ")
	var out []string
	in := false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "#") {
			l := strings.IndexFunc(line, func(r rune) bool { return r != '#' })
			if in && l <= level {
				break
			}
			if line == heading {
				in = true
				continue
			}
		}
		if in {
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("%s: no %q section", file, heading)
	}
	return out
}

// tableRows returns the cells of a markdown table's body rows.
func tableRows(lines []string) [][]string {
	var rows [][]string
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") || strings.HasPrefix(l, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) > 0 {
		rows = rows[1:] // the header
	}
	return rows
}

var backticked = regexp.MustCompile("`([^`]+)`")

// expand turns "internal/{rootfs,sysattr}" into its packages; a note
// in parentheses after a name ("pci (link speeds only)") is dropped.
func expand(item string) []string {
	if i := strings.Index(item, " ("); i >= 0 {
		item = item[:i]
	}
	open, close := strings.Index(item, "{"), strings.Index(item, "}")
	if open < 0 || close < open {
		return []string{item}
	}
	var out []string
	for _, p := range strings.Split(item[open+1:close], ",") {
		out = append(out, item[:open]+strings.TrimSpace(p)+item[close+1:])
	}
	return out
}

// listedDeps parses a package map row's dependency cell: the
// repository's packages come before the first ";", comma-separated
// (braces group paths with a common prefix), external libraries after.
func listedDeps(cell string) []string {
	own, _, _ := strings.Cut(cell, ";")
	own = strings.TrimSpace(own)
	if own == "—" || own == "" {
		return nil
	}
	var out []string
	depth, start := 0, 0
	for i, r := range own {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, expand(strings.TrimSpace(own[start:i]))...)
				start = i + 1
			}
		}
	}
	return append(out, expand(strings.TrimSpace(own[start:]))...)
}

// TestArchitecturePackageMap holds docs/architecture.md's package map to
// the code: every package has one row, every row is a package, and its
// dependency cell names every import edge into the repository's own
// packages and none that does not exist (a test-only package's row may
// name what its tests import).
func TestArchitecturePackageMap(t *testing.T) {
	pkgs := listPackages(t)
	rows := tableRows(section(t, "architecture.md", "## Package map"))
	seen := map[string]bool{}
	for _, row := range rows {
		if len(row) != 3 {
			t.Errorf("architecture.md package map: row %q has %d cells, want 3", strings.Join(row, " | "), len(row))
			continue
		}
		m := backticked.FindStringSubmatch(row[0])
		if m == nil {
			t.Errorf("architecture.md package map: row %q names no package", row[0])
			continue
		}
		name := m[1]
		if seen[name] {
			t.Errorf("architecture.md package map: %s has two rows", name)
		}
		seen[name] = true
		p, ok := pkgs[name]
		if !ok {
			t.Errorf("architecture.md package map: %s is not a package", name)
			continue
		}
		listed := listedDeps(row[2])
		for _, imp := range p.imports {
			if !slices.Contains(listed, imp) {
				t.Errorf("architecture.md package map: %s imports %s, its row does not say so", name, imp)
			}
		}
		for _, d := range listed {
			if !slices.Contains(p.imports, d) && !slices.Contains(p.testImports, d) {
				t.Errorf("architecture.md package map: %s's row names %s, which it does not import", name, d)
			}
		}
	}
	for name := range pkgs {
		if !seen[name] && name != "." {
			t.Errorf("architecture.md package map: no row for %s", name)
		}
	}
}

// TestREADMELayout holds the README's Layout table to the packages:
// every package is named in it (a helper package may be named in its
// parent's row), and every name in its first column is a package.
func TestREADMELayout(t *testing.T) {
	pkgs := listPackages(t)
	rows := tableRows(section(t, filepath.Join("..", "README.md"), "## Layout"))
	seen := map[string]bool{}
	for _, row := range rows {
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			if _, ok := pkgs[m[1]]; !ok {
				t.Errorf("README Layout: %s is not a package", m[1])
			}
		}
		for _, m := range backticked.FindAllStringSubmatch(strings.Join(row, " | "), -1) {
			seen[m[1]] = true
		}
	}
	for name := range pkgs {
		if !seen[name] && name != "." {
			t.Errorf("README Layout: %s is not named", name)
		}
	}
}
