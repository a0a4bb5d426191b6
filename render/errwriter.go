package render

import (
	"fmt"
	"io"
)

// errWriter keeps the first write error so that a rendering can print
// line after line and check once at the end.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// printf writes a formatted string, remembering the first error.
func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// line writes s and a newline.
func (e *errWriter) line(s string) { e.printf("%s\n", s) }
