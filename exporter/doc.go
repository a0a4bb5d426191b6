// Package exporter will hold the Prometheus collectors that render a
// topology.Node and live counters as metrics. It is empty until the agent
// issue lands; the folder is part of the layout in DESIGN.md.
package exporter
