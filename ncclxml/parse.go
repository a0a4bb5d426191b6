package ncclxml

import (
	"errors"
	"fmt"
	"strings"
)

// NCCL's fixed limits (src/graph/xml.h, src/graph/topo.h).
const (
	// MaxStrLen is MAX_STR_LEN. A name or value must leave room for the
	// byte that ends it, so an element name or a value holds at most
	// MaxStrLen-2 bytes, an attribute name MaxStrLen-1.
	MaxStrLen = 255
	// MaxAttrs is MAX_ATTR_COUNT: NCCL ignores further attributes.
	MaxAttrs = 16
	// MaxSubs is MAX_SUBS, the most children of one element.
	MaxSubs = 640
	// MaxNodes is NCCL_TOPO_XML_MAX_NODES. NCCL checks the count before
	// it reads each tag, so a file holds at most MaxNodes-1 elements, and
	// NCCL still needs room for the gpu, nic and net elements it adds.
	MaxNodes = 256
)

// Errors wrapped by Parse, Check and Write; test with errors.Is.
var (
	// ErrSyntax: NCCL's reader would fail on the file (NCCL init fails).
	ErrSyntax = errors.New("NCCL XML syntax error")
	// ErrLimit: the tree is over one of NCCL's fixed limits.
	ErrLimit = errors.New("over an NCCL XML limit")
	// ErrInvalid: NCCL reads the file but fails, ignores or misreads a
	// part of it.
	ErrInvalid = errors.New("invalid NCCL topology")
)

// Error is one problem, at a line of the input (0 when the tree did not
// come from Parse) and in an element ("" when none).
type Error struct {
	Line    int
	Element string
	Msg     string
	Err     error // ErrSyntax, ErrLimit or ErrInvalid
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Element != "" {
		fmt.Fprintf(&b, "<%s>: ", e.Element)
	}
	fmt.Fprintf(&b, "%v: %s", e.Err, e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Attr is one attribute, in file order.
type Attr struct {
	Name, Value string
}

// Element is one element of the tree.
type Element struct {
	Name     string
	Attrs    []Attr
	Children []*Element
	// Comment is the text of the <!-- --> comments just before the
	// element, one line per non-blank comment line, trimmed; Write prints
	// each line as its own comment. Comments before a closing tag or after
	// the root end nowhere: Parse drops them.
	Comment string
	// Line is where the element starts in the parsed input (0 when built
	// in code).
	Line int
}

// Value returns the value of the first attribute called name.
func (e *Element) Value(name string) (string, bool) {
	for _, a := range e.Attrs {
		if a.Name == name {
			return a.Value, true
		}
	}
	return "", false
}

// Count returns the number of elements in the tree rooted at e.
func (e *Element) Count() int {
	n := 1
	for _, c := range e.Children {
		n += c.Count()
	}
	return n
}

// Parse reads one document the way NCCL's loader does and returns its
// root element. Beyond NCCL, it refuses an empty element name, a
// document without a root or with a second top-level element, and a
// closing tag at the top level (NCCL would skip or misread them).
func Parse(data []byte) (*Element, error) {
	s := &scanner{data: data, line: 1}
	var (
		root    *Element
		stack   []*Element
		comment []string
	)
	for {
		t, err := s.node()
		if err != nil {
			return nil, err
		}
		switch t.kind {
		case tokEOF:
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				return nil, s.errAt(top.Line, top.Name, ErrSyntax, "unterminated element (no </%s>)", top.Name)
			}
			if root == nil {
				return nil, s.errAt(s.line, "", ErrSyntax, "no element in the document")
			}
			return root, nil
		case tokComment:
			comment = append(comment, commentLines(t.text)...)
		case tokClose:
			comment = nil
			if len(stack) == 0 {
				return nil, s.errAt(t.line, t.name, ErrSyntax, "closing tag </%s> with no open element", t.name)
			}
			top := stack[len(stack)-1]
			if top.Name != t.name {
				return nil, s.errAt(t.line, top.Name, ErrSyntax, "mismatched closing tag </%s> for <%s> of line %d", t.name, top.Name, top.Line)
			}
			stack = stack[:len(stack)-1]
		case tokOpen, tokSingle:
			el := &Element{Name: t.name, Attrs: t.attrs, Line: t.line, Comment: strings.Join(comment, "\n")}
			comment = nil
			if len(stack) == 0 {
				if root != nil {
					return nil, s.errAt(t.line, t.name, ErrSyntax, "second top-level element (the root <%s> ended on an earlier line)", root.Name)
				}
				root = el
			} else {
				p := stack[len(stack)-1]
				p.Children = append(p.Children, el)
			}
			if t.kind == tokOpen {
				stack = append(stack, el)
			}
		}
	}
}

// commentLines splits a comment into trimmed, non-blank lines.
func commentLines(text string) []string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokOpen
	tokSingle
	tokClose
	tokComment
)

type token struct {
	kind  tokKind
	name  string
	attrs []Attr
	text  string // comment text
	line  int    // line of the '<'
}

// scanner follows xmlGetNode, xmlGetToken, xmlGetValue and
// xmlSkipComment of NCCL's xml.cc, byte by byte.
type scanner struct {
	data  []byte
	pos   int
	line  int // line of the next byte
	cline int // line of the last byte read
}

var errEOF = errors.New("EOF")

func (s *scanner) get() (byte, error) {
	if s.pos >= len(s.data) {
		return 0, errEOF
	}
	c := s.data[s.pos]
	s.pos++
	s.cline = s.line
	if c == '\n' {
		s.line++
	}
	return c, nil
}

func (s *scanner) errAt(line int, elem string, kind error, format string, args ...any) error {
	return &Error{Line: line, Element: elem, Msg: fmt.Sprintf(format, args...), Err: kind}
}

// fail reports a problem at the last byte read.
func (s *scanner) fail(elem, format string, args ...any) error {
	return s.errAt(s.cline, elem, ErrSyntax, format, args...)
}

func (s *scanner) eof(elem string) error {
	return s.errAt(s.line, elem, ErrSyntax, "unexpected end of file")
}

func quoteByte(c byte) string {
	switch c {
	case '\n':
		return "newline"
	case '\r':
		return "carriage return"
	case '\t':
		return "TAB"
	}
	return fmt.Sprintf("%q", rune(c))
}

// name reads a name as xmlGetToken does without a value: up to a space,
// '>', '/', CR or LF, which it returns. An '=' is an error.
func (s *scanner) name(elem string) (string, byte, error) {
	var buf []byte
	for {
		c, err := s.get()
		if err != nil {
			return "", 0, s.eof(elem)
		}
		if c == '=' {
			return "", 0, s.fail(elem, "unexpected '=' after name %q", buf)
		}
		if len(buf) == MaxStrLen-1 {
			return "", 0, s.fail(elem, "name %.20q... too long (NCCL's limit is %d bytes)", buf, MaxStrLen-2)
		}
		if isNameEnd(c) {
			return string(buf), c, nil
		}
		buf = append(buf, c)
	}
}

func isNameEnd(c byte) bool { return c == ' ' || c == '>' || c == '/' || c == '\n' || c == '\r' }

// attr reads one attribute token: key="value" or a bare key.
func (s *scanner) attr(elem string) (a Attr, hasValue bool, last byte, err error) {
	var buf []byte
	for {
		c, err := s.get()
		if err != nil {
			return a, false, 0, s.eof(elem)
		}
		if c == '=' {
			a.Name = string(buf)
			a.Value, last, err = s.value(elem, a.Name)
			return a, true, last, err
		}
		if len(buf) == MaxStrLen-1 {
			return a, false, 0, s.fail(elem, "attribute name %.20q... too long (NCCL's limit is %d bytes)", buf, MaxStrLen-1)
		}
		if isNameEnd(c) {
			a.Name = string(buf)
			return a, false, c, nil
		}
		buf = append(buf, c)
	}
}

func (s *scanner) value(elem, key string) (string, byte, error) {
	q, err := s.get()
	if err != nil {
		return "", 0, s.eof(elem)
	}
	if q != '"' && q != '\'' {
		return "", 0, s.fail(elem, "value of %s is not quoted (got %s)", key, quoteByte(q))
	}
	var buf []byte
	for {
		c, err := s.get()
		if err != nil {
			return "", 0, s.errAt(s.line, elem, ErrSyntax, "unterminated value of %s", key)
		}
		if len(buf) == MaxStrLen-1 {
			return "", 0, s.fail(elem, "value of %s too long (NCCL's limit is %d bytes)", key, MaxStrLen-2)
		}
		if c == q {
			break
		}
		buf = append(buf, c)
	}
	last, err := s.get()
	if err != nil {
		return "", 0, s.eof(elem)
	}
	return string(buf), last, nil
}

// node reads the next tag or comment.
func (s *scanner) node() (token, error) {
	c := byte(' ')
	for c == ' ' || c == '\n' || c == '\r' {
		var err error
		if c, err = s.get(); err != nil {
			return token{kind: tokEOF}, nil
		}
	}
	line := s.cline
	if c != '<' {
		return token{}, s.fail("", "expected '<', got %s (NCCL skips only spaces, CR and LF between tags)", quoteByte(c))
	}
	name, c, err := s.name("")
	if err != nil {
		return token{}, err
	}
	if rest, ok := strings.CutPrefix(name, "!--"); ok {
		text, err := s.comment(rest, c, line)
		return token{kind: tokComment, text: text, line: line}, err
	}
	if name == "" && c == '/' {
		name, c, err = s.name("")
		if err != nil {
			return token{}, err
		}
		if c != '>' {
			return token{}, s.fail(name, "expected '>' to end </%s>, got %s", name, quoteByte(c))
		}
		return token{kind: tokClose, name: name, line: line}, nil
	}
	if name == "" {
		return token{}, s.fail("", "empty element name after '<'")
	}
	t := token{kind: tokOpen, name: name, line: line}
	for c == ' ' {
		var (
			a        Attr
			hasValue bool
		)
		if a, hasValue, c, err = s.attr(name); err != nil {
			return token{}, err
		}
		// A stray space (two spaces, or one before "/>") gives NCCL an
		// empty, valueless attribute; it means nothing, so drop it.
		if a.Name != "" || hasValue {
			t.attrs = append(t.attrs, a)
		}
	}
	if c == '/' {
		t.kind = tokSingle
		if _, c, err = s.name(name); err != nil {
			return token{}, err
		}
	}
	if c != '>' {
		return token{}, s.fail(name, "expected '>', got %s (attributes must be separated by one space on one line)", quoteByte(c))
	}
	return t, nil
}

// comment skips to "-->" as xmlSkipComment does; rest and next are what
// the name token already consumed after "<!--".
func (s *scanner) comment(rest string, next byte, line int) (string, error) {
	buf := append([]byte(rest), next)
	for !strings.HasSuffix(string(buf[max(0, len(buf)-3):]), "-->") {
		c, err := s.get()
		if err != nil {
			return "", s.errAt(line, "", ErrSyntax, "unterminated comment")
		}
		buf = append(buf, c)
	}
	return string(buf[:len(buf)-3]), nil
}
