// Package exporter renders a node as Prometheus metrics for `gpuaffinity
// agent`: the last good discovery (topology.Node: GPUs, NICs, pairing,
// storage, NVLink domains and IMEX), what NVML answers at scrape time (GPU
// health, NVLink fabric registration and health, NVLink state and error
// counters), what amdgpu's sysfs says of the AMD Instinct GPUs at scrape
// time (RAS error counts, PCIe; their XGMI links from the discovery), the
// RDMA ports' state and counters read from sysfs at scrape time
// (rdma.CounterReader), and the agent's own state (discovery,
// health gate, state files, XID counts). docs/metrics.md is the metric
// contract; desc_test.go keeps the two in step.
//
// A collection runs five collectors at once, nvml, amdgpu (where the
// node has an AMD GPU), rdma, topology and storage, each with a deadline, the way node_exporter reports its
// collectors (gpuaffinity_scrape_collector_success and _duration_seconds)
// but with a per-collector timeout node_exporter lacks: a failing
// collector costs its own series, never the scrape, which answers 200.
// Concurrent scrapes share one collection. Collectors can be switched off
// as node_exporter's are (Options.Collectors, RegisterCollectorFlags:
// --[no-]collector.NAME), the NVLink series apart from the other NVML ones
// (nvlink).
//
// Metrics are rendered each collection from what it read, so a series of
// a device that is gone disappears, except where the contract keeps it as
// 0 (a GPU or an NVLink the discovery listed). What repeats from scrape to
// scrape is kept instead of rebuilt: the topology and storage series per
// discovery (State.Node), each collector's label pairs per series (labelCache).
// The exporter's own metric families are built directly (familyBuilder)
// as the registry would build them, without its per-metric costs, and
// merged with the registry's (build info, Go, process, promhttp).
//
// Errors never panic the exporter: a collector's panic becomes its error,
// a label value that cannot be encoded is dropped with an error.
package exporter
