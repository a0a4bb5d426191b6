//go:build !omit_agent

package main

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	commonversion "github.com/prometheus/common/version"
	"github.com/spf13/cobra"

	"github.com/gpuaffinity/gpuaffinity/agent"
	"github.com/gpuaffinity/gpuaffinity/exporter"
	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/internal/demo"
	"github.com/gpuaffinity/gpuaffinity/placement"
)

func newAgentCmd(g *globals) *cobra.Command {
	var nf nodeFlags
	var (
		stateDir, webConfig, profile, expectFile, nfdFile string
		placementCloud, placementURL                      string
		placementTimeout                                  time.Duration
		listen, switches                                  []string
		systemdSocket, nfdGFDClique, jobs, jobsInfo       bool
		maxRequests, maxConnections                       int
		rescan, discoveryTimeout                          time.Duration
		collectors                                        *exporter.CollectorFlags
		maxProcs                                          int
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the daemon: state files, health gate, /metrics /healthz /readyz /health /topology",
		Long: `agent discovers the node at start, on SIGHUP and every --rescan, keeping
the last good node when a rescan fails. After each discovery it writes
topology.json, launch.node (the compact node env and cpumap read), nccl-topo.xml
and env (node-level dotenv) under --state-dir,
each replaced atomically, and runs the health gate (check's checks, without
the NIC counter interval); --nfd-file is rewritten after each gate.

HTTP (--web.listen-address, TLS and basic auth from --web.config.file,
exporter-toolkit's format): / landing page, /metrics (docs/metrics.md),
/healthz (200 while serving), /readyz (200 once the first discovery has
run), /health (200 when the last gate passed, 503 and the reason
otherwise), /topology (the JSON). /metrics serves --web.max-requests scrapes
at once and answers 503 beyond; each address holds --web.max-connections
connections (sizing: docs/operations.md, "Load and memory"). --collector.jobs
audits the processes on the GPUs at each scrape (their CPUs against each GPU's;
off by default; docs/metrics.md, "Jobs"). Under systemd it is a
Type=notify service with watchdog support (systemd/gpuaffinity.service).
SIGTERM or SIGINT stops it cleanly. See docs/agent.md.`,
		Example: `  gpuaffinity agent --demo dgx-h100 --state-dir /tmp/gpuaffinity &
  curl -s localhost:19400/metrics | grep gpuaffinity_nvlink_up | head`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if nf.demo == "list" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), strings.Join(demo.Machines(), "\n"))
				return err
			}
			prof, err := health.ParseProfile(profile)
			if err != nil {
				return err
			}
			var expect *health.Expect
			if expectFile != "" {
				if expect, err = loadExpect(expectFile); err != nil {
					return fmt.Errorf("--expect: %w", err)
				}
			}
			if rescan < 0 {
				return fmt.Errorf("--rescan %s: want 0 (never) or more", rescan)
			}
			if maxRequests < 0 {
				return fmt.Errorf("--web.max-requests %d: want 0 (no limit) or more", maxRequests)
			}
			if maxConnections < 0 {
				return fmt.Errorf("--web.max-connections %d: want 0 (no limit) or more", maxConnections)
			}
			if discoveryTimeout <= 0 {
				return fmt.Errorf("--discovery-timeout %s: want more than 0", discoveryTimeout)
			}
			if maxProcs < 1 {
				return fmt.Errorf("--runtime.gomaxprocs %d: want 1 or more", maxProcs)
			}
			if jobsInfo && !jobs {
				return fmt.Errorf("--collector.jobs.info needs --collector.jobs")
			}
			daemonGC()
			daemonProcs(maxProcs, cmd.Flags().Changed("runtime.gomaxprocs"))
			// Signals first: a SIGTERM while the demo machine is built
			// still ends in its removal.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			root, err := nf.prepareRoot(cmd, g)
			defer nf.cleanup()
			if err != nil {
				return err
			}
			// gpuaffinity_build_info reads prometheus/common/version.
			commonversion.Version, commonversion.Revision = version, revision
			// A demo machine is not where it says it is: no metadata
			// service to ask unless the flag says so.
			if nf.demo != "" && !cmd.Flags().Changed("placement") {
				placementCloud = agent.PlacementOff
			}
			a, err := agent.New(agent.Options{
				Root: root, TopoFile: g.topoFile, Roles: nf.roles(),
				StateDir: stateDir, NFDFile: nfdFile, NFDGFDClique: nfdGFDClique, Rescan: rescan, DiscoveryTimeout: discoveryTimeout,
				Profile: prof, Expect: expect,
				ListenAddresses: splitList(listen), SystemdSocket: systemdSocket, WebConfigFile: webConfig,
				MaxRequests: maxRequests, MaxConnections: maxConnections,
				Collectors: collectors.Collectors(), Jobs: jobs, JobsInfo: jobsInfo,
				Placement: agent.PlacementOptions{Cloud: placementCloud, BaseURL: placementURL, Timeout: placementTimeout,
					Switches: splitList(switches)},
				Version: version, Logger: g.log,
			})
			if err != nil {
				return err
			}
			done := make(chan struct{})
			defer close(done)
			go func() {
				for {
					select {
					case <-hup:
						g.log.Info("SIGHUP: rescanning")
						a.Rescan()
					case <-done:
						return
					}
				}
			}()
			return a.Run(ctx)
		},
	}
	nf.register(cmd)
	f := cmd.Flags()
	collectors = exporter.RegisterCollectorFlags(f)
	f.BoolVar(&jobs, "collector.jobs", false, "audit the processes on the GPUs at each scrape: gpuaffinity_gpu_processes by verdict per GPU, and the fabric balance since the previous scrape (gpuaffinity_job_compute_nic_idle, gpuaffinity_job_storage_nic_compute_traffic; docs/metrics.md, \"Jobs\"); reads every GPU process's /proc status, cgroup and threads, and needs the host's PID namespace; off by default, and not touched by --collector.disable-defaults")
	f.BoolVar(&jobsInfo, "collector.jobs.info", false, "with --collector.jobs, also gpuaffinity_job_info: one series per GPU and Slurm job step or pod with a process on it")
	f.StringVar(&stateDir, "state-dir", stateDirDefault(), "directory for topology.json, nccl-topo.xml and env (env GPUAFFINITY_STATE_DIR); \"\" writes none")
	f.DurationVar(&rescan, "rescan", 5*time.Minute, "time between discoveries; 0 rescans only on SIGHUP")
	f.DurationVar(&discoveryTimeout, "discovery-timeout", 2*time.Minute, "a discovery round still running after this is reported as timed out (not ready) and left to finish; none starts until it does")
	listVar(f, &listen, "web.listen-address", []string{":19400"}, "addresses to serve HTTP on (repeatable)")
	f.StringVar(&webConfig, "web.config.file", "", "exporter-toolkit web configuration file: TLS and basic auth (docs/agent.md)")
	f.IntVar(&maxRequests, "web.max-requests", 40, "most /metrics scrapes served at once (node_exporter's flag); more are answered 503 at once; 0 means no limit")
	f.IntVar(&maxConnections, "web.max-connections", 4096, "most connections held open per listen address (Prometheus's flag); more wait in the kernel's accept queue; 0 means no limit (docs/operations.md, \"Load and memory\")")
	f.BoolVar(&systemdSocket, "web.systemd-socket", false, "serve on the sockets systemd passes (socket activation) instead of --web.listen-address")
	f.StringVar(&profile, "profile", string(health.Pretrain), "health gate profile: pretrain, finetune or inference (as check)")
	f.StringVar(&expectFile, "expect", "", "hold the node to expectations from this YAML file (check --learn)")
	f.StringVar(&nfdFile, "nfd-file", "", "rewrite this Node Feature Discovery feature file after each health gate")
	f.StringVar(&placementCloud, "placement", agent.PlacementAuto, "where to read the node's network placement and VM type with each discovery: auto (the metadata service of the cloud DMI names: GCP placement and machine type, OCI placement, Azure VM size; nothing elsewhere), gcp, oci, azure or off")
	f.StringVar(&placementURL, "placement.url", placement.DefaultBaseURL, "base URL of the cloud metadata service (a relay or a test server)")
	f.DurationVar(&placementTimeout, "placement.timeout", placement.DefaultTimeout, "time one placement read may take")
	listVar(f, &switches, "placement.switches", nil, "the site's names of the switches above this node, leaf first (comma-separated or repeated, at most 3); they replace the cloud's tiers")
	f.IntVar(&maxProcs, "runtime.gomaxprocs", agentMaxProcs, "the number of CPUs Go runs the agent's code on at once (GOMAXPROCS), as node_exporter's flag; the environment's GOMAXPROCS wins unless the flag is given")
	f.BoolVar(&nfdGFDClique, "nfd-gfd-clique", false, "also write GPU Feature Discovery's nvidia.com/gpu.clique label in --nfd-file (off: GFD owns it where it runs)")
	return cmd
}

// agentGCPercent is the daemon's GOGC. Its live heap is a few megabytes
// (the node, the NVML answers, the encoded static series) and a scrape
// allocates about one more; at Go's default of 100 the heap grows to
// twice the live set between collections, so the resident set is a third
// larger than at 50 for a few hundred microseconds more collection per
// scrape (docs/bench.md, "Agent memory").
const agentGCPercent = 50

// daemonGC sets agentGCPercent unless GOGC is set, and no memory limit
// (undoing commandGC's) unless GOMEMLIMIT is set. The two are decided
// apart: a GOMEMLIMIT (the DaemonSet sets 80MiB below its 96Mi limit) is
// a ceiling the collector works harder near, not a choice of pacing
// below it, so with it alone the agent still collects at 50, not at
// Go's 100.
func daemonGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(agentGCPercent)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(math.MaxInt64)
	}
}

// agentMaxProcs is the agent's GOMAXPROCS unless --runtime.gomaxprocs or
// the environment says otherwise: node_exporter's default for the same
// flag. The agent's work is reading files and NVML, which block in the
// kernel (a blocked read holds a thread, not a P), and little
// computation; but Go sizes per-P caches (a span of each size class per
// P) and the collector's workers (a quarter of the Ps) by GOMAXPROCS,
// which is every CPU of the node where no CPU limit caps it, and the
// DaemonSet sets none (CFS throttling would stretch scrapes past their
// timeouts). On the DGX H100 fixture after 1,000 scrapes, with
// GOMAXPROCS 224 (a DGX H100's CPUs) the agent held 41 MiB resident, at
// 1 25 MiB (docs/bench.md, "Agent memory").
const agentMaxProcs = 1

// daemonProcs sets GOMAXPROCS to n unless the environment's GOMAXPROCS
// set it and the flag was not given (node_exporter reads the variable as
// the flag's default: the flag wins, then the variable).
func daemonProcs(n int, flagGiven bool) {
	if _, ok := os.LookupEnv("GOMAXPROCS"); ok && !flagGiven {
		return
	}
	runtime.GOMAXPROCS(n)
}
