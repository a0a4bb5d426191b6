// Command mkpkg builds gpuaffinity's .deb and .rpm (deploy/internal/pkgbuild)
// from the binaries `make build` writes:
//
//	go run ./deploy/internal/pkgbuild/mkpkg -version "$(VERSION)" -out dist \
//	    bin/gpuaffinity bin/gpuaffinity-agent bin/gpuaffinity-fleet
//
// -version takes the Makefile's VERSION (git describe) and makes a
// package version of it (pkgbuild.Version). It prints the package
// version, the glibc the binaries need, and the paths written.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/pkgbuild"
)

func main() {
	describe := flag.String("version", "", "the Makefile's VERSION (git describe --tags --always --dirty)")
	out := flag.String("out", "dist", "directory for the packages")
	source := flag.String("source", ".", "the repository's root (systemd/, deploy/slurm/, docs/man/)")
	maintainer := flag.String("maintainer", "", "the deb's Maintainer and the rpm's Packager")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: mkpkg -version VERSION [-out DIR] [-source DIR] bin/gpuaffinity bin/gpuaffinity-agent bin/gpuaffinity-fleet\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*describe, *out, *source, *maintainer, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mkpkg:", err)
		os.Exit(1)
	}
}

func run(describe, out, source, maintainer string, bins []string) error {
	if describe == "" {
		return fmt.Errorf("-version is required")
	}
	o := pkgbuild.Options{OutDir: out, Source: source, Maintainer: maintainer}
	for _, b := range bins {
		switch filepath.Base(b) {
		case "gpuaffinity":
			o.CLI = b
		case "gpuaffinity-agent":
			o.Agent = b
		case "gpuaffinity-fleet":
			o.Fleet = b
		default:
			return fmt.Errorf("%s: want bin/gpuaffinity, bin/gpuaffinity-agent and bin/gpuaffinity-fleet", b)
		}
	}
	if o.CLI == "" || o.Agent == "" || o.Fleet == "" || len(bins) != 3 {
		return fmt.Errorf("want the three binaries, bin/gpuaffinity, bin/gpuaffinity-agent and bin/gpuaffinity-fleet (make build), got %q", bins)
	}
	v, err := pkgbuild.Version(describe)
	if err != nil {
		return err
	}
	o.Version = v
	res, err := pkgbuild.Build(o)
	if err != nil {
		return err
	}
	glibc := "none (static binaries)"
	if res.GLIBC != "" {
		glibc = "glibc >= " + res.GLIBC
	}
	fmt.Printf("package version %s (from %s); the binaries need %s\n%s\n%s\n", v, describe, glibc, res.Deb, res.RPM)
	return nil
}
