// Package placement reads where a cloud instance sits in its provider's
// network, from the instance metadata service the instance itself can
// reach, and returns it as plain data (a Placement value).
//
// Sources, one request per Read:
//
//   - GCP: GET <base>/computeMetadata/v1/instance/attributes/physical_host
//     with header "Metadata-Flavor: Google"; the value is
//     "/<block>/<subblock>/<host>". Google documents the attribute in
//     "Verify VM location" (https://cloud.google.com/compute/docs/instances/use-compact-placement-policies#verify-vm-location);
//     kubernetes-sigs/dranet pkg/cloudprovider/gce/gce.go reads it the same
//     way and splits it into block, sub-block and host; NVIDIA/topograph
//     pkg/providers/gcp/instance_topology.go (docs/providers/gcp.md, the
//     physicalHostTopology field of the Compute API) puts the host under
//     the second segment and that under the first.
//   - OCI: GET <base>/opc/v2/host/rdmaTopologyData with header
//     "Authorization: Bearer Oracle"; a JSON object with
//     customerHPCIslandId, customerNetworkBlock, customerLocalBlock,
//     customerHostId and, on GPU memory fabric shapes (GB200, GB300),
//     customerGpuMemoryFabric. NVIDIA/topograph docs/providers/oci.md names
//     the endpoint; its pkg/providers/oci/provider_imds.go maps Local Block
//     to the leaf (tier 0), Network Block to the spine (tier 1), HPC Island
//     to the top (tier 2) and the GPU memory fabric to the accelerator
//     (NVLink) domain. OguzPastirmaci/misc oke-topology-aware/README.md
//     shows the payload. IMDS serves it only for instances in a dedicated
//     capacity pool with capacity topology enabled.
//   - AWS: none on the node. Placement comes from DescribeInstanceTopology,
//     an EC2 API that needs IAM credentials
//     (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html).
//   - Azure: no public node-local or API source.
//
// ReadInstanceType reads the VM's own type where DMI names only the
// hypervisor: GCP's instance/machine-type, Azure IMDS's compute/vmSize
// (instance.go), under the same safety rules and error contract.
//
// Error contract (as cilium/ebpf features/doc.go):
//   - nil: the Placement is complete and every value passed validation.
//   - errors.Is(err, ErrNotAvailable): the service answered 404 (or an
//     empty topology object): this instance has no placement to read (not
//     in a dense/dedicated capacity pool, or the cloud does not expose it).
//     Conclusive.
//   - errors.Is(err, errors.ErrUnsupported): the cloud has no node-local
//     source (AWS, Azure). Conclusive.
//   - anything else: the read itself failed (timeout, refused redirect,
//     oversize or malformed body, hostile values). Not conclusive.
//
// Every error is wrapped with %w and names the cloud and the URL.
//
// Safety: requests go only to Options.BaseURL (default
// http://169.254.169.254, link-local), never through a proxy, with a
// short timeout (default 2s); redirects are followed only to the same
// scheme and host; bodies are read up to MaxBodyBytes; each value must be
// 1–MaxValueLen printable ASCII characters without spaces.
//
// Not to add here: metrics, labels, Slurm or Kubernetes renderings, retry
// loops or caching. Callers (agent, exporter) decide when to call Read,
// and never on the scrape path.
package placement
