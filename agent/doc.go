// Package agent is the gpuaffinity daemon (`gpuaffinity agent`, a
// systemd Type=notify service or a Kubernetes DaemonSet): it discovers
// the node at start, on Rescan (SIGHUP) and every Options.Rescan, runs
// the health gate after each discovery, writes the files launchers read
// under the state directory, and serves HTTP (exporter-toolkit: TLS and
// basic auth from --web.config.file):
//
//	/          landing page
//	/metrics   the exporter package's metrics (docs/metrics.md)
//	/healthz   200 while the process serves
//	/readyz    200 once the first discovery has run (serving), else 503
//	/health    200 when the last health gate passed, else 503 and why
//	/topology  the last good node as topology JSON
//
// Files under the state directory (each replaced atomically with
// internal/atomicfile, so a reader, or a kill -9 of the agent, never sees
// half a file): topology.json (render.JSON), nccl-topo.xml
// (nccl.TopologyXML; not on EFA nodes, whose plugin writes its own),
// launch.node (the node env and cpumap read, in agent/cache's compact
// form) and env (node-level dotenv, NCCL_TOPO_FILE pointing at the XML). A
// failed rescan keeps the last good node and says so in
// exporter.State.Discovery; so does a round that panics (recovered:
// "panic: ...") or runs past Options.DiscoveryTimeout (abandoned to its
// goroutine, which ends when its blocking read returns; Run never waits
// for it at shutdown). Package agent/cache reads launch.node (or
// topology.json, from another build) back for `gpuaffinity env` and
// `cpumap`.
//
// NVML: the agent holds one Init for its life (Shutdown at exit) and
// calls nothing but Init again after a failed Init. Under a root other
// than "/" (a fixture, --demo) every discovery re-opens ROOT/nvml.json,
// so the machine can change between rescans. XID events are counted in
// the background into an exporter.XIDCounter; everything else is read
// at scrape time by the exporter.
//
// What not to add here: metric definitions (exporter/), checks
// (health/), renderings (render/, nccl/), flag parsing (cmd/).
package agent
