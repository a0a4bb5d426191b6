package topology

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
)

func ip(i int) *int { return &i }

// twoSocket is a 2-node machine: node 0 = CPUs 0-7, node 1 = 8-15, and a
// memory-only node 2 nearer node 1 (distance 12) than node 0 (30).
func twoSocket() Node {
	return Node{
		CPU: CPUInfo{Online: cpuset.Range(0, 15)},
		NUMANodes: []NUMANode{
			{ID: 0, CPUs: cpuset.Range(0, 7), Distances: []int{10, 21, 30}},
			{ID: 1, CPUs: cpuset.Range(8, 15), Distances: []int{21, 10, 12}},
			{ID: 2, Distances: []int{30, 12, 10}},
		},
	}
}

func TestResolveLocality(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gpu   GPU
		src   LocalitySource
		cpus  string
		node  *int
		warns []string // substrings of the one warning; nil: none
	}{
		{"numa_node", GPU{NUMANode: ip(1), LocalCPUs: cpuset.Range(8, 15), NVMLCPUAffinity: cpuset.Range(8, 15)},
			LocalityNUMANode, "8-15", ip(1), nil},
		{"numa_node, NVML says the other socket", GPU{NUMANode: ip(1), LocalCPUs: cpuset.Range(8, 15), NVMLCPUAffinity: cpuset.Range(0, 7)},
			LocalityNUMANode, "8-15", ip(1), []string{"sources disagree: using numa_node 1 (CPUs 8-15); nvml_cpu_affinity 0-7 (NUMA node 0)"}},
		{"memory-only numa_node", GPU{NUMANode: ip(2)},
			LocalityMemoryNode, "8-15", ip(1), []string{"numa_node 2 has no CPUs (memory-only)", "node 1 (distance 12)"}},
		{"-1, C2C memory node", GPU{GPUNUMAID: ip(2), LocalCPUs: cpuset.Range(0, 15)},
			LocalityGPUMemory, "8-15", ip(1), []string{"sources disagree", "gpu_numa_id 2", "local_cpulist 0-15 (NUMA nodes 0-1)"}},
		{"-1, NVML against local_cpulist", GPU{LocalCPUs: cpuset.Range(0, 15), NVMLCPUAffinity: cpuset.Range(0, 7)},
			LocalityNVML, "0-7", ip(0), []string{"sources disagree: using nvml_cpu_affinity 0-7 (NUMA node 0); local_cpulist 0-15 (NUMA nodes 0-1)"}},
		{"-1, local_cpulist alone", GPU{LocalCPUs: cpuset.Range(8, 15)},
			LocalityLocalCPUs, "8-15", ip(1), []string{"numa_node is -1; locality from local_cpulist 8-15 (NUMA node 1)"}},
		{"-1, every CPU", GPU{LocalCPUs: cpuset.Range(0, 15), NVMLCPUAffinity: cpuset.Range(0, 15)},
			LocalityNVML, "0-15", nil, []string{"numa_node is -1", "spans NUMA nodes 0-1", "no single NUMA node"}},
		{"nothing", GPU{}, LocalityNone, "", nil, []string{"no source gives its CPUs"}},
		{"numa_node of no node", GPU{NUMANode: ip(7), NVMLCPUAffinity: cpuset.Range(8, 15)},
			LocalityNVML, "8-15", ip(1), []string{"numa_node 7 names no NUMA node"}},
	} {
		n := twoSocket()
		tc.gpu.BusID = "0000:18:00.0"
		n.GPUs = []GPU{tc.gpu}
		warns := ResolveLocality(&n)
		loc := n.GPUs[0].Locality
		if loc.Source != tc.src || loc.CPUs.String() != tc.cpus || (loc.Node == nil) != (tc.node == nil) || (loc.Node != nil && *loc.Node != *tc.node) {
			t.Errorf("%s: locality %+v (node %v), want %s %q node %v", tc.name, loc, loc.Node, tc.src, tc.cpus, tc.node)
		}
		if tc.warns == nil && len(warns) != 0 {
			t.Errorf("%s: warnings %q, want none", tc.name, warns)
		}
		for _, w := range tc.warns {
			if !slices.ContainsFunc(warns, func(s string) bool { return strings.HasPrefix(s, "GPU 0 (0000:18:00.0): ") && strings.Contains(s, w) }) {
				t.Errorf("%s: no warning with %q in %q", tc.name, w, warns)
			}
		}
	}
	// One node with CPUs: nothing to say, nothing to warn about.
	n := Node{CPU: CPUInfo{Online: cpuset.Range(0, 3)}, NUMANodes: []NUMANode{{ID: 0, CPUs: cpuset.Range(0, 3)}},
		GPUs: []GPU{{BusID: "0000:00:06.0"}, {Index: 1, BusID: "0000:00:07.0", LocalCPUs: cpuset.Range(0, 3)}}}
	if w := ResolveLocality(&n); len(w) != 0 || n.GPUs[0].Locality.Source != LocalityOnlyNode || *n.GPUs[1].Locality.Node != 0 {
		t.Errorf("one-node VM: %+v %+v %q", n.GPUs[0].Locality, n.GPUs[1].Locality, w)
	}
	if got := n.GPUWarnings(n.GPUs[0]); got != nil {
		t.Errorf("GPUWarnings = %q", got)
	}
}
