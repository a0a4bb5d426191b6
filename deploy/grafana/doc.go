// Package grafana holds gpuaffinity's Grafana dashboard, gpuaffinity.json:
// one node's GPUs and NICs, GPU↔NIC alignment, NVLink and RDMA port
// health, the health gate's verdicts and the agent's own metrics, all
// read from the agent's /metrics (docs/metrics.md) through a Prometheus
// data source chosen by the dashboard's ${datasource} variable. README.md
// says how to import it.
//
// The tests decode the dashboard strictly and check its layout, then run
// the agent on two demo machines (dgx-h100 and dgx-h100-faults) under a
// real Prometheus and evaluate every panel query through Prometheus's
// HTTP API: each must parse and return data, and the panels that count
// faults must count the faults the fixture holds.
package grafana
