package main

import (
	"bytes"
	"encoding/csv"
	"strings"

	"github.com/spf13/pflag"
)

// listValue is a comma-separated list flag with pflag's StringSlice
// behaviour (CSV quoting, the first use replaces the default and later
// uses append, type "stringSlice", printed "[a,b]"), without its cost at
// definition: pflag prints every StringSlice default through a CSV writer
// with a 4 KiB buffer, and each command defines a dozen such flags before
// a launcher's env or exec can run.
type listValue struct {
	value   *[]string
	changed bool
}

// listVar defines a list flag on fs, as fs.StringSliceVar would.
func listVar(fs *pflag.FlagSet, p *[]string, name string, value []string, usage string) {
	*p = value
	fs.Var(&listValue{value: p}, name, usage)
	if len(value) == 0 {
		// pflag's help leaves out an empty default only for its own
		// list types ("[]"); "" is empty for any type.
		fs.Lookup(name).DefValue = ""
	}
}

func (l *listValue) Set(val string) error {
	var v []string
	if val != "" {
		var err error
		if v, err = csv.NewReader(strings.NewReader(val)).Read(); err != nil {
			return err
		}
	}
	if v == nil {
		v = []string{}
	}
	if l.changed {
		*l.value = append(*l.value, v...)
	} else {
		*l.value = v
	}
	l.changed = true
	return nil
}

func (l *listValue) Type() string { return "stringSlice" }

func (l *listValue) String() string {
	if len(*l.value) == 0 {
		return "[]"
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(*l.value); err != nil {
		return "[]"
	}
	w.Flush()
	return "[" + strings.TrimSuffix(b.String(), "\n") + "]"
}

// Append, Replace and GetSlice are pflag.SliceValue (shell completion
// and cobra read a list flag's values through it).
func (l *listValue) Append(val string) error {
	*l.value = append(*l.value, val)
	return nil
}

func (l *listValue) Replace(val []string) error {
	*l.value = val
	return nil
}

func (l *listValue) GetSlice() []string { return *l.value }

var _ pflag.SliceValue = (*listValue)(nil)
