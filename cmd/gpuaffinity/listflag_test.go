package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// -o is the format everywhere: on the commands that write a file it is
// refused, naming -f, and writes nothing; -f writes the file.
func TestOutputFileFlag(t *testing.T) {
	for _, cmd := range []string{"gres", "nccl-topo", "cufile", "snapshot"} {
		t.Run(cmd, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "json")
			_, _, err := runErr(t, cmd, "--demo", "dgx-h100", "-o", target)
			if err == nil || !strings.Contains(err.Error(), "-f/--output-file") {
				t.Errorf("%s -o: %v; want a refusal naming -f/--output-file", cmd, err)
			}
			if _, err := os.Lstat(target); err == nil {
				t.Errorf("%s -o wrote %s", cmd, target)
			}
			if _, _, err := runErr(t, cmd, "--demo", "dgx-h100", "--output", target); err == nil {
				t.Errorf("%s --output: no refusal", cmd)
			}
			if _, _, err := runErr(t, cmd, "--demo", "dgx-h100", "-f", target); err != nil {
				t.Fatalf("%s -f: %v", cmd, err)
			}
			if _, err := os.Lstat(target); err != nil {
				t.Errorf("%s -f wrote nothing: %v", cmd, err)
			}
		})
	}
}
