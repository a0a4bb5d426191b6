package binding

import "github.com/gpuaffinity/gpuaffinity/cpuset"

// Mode says how much of the machine a rank gets.
type Mode string

const (
	// ModeNode: every allowed CPU of the GPU's NUMA node (the SNC node
	// under sub-NUMA clustering).
	ModeNode Mode = "node"
	// ModeSocket: every allowed CPU of the GPU's socket.
	ModeSocket Mode = "socket"
	// ModeExclusive: the node's allowed physical cores split evenly among
	// its GPUs (and their ranks), whole cores with their SMT siblings,
	// contiguous, no CPU given to two ranks.
	ModeExclusive Mode = "exclusive"
)

// Options select the map.
type Options struct {
	Mode        Mode // default ModeExclusive
	RanksPerGPU int  // default 1
}

// Rank is one local rank's binding.
type Rank struct {
	Rank int `json:"rank"`
	GPU  int `json:"gpu"` // GPU index
	// Node is the NUMA node the GPU's CPUs come from: the GPU's own, the
	// nearest node with CPUs when its own is memory-only, or the one node
	// holding its CPU affinity when numa_node is -1; -1 when unknown.
	Node     int        `json:"node"`
	CPUs     cpuset.Set `json:"cpus"` // CPUs to run on; never outside the allowed set
	Mems     cpuset.Set `json:"mems"` // NUMA nodes for memory; empty when unknown
	Mode     Mode       `json:"mode"`
	Warnings []string   `json:"warnings"`
}

// Map is the binding of every local rank, in rank order (rank r drives GPU
// r / RanksPerGPU).
type Map struct {
	Schema      string `json:"schema"` // Schema
	Mode        Mode   `json:"mode"`
	RanksPerGPU int    `json:"ranks_per_gpu"`
	Ranks       []Rank `json:"ranks"`
	// Leftover is the allowed CPUs no rank got in exclusive mode (cores
	// that do not divide evenly, CPUs of nodes without GPUs).
	Leftover cpuset.Set `json:"leftover"`
	// Selection names the GPU list the ranks drive, in order
	// ("CUDA_VISIBLE_DEVICES=7,6"); "" for every GPU in index order.
	Selection string   `json:"selection,omitempty"`
	Warnings  []string `json:"warnings"`
}
