// Command mkimage builds the gpuaffinity container image from built
// binaries, offline, as a docker-archive tarball (`make image`):
//
//	go run ./deploy/internal/ociimage/mkimage -o dist/gpuaffinity-image.tar \
//	    -version v0.1.0 -revision abc1234 \
//	    bin/gpuaffinity bin/gpuaffinity-agent bin/gpuaffinity-fleet
//
// The first binary is the entrypoint: gpuaffinity, which runs
// gpuaffinity-agent for `agent` (the DaemonSet) and gpuaffinity-fleet
// for `fleet` (the fleet CronJob) from beside it in /usr/bin. Load the result with
// `podman load -i dist/gpuaffinity-image.tar`.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/ociimage"
)

func main() {
	out := flag.String("o", "dist/gpuaffinity-image.tar", "the docker-archive tarball to write")
	tag := flag.String("tag", ociimage.Repository+":"+ociimage.Release, "the image's name and tag")
	version := flag.String("version", ociimage.Release, "the org.opencontainers.image.version label")
	revision := flag.String("revision", "unknown", "the org.opencontainers.image.revision label")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mkimage [-o FILE] [-tag REF] [-version V] [-revision R] BINARY...")
		os.Exit(2)
	}
	// SOURCE_DATE_EPOCH (reproducible-builds.org) sets the creation
	// time; without it the image is dated at the epoch, so that the same
	// binaries give the same digest.
	var created time.Time
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mkimage: SOURCE_DATE_EPOCH=%q: %v\n", s, err)
			os.Exit(2)
		}
		created = time.Unix(sec, 0)
	}
	img, err := ociimage.Build(ociimage.Spec{
		Binaries: flag.Args(), Version: *version, Revision: *revision, Created: created,
	})
	if err == nil {
		err = ociimage.Write(*out, *tag, img)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
	d, err := img.Digest()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %s %s\n", *out, *tag, d)
}
