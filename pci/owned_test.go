package pci

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// notOwned are the functions outside pci that may keep their own PCI
// address or link speed rule, each with why. Delete an entry once its
// function asks pci.
var notOwned = map[string]string{
	// NCCL's rule, not sysfs's: NCCL's loader compares link speeds with
	// sscanf("%f GT/s") and a speed that does not parse loses, which
	// nccl mirrors for the topology XML it writes (as ncclxml mirrors
	// strtol). Differs from ParseSpeed only on text sysfs never writes.
	"nccl.xmlGTs": "NCCL's own speed comparison",
}

// addressFormat is a PCI address's layout in a format string
// ("%04x:%02x:%02x.%x", NVML's "%08X:%02X:%02X.%X", a Sscanf pattern):
// printing or scanning one outside Address.String and NVMLString.
var addressFormat = regexp.MustCompile(`%0?\d*[xX]:%0?\d*[xX]:%0?\d*[xX]\.`)

// TestPCIParsersOwned fails when a PCI address or a PCIe link speed is
// parsed (or an address printed) outside this package: nvml, discover's
// sources, topology, health and the exporter each once had their own,
// and they disagreed on the forms they took. The tell-tales, per function:
//   - an address: a base-16 strconv.ParseUint/ParseInt in a function that
//     also splits at ":" and "." (domain:bus:device.function), or an
//     address layout in a format string (addressFormat);
//   - a speed: strconv.ParseFloat in a function that names a speed (an
//     identifier or its name containing "speed" or "GTs", or a "GT/s"
//     literal), or a table of generations ("16.0" and "32.0" cases).
func TestPCIParsersOwned(t *testing.T) {
	for _, f := range []struct{ name, src string }{
		{"sysfs", `package x; import "strconv"; func p(id string) { strconv.ParseUint(strings.Split(id, ":")[0], 16, 32); strings.Cut(id, ".") }`},
		{"nvml", `package x; import "fmt"; func p(a A) string { return fmt.Sprintf("%08X:%02X:%02X.%X", a.D, a.B, a.V, a.F) }`},
		{"speed", `package x; import "strconv"; func p(speed string) float64 { v, _ := strconv.ParseFloat(speed, 64); return v }`},
		{"gen", `package x; func p(s string) int { switch s { case "16.0": return 4; case "32.0": return 5 }; return 0 }`},
	} {
		if len(tellTales(t, f.name+".go", []byte(f.src))) == 0 {
			t.Errorf("the tell-tales miss a %s parser:\n%s", f.name, f.src)
		}
	}
	srcfiles.Product(t, "..", func(p, text string) {
		b := []byte(text)
		for _, fn := range tellTales(t, p, b) {
			t.Errorf("%s: %s parses or prints a PCI address or link speed itself: use pci.ParseAddress, Canonical, Address.String, NVMLString, ParseSpeed or Gen", p, fn)
		}
	}, "pci")
}

// tellTales returns the functions of one file that look like a PCI
// address or link speed parser, less notOwned's.
func tellTales(t *testing.T, path string, src []byte) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var found []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := f.Name.Name + "." + funcName(fd)
		if _, ok := notOwned[name]; !ok && looksLikeParser(fd) {
			found = append(found, name)
		}
	}
	return found
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// looksLikeParser applies TestPCIParsersOwned's tell-tales to one function.
func looksLikeParser(fd *ast.FuncDecl) bool {
	var hex16, parseFloat, colon, dot, gtsLit, gen16, gen32, format bool
	speedName := nameSaysSpeed(fd.Name.Name)
	ast.Inspect(fd, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			switch callName(n) {
			case "strconv.ParseUint", "strconv.ParseInt":
				if len(n.Args) > 1 {
					if l, ok := n.Args[1].(*ast.BasicLit); ok && l.Value == "16" {
						hex16 = true
					}
				}
			case "strconv.ParseFloat":
				parseFloat = true
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING && n.Kind != token.CHAR {
				return true
			}
			v, err := strconv.Unquote(n.Value)
			if err != nil {
				return true
			}
			colon = colon || v == ":"
			dot = dot || v == "."
			gtsLit = gtsLit || strings.Contains(v, "GT/s")
			gen16 = gen16 || v == "16.0"
			gen32 = gen32 || v == "32.0"
			format = format || addressFormat.MatchString(v)
		case *ast.Ident:
			speedName = speedName || nameSaysSpeed(n.Name)
		}
		return true
	})
	return format || hex16 && colon && dot || parseFloat && (speedName || gtsLit) || gen16 && gen32
}

func nameSaysSpeed(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "speed") || strings.Contains(s, "gts")
}

func callName(c *ast.CallExpr) string {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if id, ok := sel.X.(*ast.Ident); ok {
		return id.Name + "." + sel.Sel.Name
	}
	return ""
}
