package render

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// formats lists every rendering with the extension of its golden file.
var formats = []struct {
	ext    string
	render func(io.Writer, topology.Node) error
}{
	{"table", Table},
	{"dot", DOT},
	{"mmd", Mermaid},
	{"json", JSON},
}

// TestGolden renders every fixture in every format and compares with
// testdata/<fixture>.<format>.golden. Run `go test ./render -update` to
// rewrite them, then review the diff by eye.
func TestGolden(t *testing.T) {
	for _, fx := range fixtures {
		for _, f := range formats {
			t.Run(fx.name+"/"+f.ext, func(t *testing.T) {
				var buf bytes.Buffer
				if err := f.render(&buf, fx.node()); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join("testdata", fx.name+"."+f.ext+".golden")
				if *update {
					if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if diff := cmp.Diff(string(want), buf.String()); diff != "" {
					t.Errorf("%s differs (-want +got):\n%s", path, diff)
				}
			})
		}
	}
}

// TestDeterministic renders each fixture twice: maps inside the renderers
// must not leak their order.
func TestDeterministic(t *testing.T) {
	for _, fx := range fixtures {
		for _, f := range formats {
			var a, b bytes.Buffer
			for range 5 {
				a.Reset()
				if err := f.render(&a, fx.node()); err != nil {
					t.Fatal(err)
				}
				if b.Len() > 0 && !bytes.Equal(a.Bytes(), b.Bytes()) {
					t.Fatalf("%s/%s: output changed between runs", fx.name, f.ext)
				}
				b.Reset()
				b.Write(a.Bytes())
			}
		}
	}
}

type failWriter struct{}

var errFail = io.ErrShortWrite

func (failWriter) Write([]byte) (int, error) { return 0, errFail }

// TestWriteError checks that each renderer returns the writer's error,
// wrapped.
func TestWriteError(t *testing.T) {
	for _, f := range formats {
		err := f.render(failWriter{}, switchNode())
		if err == nil || !errors.Is(err, errFail) {
			t.Errorf("%s: err = %v, want one wrapping %v", f.ext, err, errFail)
		}
	}
}
