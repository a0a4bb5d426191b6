// Package cloudname declares, once, the names of the platforms a node
// runs on, as platform reads them from DMI and the model, agent, nccl,
// placement, exporter and fleet compare them.
//
// They live here, in a package with no imports, because both ends need
// them and neither may import the other: the sources (platform) never
// import topology, and topology does no I/O (platform reads DMI through
// internal/rootfs). platform's constants (platform.AWS, ...) and the
// model's typed ones (topology.CloudAWS, ...) are these; a name spelt
// out anywhere else fails TestOneDeclaration.
package cloudname

// The names, untyped so that platform's strings and topology.Cloud both
// take them. They are a contract: topology JSON's "cloud", the
// placement_info metric's cloud label and the agent's --placement
// values.
const (
	AWS       = "aws"
	Azure     = "azure"
	GCP       = "gcp"
	OCI       = "oci"
	BareMetal = "baremetal" // DMI readable, no cloud vendor
	Unknown   = "unknown"   // no DMI to read
)
