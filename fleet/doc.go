// Package fleet is the cluster's view of what every node's agent knows:
// the node facts each agent exports as Prometheus series
// (gpuaffinity_node_placement_info, gpuaffinity_node_layout_info and the
// pairing and RDMA series they summarise), gathered into plain Node
// values, and the files schedulers read made from them: Slurm's
// topology.conf (topology/tree and topology/block) and topology.yaml,
// Kubernetes node labels, and a consistency report of the nodes that
// differ from the other nodes of their model.
//
// The package does no I/O beyond the io.Writer it is given; package
// fleet/prom reads the nodes from a Prometheus server's HTTP API.
package fleet
