package ncclxml

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Write prints the tree rooted at e as NCCL_TOPO_DUMP_FILE does: no
// prolog, two spaces of indent per level, attributes in order as
// name="value", "/>" for an element without children. Each line of an
// element's Comment is printed as "<!-- line -->" just above it. It fails,
// writing nothing, on a name or value that NCCL could not read back.
func (e *Element) Write(w io.Writer) error {
	if err := e.validate(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	e.write(bw, 0)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("ncclxml: write: %w", err)
	}
	return nil
}

// String returns the text Write prints, or the error text.
func (e *Element) String() string {
	var b strings.Builder
	if err := e.Write(&b); err != nil {
		return err.Error()
	}
	return b.String()
}

func (e *Element) write(w *bufio.Writer, indent int) {
	pad := strings.Repeat(" ", indent)
	if e.Comment != "" {
		for l := range strings.SplitSeq(e.Comment, "\n") {
			fmt.Fprintf(w, "%s<!-- %s -->\n", pad, l)
		}
	}
	fmt.Fprintf(w, "%s<%s", pad, e.Name)
	for _, a := range e.Attrs {
		q := `"`
		if strings.Contains(a.Value, `"`) {
			q = `'`
		}
		fmt.Fprintf(w, " %s=%s%s%s", a.Name, q, a.Value, q)
	}
	if len(e.Children) == 0 {
		w.WriteString("/>\n")
		return
	}
	w.WriteString(">\n")
	for _, c := range e.Children {
		c.write(w, indent+2)
	}
	fmt.Fprintf(w, "%s</%s>\n", pad, e.Name)
}

// nameEnds are the bytes that end a name in NCCL's reader, and '='.
const nameEnds = " >/\n\r="

// validate refuses what NCCL's reader could not read back.
func (e *Element) validate() error {
	bad := func(format string, args ...any) error {
		return &Error{Line: e.Line, Element: e.Name, Msg: fmt.Sprintf(format, args...), Err: ErrSyntax}
	}
	switch {
	case e.Name == "" || strings.HasPrefix(e.Name, "!--"):
		return bad("element name %q cannot be written", e.Name)
	case strings.ContainsAny(e.Name, nameEnds):
		return bad("element name %q holds a byte that ends a name in NCCL's reader", e.Name)
	case len(e.Name) > MaxStrLen-2:
		return bad("element name longer than %d bytes", MaxStrLen-2)
	case strings.Contains(e.Comment, "-->"):
		return bad("comment holds \"-->\"")
	}
	for _, a := range e.Attrs {
		switch {
		case strings.ContainsAny(a.Name, nameEnds):
			return bad("attribute name %q cannot be written", a.Name)
		case len(a.Name) > MaxStrLen-1:
			return bad("attribute name %.20q... longer than %d bytes", a.Name, MaxStrLen-1)
		case strings.Contains(a.Value, `"`) && strings.Contains(a.Value, "'"):
			return bad("value of %s holds both quote characters", a.Name)
		case len(a.Value) > MaxStrLen-2:
			return bad("value of %s longer than %d bytes", a.Name, MaxStrLen-2)
		}
	}
	for _, c := range e.Children {
		if err := c.validate(); err != nil {
			return err
		}
	}
	return nil
}
