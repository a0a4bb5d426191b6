# gpuaffinity — build, test, benchmark, lint.
#
#   make demo    run `gpuaffinity topo` on the embedded DGX H100 example
#   make test    install what the tests need (Debian, as root), then vet,
#                race-enabled tests and a short fuzz run
#   make bench   benchmarks: discovery, fixture build, commands, /metrics
#                scrape vs node_exporter, agent RSS, env from the cache,
#                the fleet report and Slurm parser; then the table against
#                the peers (docs/bench.md) and the fleet commands against a
#                real Prometheus at 1,000 to 50,000 nodes (docs/fleet.md)
#   make build   bin/gpuaffinity, bin/gpuaffinity-agent and bin/gpuaffinity-fleet
#   make image   the container image, offline: dist/gpuaffinity-image.tar
#                (docker-archive; podman load -i ...)
#   make package the .deb and .rpm in dist/ (binaries, systemd units,
#                Slurm scripts, man pages, completions)

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.version=$(VERSION) -X main.revision=$(REVISION)
# FUZZTIME: each fuzz target's budget; by default its count in FUZZ below,
# else this (a count, 100000x, or a duration, 30s) for every target.
FUZZTIME ?=

# go-nvml binds libnvidia-ml through cgo (it is dlopen'ed at run time, so
# no driver is needed to build or test). Its header marks some calls
# deprecated; keep that noise out of the build log.
export CGO_ENABLED := 1
export CGO_CFLAGS  := -O2 -g -Wno-deprecated-declarations

# Packages `go test -fuzz` runs briefly in `make test`:
# package:target:executions. A count, not a duration: Go 1.26's fuzz
# engine can end a timed run with "context deadline exceeded" when its
# deadline fires while a worker is still running an input (golang/go#75804,
# fixed in Go 1.27), which a loaded CI machine hits often; a count has no
# deadline to race, and a slow machine takes longer instead of failing.
# Each count is about what the target runs in 4 s on a loaded 2-core VM.
FUZZ := ./kfd:FuzzParseProperties:10000 ./kfd:FuzzParseRAS:30000 ./cpuset:FuzzParse:50000 ./cpuset:FuzzParseMask:50000 \
        ./pci:FuzzParseAddress:40000 ./rdma:FuzzParseRate:30000 ./rdma:FuzzParseState:25000 ./internal/sysattr:FuzzParseHex:60000 \
        ./ncclxml:FuzzParse:12000 ./gres:FuzzParseReason:30000 ./nvml:FuzzLoadReplay:6000 ./placement:FuzzParsePhysicalHost:30000 \
        ./agent:FuzzDecodeCache:800 ./discover:FuzzApplyTopoFile:400 ./internal/compact:FuzzDecode:60000 \
        ./fleet/slurmconf:FuzzParse:18000 ./fleet/prom:FuzzDecode:4000 ./cufile:FuzzMerge:15000

.PHONY: all build image package demo test deps lint vet fmt-check compile unit fuzz bench clean

all: build

# Three builds of cmd/gpuaffinity: bin/gpuaffinity leaves the agent, the
# fleet commands and their metrics and Prometheus client libraries out
# (-tags omit_agent), so that env and exec, run once per rank, start in
# half the time; its `agent` command runs bin/gpuaffinity-agent, the agent
# alone (-tags agent_only: the daemon on every node, holding in memory
# only the code it runs), and its `fleet` command bin/gpuaffinity-fleet,
# the full build; all three are installed side by side.
build:
	$(GO) build -trimpath -tags omit_agent -ldflags '$(LDFLAGS)' -o bin/gpuaffinity ./cmd/gpuaffinity
	$(GO) build -trimpath -tags agent_only -ldflags '$(LDFLAGS)' -o bin/gpuaffinity-agent ./cmd/gpuaffinity
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/gpuaffinity-fleet ./cmd/gpuaffinity

# The image holds the three binaries, the shared objects the dynamic loader
# maps for them (libc and the loader; libnvidia-ml comes from the NVIDIA
# container runtime) and nothing else; it is tagged with the release the
# manifests and the Helm chart name (deploy/internal/ociimage.Release).
IMAGE_TAR ?= dist/gpuaffinity-image.tar
image: build
	@mkdir -p $(dir $(IMAGE_TAR))
	$(GO) run ./deploy/internal/ociimage/mkimage -o $(IMAGE_TAR) -version $(VERSION) -revision $(REVISION) \
		bin/gpuaffinity bin/gpuaffinity-agent bin/gpuaffinity-fleet

# nFPM as a library; the version is git describe made a package version
# (deploy/internal/pkgbuild), Depends/Requires the glibc the binaries need.
package: build
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) \
		$(GO) run ./deploy/internal/pkgbuild/mkpkg -version '$(VERSION)' -out dist bin/gpuaffinity bin/gpuaffinity-agent bin/gpuaffinity-fleet

demo: deps-build
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/gpuaffinity topo --demo dgx-h100

# compile first: integration tests (Slurm, agent) go-build the binary and
# hit the build cache this warms.
test: deps lint compile unit fuzz

# Two modules, one workspace (go.work): the product at the root, and
# deploy/ (github.com/gpuaffinity/gpuaffinity/deploy), which holds the
# tests and release tools that need Kubernetes, Helm, kustomize, nFPM and
# go-containerregistry. `./...` at the root stops at deploy/go.mod, so
# every target that covers the tree runs once per module; -C deploy
# works with GOWORK=off too (deploy/go.mod replaces the product with ../).
compile:
	$(GO) build ./...
	$(GO) -C deploy build ./...
	$(GO) build -tags omit_agent -o /dev/null ./cmd/gpuaffinity
	$(GO) build -tags agent_only -o /dev/null ./cmd/gpuaffinity

deps:
	@PATH="$$PATH:/usr/sbin:/sbin" scripts/install-deps.sh gcc hwloc graphviz dash zsh slurmd slurmctld slurm-client munge \
		prometheus prometheus-node-exporter systemd podman rpm

deps-build:
	@scripts/install-deps.sh gcc

lint: fmt-check vet

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	$(GO) -C deploy vet ./...
	$(GO) vet -tags omit_agent ./cmd/gpuaffinity

# Fixture roots are thousands of small files, and race-built test
# binaries run several times slower from this VM's disk than from memory
# (measured: the exporter's tests 15 s from tmpfs, 80 s from ext4, most of
# it system time). Both go to a memory file system where one is writable
# with 4 GiB free; GOTMPDIR is where go links and runs test binaries.
TEST_TMPDIR ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && \
	[ "$$(df -Pk /dev/shm | awk 'NR==2 {print $$4}')" -ge 4194304 ] && echo /dev/shm || echo $${TMPDIR:-/tmp})
TEST_ENV := PATH="$$PATH:/usr/sbin:/sbin" GOTMPDIR=$(TEST_TMPDIR) TMPDIR=$(TEST_TMPDIR)

# The product module's tests run race-enabled. The deploy module's do not:
# they hold manifests, the chart, the dashboard, the image and the packages
# to their consumers' rules, and the only code of ours they run
# concurrently is the product's, which the first line race-tests. Race
# builds of Kubernetes, Helm, kustomize, nFPM and go-containerregistry
# cost minutes a run (the deploy module took 11 min race-enabled, 7 min
# without, on a loaded 2-core machine); `go -C deploy test -race ./...`
# passes too. -timeout: a loaded 2-core machine takes discover's and
# cmd/gpuaffinity's tests past go test's default 10 minutes.
unit:
	$(TEST_ENV) $(GO) test -race -count=1 -timeout 40m ./...
	$(TEST_ENV) $(GO) -C deploy test -count=1 -timeout 40m ./...

# -fuzzminimizetime 1x: a new input is kept as found, not minimized for up
# to a minute (which stalls a short run at 0 execs/s). A run that ends in
# "context deadline exceeded" without writing a failing input (the engine's
# race above, possible only with a FUZZTIME duration) is run again, up to
# five times in all. A run that found a crasher ("Failing input written
# to") fails at once, and any other failure too.
fuzz:
	@set -e; for f in $(FUZZ); do \
		pkg=$${f%%:*}; rest=$${f#*:}; target=$${rest%%:*}; budget=$(FUZZTIME); budget=$${budget:-$${rest##*:}x}; \
		for try in 1 2 3 4 5; do \
			echo "fuzz $$pkg $$target ($$budget, try $$try)"; \
			if out=$$($(TEST_ENV) $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $$budget -fuzzminimizetime 1x -parallel 1 $$pkg 2>&1); then \
				break; \
			fi; \
			echo "$$out" | tail -20; \
			if [ $$try = 5 ] || echo "$$out" | grep -q 'Failing input written to' || \
				! echo "$$out" | grep -q 'context deadline exceeded'; then \
				echo "fuzz $$pkg $$target: FAILED"; exit 1; \
			fi; \
		done; \
	done

# fleetbench: `gpuaffinity fleet`'s subcommands against a real Prometheus
# serving a synthetic fleet of each size (wall time, peak RSS, and
# Prometheus's own time for the same queries); each size's TSDB is
# built once with promtool and cached under ~/.cache/gpuaffinity/fleetbench.
FLEETBENCH ?= -n 1000,5000,20000,50000

bench:
	$(TEST_ENV) $(GO) test -run '^$$' -bench . -benchmem ./discover/ ./internal/testutil/fakesys/ ./cmd/gpuaffinity/ ./exporter/ ./fleet/ ./fleet/slurmconf/
	$(TEST_ENV) $(GO) run ./internal/tools/peerbench $(PEERBENCH)
	$(TEST_ENV) $(GO) run ./internal/tools/fleetbench $(FLEETBENCH)

clean:
	rm -rf bin dist
