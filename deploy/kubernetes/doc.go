// Package kubernetes holds no code: its directory is the Kubernetes
// deployment of `gpuaffinity agent` (a kustomization of a DaemonSet,
// Service, ServiceMonitor and PrometheusRule; docs/operations.md; and
// jobs/, a kustomize Component that turns the agent's job audit on), and its
// tests decode every manifest strictly into the Kubernetes and
// prometheus-operator API types, check the facts the agent relies on, and
// run promtool on the alerting rules.
package kubernetes
