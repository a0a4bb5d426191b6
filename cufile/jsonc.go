package cufile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file is a small tolerant JSON reader and writer for cufile.json.
//
// Why not encoding/json: NVIDIA ships /etc/cufile.json with // comments
// (and cuFile's own parser takes /* */ ones), which encoding/json refuses,
// and a merge must give back every setting it does not own as it was
// written (1e3 stays 1e3, key order and duplicate keys stay), which
// decoding into Go values loses; json.RawMessage keeps a value's bytes but
// still cannot read past a comment. Why not a library: a JSONC reader that
// keeps formatting (github.com/tailscale/hujson) is neither in go.mod nor
// in the module cache, and the reader needed is about 250 lines.
//
// The reader takes JSON plus // and /* */ comments, trailing commas and a
// leading UTF-8 byte order mark; the document must be one object. A scalar
// (string, number, true, false, null) and a key keep their bytes exactly;
// each is checked with json.Valid, so what the writer prints parses with
// encoding/json. Nesting is bounded (maxDepth) and so is the input
// (MaxFileSize), so hostile input is an error, never a stack overflow.

// ErrSyntax is wrapped by the error for a file that is not JSON (with
// comments); the message gives the line and column.
var ErrSyntax = errors.New("not JSON")

// ErrDuplicateKey is wrapped by the error for a file that writes an
// object gpuaffinity writes into twice in one parent (two "properties",
// two "fs"); the message names the key and both lines. JSON readers
// disagree on which copy counts (RapidJSON's FindMember takes the first,
// nlohmann/json and jsoncpp keep the last, whole) and cuFile does not
// document its rule, so a merge into either copy could leave the other
// one's stale values live: it is refused (docs/cufile.md).
var ErrDuplicateKey = errors.New("duplicate key")

// maxDepth bounds object and array nesting: cufile.json nests four deep
// (fs.lustre.mount_table["/mnt"].rdma_dev_addr_list).
const maxDepth = 64

// MaxFileSize bounds a cufile.json read for a merge (NVIDIA's default is
// 3 KB).
const MaxFileSize = 1 << 20

type kind uint8

const (
	kindScalar kind = iota
	kindObject
	kindArray
)

// value is one JSON value. A scalar keeps its raw bytes; an object keeps
// its members in file order, duplicates included.
type value struct {
	kind    kind
	raw     []byte   // kindScalar: the token as written
	members []member // kindObject
	elems   []*value // kindArray
}

type member struct {
	rawKey    []byte // the key's string token as written, quotes included
	key       string // decoded
	val       *value
	line, col int // where the key starts in the file, from 1; 0 for a key the merge added
}

// parse reads src, named name in errors, as one JSON object with
// comments.
func parse(name string, src []byte) (*value, error) {
	if len(src) > MaxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, more than %d: %w", name, len(src), MaxFileSize, ErrSyntax)
	}
	p := &parser{name: name, src: bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))}
	if err := p.space(); err != nil {
		return nil, err
	}
	if p.pos >= len(p.src) {
		return nil, p.errorf("empty file")
	}
	if p.src[p.pos] != '{' {
		return nil, p.errorf("want an object ('{'), found %s", p.found())
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if err := p.space(); err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, p.errorf("%s after the object", p.found())
	}
	return v, nil
}

type parser struct {
	name string
	src  []byte
	pos  int
	// The line count up to scanned, for where: keys are met in file
	// order, so counting is linear in the file, not per key.
	scanned, line, lineStart int
}

// where is the line and column (in bytes, from 1) of pos, which must not
// be before any position asked for earlier.
func (p *parser) where(pos int) (line, col int) {
	if p.line == 0 {
		p.line = 1
	}
	for ; p.scanned < pos; p.scanned++ {
		if p.src[p.scanned] == '\n' {
			p.line++
			p.lineStart = p.scanned + 1
		}
	}
	return p.line, pos - p.lineStart + 1
}

func (p *parser) errorf(format string, args ...any) error {
	line, col := 1, 1
	for _, c := range p.src[:min(p.pos, len(p.src))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("%s:%d:%d: %w: %s", p.name, line, col, ErrSyntax, fmt.Sprintf(format, args...))
}

// found names the byte at pos for an error.
func (p *parser) found() string {
	if p.pos >= len(p.src) {
		return "end of file"
	}
	r, _ := utf8.DecodeRune(p.src[p.pos:])
	return fmt.Sprintf("%q", r)
}

// space skips white space and comments.
func (p *parser) space() error {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '/':
			if i := bytes.IndexByte(p.src[p.pos:], '\n'); i >= 0 {
				p.pos += i + 1
			} else {
				p.pos = len(p.src)
			}
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '*':
			i := bytes.Index(p.src[p.pos+2:], []byte("*/"))
			if i < 0 {
				return p.errorf("/* comment not closed")
			}
			p.pos += 2 + i + 2
		default:
			return nil
		}
	}
	return nil
}

func (p *parser) value(depth int) (*value, error) {
	if p.pos >= len(p.src) {
		return nil, p.errorf("want a value, found end of file")
	}
	switch c := p.src[p.pos]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return nil, p.errorf("nested more than %d deep", maxDepth)
		}
		if c == '{' {
			return p.object(depth + 1)
		}
		return p.array(depth + 1)
	case c == '"':
		raw, err := p.str()
		if err != nil {
			return nil, err
		}
		return &value{kind: kindScalar, raw: raw}, nil
	case c == '-' || ('0' <= c && c <= '9'):
		start := p.pos
		for p.pos < len(p.src) && bytes.IndexByte([]byte("0123456789+-.eE"), p.src[p.pos]) >= 0 {
			p.pos++
		}
		raw := p.src[start:p.pos]
		if !json.Valid(raw) {
			p.pos = start
			return nil, p.errorf("invalid number %q", raw)
		}
		return &value{kind: kindScalar, raw: raw}, nil
	case 'a' <= c && c <= 'z':
		start := p.pos
		for p.pos < len(p.src) && 'a' <= p.src[p.pos] && p.src[p.pos] <= 'z' {
			p.pos++
		}
		raw := p.src[start:p.pos]
		switch string(raw) {
		case "true", "false", "null":
			return &value{kind: kindScalar, raw: raw}, nil
		}
		p.pos = start
		return nil, p.errorf("unknown word %q (want true, false or null)", raw)
	}
	return nil, p.errorf("want a value, found %s", p.found())
}

// str scans a string token and returns its raw bytes, quotes included.
func (p *parser) str() ([]byte, error) {
	start := p.pos
	p.pos++
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == '\\':
			p.pos += 2
		case c == '"':
			p.pos++
			raw := p.src[start:p.pos]
			if !json.Valid(raw) || !utf8.Valid(raw) {
				p.pos = start
				return nil, p.errorf("invalid string %.40q (bad escape or not UTF-8)", raw)
			}
			return raw, nil
		case c < 0x20:
			return nil, p.errorf("control character %q in a string", c)
		default:
			p.pos++
		}
	}
	p.pos = start
	return nil, p.errorf("string not closed")
}

func (p *parser) object(depth int) (*value, error) {
	v := &value{kind: kindObject}
	p.pos++ // {
	for {
		if err := p.space(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			p.pos++
			return v, nil
		}
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return nil, p.errorf("want a key (a string) or '}', found %s", p.found())
		}
		line, col := p.where(p.pos)
		rawKey, err := p.str()
		if err != nil {
			return nil, err
		}
		var key string
		if err := json.Unmarshal(rawKey, &key); err != nil {
			return nil, p.errorf("key %.40q: %v", rawKey, err)
		}
		if err := p.space(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.errorf("want ':' after key %q, found %s", key, p.found())
		}
		p.pos++
		if err := p.space(); err != nil {
			return nil, err
		}
		val, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		v.members = append(v.members, member{rawKey: rawKey, key: key, val: val, line: line, col: col})
		if err := p.space(); err != nil {
			return nil, err
		}
		switch {
		case p.pos < len(p.src) && p.src[p.pos] == ',':
			p.pos++
		case p.pos < len(p.src) && p.src[p.pos] == '}':
		default:
			return nil, p.errorf("want ',' or '}' after the value of %q, found %s", key, p.found())
		}
	}
}

func (p *parser) array(depth int) (*value, error) {
	v := &value{kind: kindArray}
	p.pos++ // [
	for {
		if err := p.space(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			p.pos++
			return v, nil
		}
		e, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		v.elems = append(v.elems, e)
		if err := p.space(); err != nil {
			return nil, err
		}
		switch {
		case p.pos < len(p.src) && p.src[p.pos] == ',':
			p.pos++
		case p.pos < len(p.src) && p.src[p.pos] == ']':
		default:
			return nil, p.errorf("want ',' or ']' in an array, found %s", p.found())
		}
	}
}

// write prints v as comment-free JSON: objects one member a line with a
// 2-space indent, arrays of scalars on one line ("[1, 2]", as NVIDIA's
// file writes them), other arrays one element a line, and every scalar
// and key as it was read. The output ends with a newline.
func write(v *value) []byte {
	var b bytes.Buffer
	writeValue(&b, v, 0)
	b.WriteByte('\n')
	return b.Bytes()
}

func writeValue(b *bytes.Buffer, v *value, indent int) {
	pad := func(n int) {
		for range n {
			b.WriteString("  ")
		}
	}
	switch v.kind {
	case kindScalar:
		b.Write(v.raw)
	case kindObject:
		if len(v.members) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, m := range v.members {
			pad(indent + 1)
			b.Write(m.rawKey)
			b.WriteString(": ")
			writeValue(b, m.val, indent+1)
			if i < len(v.members)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		pad(indent)
		b.WriteByte('}')
	case kindArray:
		flat := true
		for _, e := range v.elems {
			flat = flat && e.kind == kindScalar
		}
		if flat {
			b.WriteByte('[')
			for i, e := range v.elems {
				if i > 0 {
					b.WriteString(", ")
				}
				b.Write(e.raw)
			}
			b.WriteByte(']')
			return
		}
		b.WriteString("[\n")
		for i, e := range v.elems {
			pad(indent + 1)
			writeValue(b, e, indent+1)
			if i < len(v.elems)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		pad(indent)
		b.WriteByte(']')
	}
}

// get is the value of the first member named key, or nil.
func (v *value) get(key string) *value {
	for _, m := range v.members {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// set makes key's value val: the first member of that name keeps its
// place (and its key bytes) and takes val, later duplicates are dropped
// (cuFile would read one of them); a missing key is appended.
func (v *value) set(key string, val *value) {
	for i := 0; i < len(v.members); i++ {
		if v.members[i].key != key {
			continue
		}
		v.members[i].val = val
		v.members = append(v.members[:i+1], deleteKey(v.members[i+1:], key)...)
		return
	}
	v.members = append(v.members, member{rawKey: quote(key), key: key, val: val})
}

// del removes every member named key and reports whether there was one.
func (v *value) del(key string) bool {
	n := len(v.members)
	v.members = deleteKey(v.members, key)
	return len(v.members) != n
}

func deleteKey(ms []member, key string) []member {
	out := ms[:0]
	for _, m := range ms {
		if m.key != key {
			out = append(out, m)
		}
	}
	return out
}

// find is the first member named key and the second one, each nil where
// there is none.
func (v *value) find(key string) (first, second *member) {
	for i := range v.members {
		if v.members[i].key != key {
			continue
		}
		if first != nil {
			return first, &v.members[i]
		}
		first = &v.members[i]
	}
	return first, nil
}

// duplicates calls f for each key written more than once in an object at
// or under v, with the key's path (dotted from path, arrays as [i]), its
// first member and each later one, in file order.
func duplicates(v *value, path string, f func(path string, first, again member)) {
	switch v.kind {
	case kindObject:
		seen := make(map[string]int, len(v.members))
		for i, m := range v.members {
			if j, ok := seen[m.key]; ok {
				f(path+m.key, v.members[j], m)
			} else {
				seen[m.key] = i
			}
			duplicates(m.val, path+m.key+".", f)
		}
	case kindArray:
		for i, e := range v.elems {
			duplicates(e, fmt.Sprintf("%s[%d].", strings.TrimSuffix(path, "."), i), f)
		}
	}
}

// quote is s as a JSON string token, without HTML escaping (a mount point
// with & stays readable).
func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func boolValue(b bool) *value {
	if b {
		return &value{kind: kindScalar, raw: []byte("true")}
	}
	return &value{kind: kindScalar, raw: []byte("false")}
}

func stringsValue(ss []string) *value {
	v := &value{kind: kindArray, elems: make([]*value, 0, len(ss))}
	for _, s := range ss {
		v.elems = append(v.elems, &value{kind: kindScalar, raw: quote(s)})
	}
	return v
}
