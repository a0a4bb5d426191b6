package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra/doc"
)

var updateMan = flag.Bool("update-man", false, "write docs/man from the commands")

// manDate is the date the pages carry (cobra would print today's, and the
// pages would differ every day); set it when the commands change.
var manDate = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// TestManPages holds docs/man (one page per command, generated with
// cobra's doc package from the commands themselves) to the commands: it
// fails while a page differs; go test ./cmd/gpuaffinity -run TestManPages
// -update-man writes them again. The binary does not link the generator.
func TestManPages(t *testing.T) {
	for _, k := range []string{"GPUAFFINITY_ROOT", "GPUAFFINITY_STATE_DIR"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	dir := t.TempDir()
	header := &doc.GenManHeader{Title: "GPUAFFINITY", Section: "1", Date: &manDate, Source: "gpuaffinity", Manual: "gpuaffinity manual"}
	root := newRootCmd()
	root.DisableAutoGenTag = true
	if err := doc.GenManTree(root, header, dir); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join("..", "..", "docs", "man")
	if *updateMan {
		if err := os.RemoveAll(want); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(want, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	have, _ := os.ReadDir(want)
	if len(have) != len(got) {
		t.Errorf("docs/man has %d pages, the commands %d: go test ./cmd/gpuaffinity -run TestManPages -update-man", len(have), len(got))
	}
	for _, e := range got {
		g, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		w, err := os.ReadFile(filepath.Join(want, e.Name()))
		if err != nil || string(g) != string(w) {
			t.Errorf("docs/man/%s is stale or missing: go test ./cmd/gpuaffinity -run TestManPages -update-man", e.Name())
		}
	}
}
