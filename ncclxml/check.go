package ncclxml

import (
	"errors"
	"fmt"
	"strings"
)

// children lists the elements NCCL loads under each element
// (ncclTopoXmlLoad* in xml.cc); it skips anything else.
var children = map[string][]string{
	"system":  {"cpu"},
	"cpu":     {"pci", "nic"},
	"pci":     {"pci", "gpu", "nic", "pcilink"},
	"gpu":     {"nvlink", "c2c"},
	"nic":     {"net"},
	"nvlink":  nil,
	"c2c":     nil,
	"pcilink": nil,
	"net":     nil,
}

// Check parses data and checks the tree with CheckElement.
func Check(data []byte) error { return CheckFor(data, NCCL) }

// CheckFor parses data and checks the tree with CheckElementFor.
func CheckFor(data []byte, d Dialect) error {
	root, err := Parse(data)
	if err != nil {
		return err
	}
	return CheckElementFor(root, d)
}

// CheckElement checks a tree against what NCCL needs to use it fully:
//
//   - the root is <system version="1">;
//   - only the nesting NCCL loads (system→cpu; cpu→pci|nic;
//     pci→pci|gpu|nic|pcilink; gpu→nvlink|c2c; nic→net), which it
//     otherwise skips with no more than an INFO line;
//   - at most MaxAttrs attributes per element, MaxSubs children, and
//     fewer than MaxNodes elements in all;
//   - every cpu has a numaid; an affinity, when present, is in the
//     kernel's cpumap form (comma-separated hex words: NCCL reads a range
//     list such as 0-15 as an empty mask and ignores it silently); an
//     x86_64 cpu has vendor, familyid and modelid;
//   - every pci has a lower-case dddd:bb:dd.f busid, unique in the file,
//     and class, link_speed and link_width.
//
// It returns every problem found, joined; each wraps ErrInvalid or
// ErrLimit.
func CheckElement(root *Element) error { return CheckElementFor(root, NCCL) }

// CheckElementFor checks a tree as CheckElement does, against the loader
// of dialect d: for RCCL the root is <system version="2">, a gpu holds
// xgmi (pci→pci|gpu|nic; gpu→xgmi), and the limits are RCCLMaxSubs and
// RCCLMaxNodes.
func CheckElementFor(root *Element, d Dialect) error {
	subs, nodes := d.limits()
	c := &checker{busids: map[string]int{}, lib: d.String(), children: d.children(), maxSubs: subs}
	if root == nil {
		return &Error{Msg: "no root element", Err: ErrInvalid}
	}
	want := d.Version()
	if root.Name != "system" {
		c.add(root, ErrInvalid, "the root element must be <system>, not <%s>", root.Name)
	} else if v, ok := root.Value("version"); !ok {
		c.add(root, ErrInvalid, "no version attribute (%s needs version=\"%d\")", c.lib, want)
	} else if n, _ := strtol(v); n != int64(want) {
		c.add(root, ErrInvalid, "version %q: %s reads only version %d", v, c.lib, want)
	}
	c.walk(root)
	if n := root.Count(); n >= nodes {
		c.add(root, ErrLimit, "%d elements: %s's loader stops at %d (NCCL_TOPO_XML_MAX_NODES, counted before each tag)", n, c.lib, nodes)
	}
	return errors.Join(c.errs...)
}

type checker struct {
	errs     []error
	busids   map[string]int // busid → line of its first pci
	lib      string         // "NCCL", "RCCL": the loader, in messages
	children map[string][]string
	maxSubs  int
}

func (c *checker) add(e *Element, kind error, format string, args ...any) {
	c.errs = append(c.errs, &Error{Line: e.Line, Element: e.Name, Msg: fmt.Sprintf(format, args...), Err: kind})
}

func (c *checker) walk(e *Element) {
	if len(e.Attrs) > MaxAttrs {
		c.add(e, ErrLimit, "%d attributes: %s ignores all after the first %d", len(e.Attrs), c.lib, MaxAttrs)
	}
	if len(e.Children) > c.maxSubs {
		c.add(e, ErrLimit, "%d children: %s's limit is %d", len(e.Children), c.lib, c.maxSubs)
	}
	switch e.Name {
	case "cpu":
		c.cpu(e)
	case "pci":
		c.pci(e)
	}
	allowed, known := c.children[e.Name]
	for _, ch := range e.Children {
		if !known || !contains(allowed, ch.Name) {
			c.add(ch, ErrInvalid, "%s does not load <%s> inside <%s> and skips it", c.lib, ch.Name, e.Name)
			continue
		}
		c.walk(ch)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *checker) cpu(e *Element) {
	if v, ok := e.Value("numaid"); !ok {
		c.add(e, ErrInvalid, "no numaid attribute")
	} else if _, ok := strtol(v); !ok {
		c.add(e, ErrInvalid, "numaid %q is not a number", v)
	}
	if v, ok := e.Value("affinity"); ok && !IsCPUMap(v) {
		c.add(e, ErrInvalid, "affinity %q is not in cpumap form (hex words such as 0000ffff,ffffffff); NCCL ignores it silently", v)
	}
	if arch, _ := e.Value("arch"); strings.HasPrefix(arch, "x86_64") {
		for _, a := range []string{"vendor", "familyid", "modelid"} {
			if _, ok := e.Value(a); !ok {
				c.add(e, ErrInvalid, "x86_64 cpu without %s", a)
			}
		}
	}
}

func (c *checker) pci(e *Element) {
	busid, ok := e.Value("busid")
	switch {
	case !ok:
		c.add(e, ErrInvalid, "no busid attribute")
	case !IsBusID(busid):
		c.add(e, ErrInvalid, "busid %q is not a lower-case dddd:bb:dd.f address (NCCL matches bus ids as exact strings)", busid)
	default:
		if line, dup := c.busids[busid]; dup {
			c.add(e, ErrInvalid, "busid %s appears twice (first on line %d); NCCL uses only the first", busid, line)
		} else {
			c.busids[busid] = e.Line
		}
	}
	for _, a := range []string{"class", "link_speed", "link_width"} {
		if _, ok := e.Value(a); !ok {
			c.add(e, ErrInvalid, "pci %s without %s", busid, a)
		}
	}
}

// IsBusID reports whether s is a PCI address as NCCL prints one:
// lower-case hex, "dddd:bb:dd.f".
func IsBusID(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i := range len(s) {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return s[11] <= '7'
}

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// IsCPUMap reports whether s is in the kernel's cpumap form: hex words of
// at most 8 digits separated by commas.
func IsCPUMap(s string) bool {
	if s == "" {
		return false
	}
	for w := range strings.SplitSeq(s, ",") {
		if w == "" || len(w) > 8 {
			return false
		}
		for i := range len(w) {
			if !isLowerHex(w[i]) && !(w[i] >= 'A' && w[i] <= 'F') {
				return false
			}
		}
	}
	return true
}

// strtol reads an integer as C's strtol(s, NULL, 0) does: leading
// spaces, a sign, 0x for hex, 0 for octal, up to the first other byte.
// ok is false when no digit was read.
func strtol(s string) (int64, bool) {
	s = strings.TrimLeft(s, " \t\n\r\f\v")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	base := int64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && hexVal(s[2]) >= 0:
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base = 8
	}
	var n int64
	digits := 0
	for i := range len(s) {
		d := hexVal(s[i])
		if d < 0 || int64(d) >= base {
			break
		}
		if n < 1<<40 {
			n = n*base + int64(d)
		}
		digits++
	}
	if neg {
		n = -n
	}
	return n, digits > 0
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
