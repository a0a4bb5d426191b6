package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestListFlagAsStringSlice holds listVar to pflag's StringSliceVar: the
// same values after the same arguments (quoting, repeats, an empty value,
// a default replaced), the same printed value, type and help text.
func TestListFlagAsStringSlice(t *testing.T) {
	for _, tc := range []struct {
		name string
		def  []string
		args []string
	}{
		{"unset", nil, nil},
		{"unset with default", []string{":19400"}, nil},
		{"one", nil, []string{"--l", "mlx5_0"}},
		{"comma list", nil, []string{"--l", "mlx5_0,mlx5_1"}},
		{"repeated", nil, []string{"--l", "a", "--l=b,c"}},
		{"default replaced then appended", []string{":19400"}, []string{"--l", ":1", "--l", ":2"}},
		{"quoted comma", nil, []string{"--l", `"a,b",c`}},
		{"empty value", []string{"x"}, []string{"--l="}},
		{"bad quote", nil, []string{"--l", `a"b`}},
		{"spaces kept", nil, []string{"--l", " a , b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs := pflag.NewFlagSet("ours", pflag.ContinueOnError), pflag.NewFlagSet("theirs", pflag.ContinueOnError)
			var got, want []string
			listVar(ours, &got, "l", slices.Clone(tc.def), "a list")
			theirs.StringSliceVar(&want, "l", slices.Clone(tc.def), "a list")
			errOurs, errTheirs := ours.Parse(tc.args), theirs.Parse(tc.args)
			if (errOurs == nil) != (errTheirs == nil) {
				t.Fatalf("Parse: ours %v, pflag's %v", errOurs, errTheirs)
			}
			if errOurs != nil {
				return
			}
			if !slices.Equal(got, want) || (got == nil) != (want == nil) {
				t.Errorf("value %#v, pflag's %#v", got, want)
			}
			fo, ft := ours.Lookup("l"), theirs.Lookup("l")
			if fo.Value.String() != ft.Value.String() || fo.Value.Type() != ft.Value.Type() {
				t.Errorf("printed %q type %q, pflag's %q %q", fo.Value.String(), fo.Value.Type(), ft.Value.String(), ft.Value.Type())
			}
			// An empty default is "" here, "[]" in pflag: both mean none
			// (the help text, checked next, leaves both out).
			if fo.DefValue != ft.DefValue && (fo.DefValue != "" || ft.DefValue != "[]") {
				t.Errorf("default %q, pflag's %q", fo.DefValue, ft.DefValue)
			}
			if u, w := ours.FlagUsages(), theirs.FlagUsages(); u != w {
				t.Errorf("help %q, pflag's %q", u, w)
			}
		})
	}
}
