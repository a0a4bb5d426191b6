package nodeview

// Node is one node of the fleet, as its agent's series describe it.
type Node struct {
	// Name is the node's name in the scheduler: the value of the label
	// the user names (hostname, node, instance without its port).
	Name string `json:"name"`
	// Target is the agent's scrape target, "<job>/<instance>": the key
	// the node's other series are joined on.
	Target string `json:"target"`
	// Model is the system model: the cloud instance type or shape where
	// DMI names one (AWS, OCI), else the VM's type from the metadata
	// service (GCP machine type, Azure VM size), else DMI's product name.
	Model string `json:"model"`
	// GPUModel is the model name most of the node's GPUs report.
	GPUModel string `json:"gpu_model"`
	// Cloud is platform's cloud name: aws, azure, gcp, oci, baremetal,
	// unknown.
	Cloud string `json:"cloud"`
	// Tiers are the network switches (or the cloud's groups of them)
	// above the node, tier 0 (the closest, the leaf) first; nil where
	// neither the cloud nor the site says. GCP [sub-block, block]; OCI
	// [local block, network block, HPC island]; a site's own names from
	// the agent's --placement.switches.
	Tiers []string `json:"tiers"`
	// HostID is the cloud's physical host ID (GCP physical_host's host,
	// OCI customerHostId); "" elsewhere.
	HostID string `json:"host_id"`
	// Clique is the node's NVLink clique in GPU Feature Discovery's form,
	// "<cluster_uuid>.<clique_id>"; "" outside a multi-node NVLink domain.
	Clique string `json:"clique"`
	// GPUMemoryFabric is OCI's customerGpuMemoryFabric; "" elsewhere.
	GPUMemoryFabric string `json:"gpu_memory_fabric"`
	// ChassisSerial, Slot and Tray are NVML's platform info of the node's
	// GPUs (Blackwell and newer): the rack and the compute tray's place
	// in it; "" where NVML does not say.
	ChassisSerial string `json:"chassis_serial"`
	Slot          string `json:"slot"`
	Tray          string `json:"tray"`
	// IMEXNodes is how many nodes the node's IMEX configuration lists
	// (its NVLink domain's size as the site configured it); 0 unknown.
	IMEXNodes int `json:"imex_nodes"`
	// Layout and Firmware are the agent's digests of the node's layout
	// (GPUs, GPU↔NIC pairs, NIC roles) and of its NIC firmware: nodes of
	// one model that are built alike have the same.
	Layout   string `json:"layout"`
	Firmware string `json:"firmware"`
	// Facts are the itemized facts the digests cover, sorted by Key, for
	// the report to say what differs. The fleet reader gives them to one
	// node of each variant (nodes of one group with the same digests,
	// and so the same facts); Consistency reads a variant's facts from
	// whichever of its nodes has them.
	Facts []Fact `json:"facts"`
	// Source says where the tiers came from, the placement series'
	// source label: "site", "gcp-metadata", "oci-imds"; "" where the
	// agent read none (no source, or its metadata service has not
	// answered yet).
	Source string `json:"source,omitempty"`
	// Stale is set on a node not scraped now whose placement is the one
	// its series last had within the reader's lookback (an agent
	// restarting, a missed scrape): it keeps its place, and is not
	// compared.
	Stale bool `json:"stale,omitempty"`
}

// PlacementEmpty reports whether n's placement says nothing: no tiers,
// host, clique or GPU memory fabric (an agent whose metadata service
// has not answered yet exports such a placement). Writers keep what an
// earlier run gave such a node, and never clear labels because of it.
func (n Node) PlacementEmpty() bool {
	return len(n.Tiers) == 0 && n.HostID == "" && n.Clique == "" && n.GPUMemoryFabric == ""
}

// Fact is one itemized fact of a node: "gpus" "8", "gpu3.model" "NVIDIA
// H100 80GB HBM3", "gpu3.nics" "mlx5_3 PIX", "nic.mlx5_3.role" "compute",
// "nic.mlx5_3.firmware" "28.39.1002".
type Fact struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Group is the key nodes are compared within: nodes of one system model
// and GPU model.
func (n Node) Group() string { return n.Model + " / " + n.GPUModel }

// Fact returns the value of fact key and whether the node has it.
func (n Node) Fact(key string) (string, bool) {
	for _, f := range n.Facts {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// Domain is the NVLink domain n's block is made of: "clique <clique>",
// else "gpu memory fabric <id>"; "" where it is in none.
func (n Node) Domain() string {
	switch {
	case n.Clique != "":
		return "clique " + n.Clique
	case n.GPUMemoryFabric != "":
		return "gpu memory fabric " + n.GPUMemoryFabric
	}
	return ""
}
