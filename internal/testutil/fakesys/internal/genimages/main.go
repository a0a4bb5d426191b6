// Command genimages writes internal/demo/images: one prebuilt image of
// each embedded machine (fakesys.BuildImage), which --demo loads through
// package demo. Run it through go generate ./internal/testutil/fakesys
// after changing a spec, a capture or the builder; fakesys's tests fail
// until then.
package main

import (
	"flag"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
)

func main() {
	dir := flag.String("o", "images", "directory to write NAME.img.gz into")
	flag.Parse()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	want := map[string]bool{}
	for _, name := range fakesys.Machines() {
		img, err := fakesys.BuildImage(name)
		if err != nil {
			log.Fatal(err)
		}
		file := name + ".img.gz"
		want[file] = true
		if err := os.WriteFile(filepath.Join(*dir, file), img, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	// Images of machines that are gone.
	entries, err := os.ReadDir(*dir)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".img.gz") && !want[e.Name()] {
			if err := os.Remove(filepath.Join(*dir, e.Name())); err != nil {
				log.Fatal(err)
			}
		}
	}
}
