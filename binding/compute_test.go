package binding

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

var (
	nodeMu    sync.Mutex
	nodeCache = map[string]topology.Node{}
)

// fixture discovers machine name once per test binary; the returned Node
// is a copy the caller may change (slices are cloned where tests mutate).
func fixture(t *testing.T, name string) topology.Node {
	t.Helper()
	nodeMu.Lock()
	defer nodeMu.Unlock()
	if n, ok := nodeCache[name]; ok {
		return clone(n)
	}
	dir, err := os.MkdirTemp("", "binding-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := fakesys.BuildMachine(name, dir); err != nil {
		t.Fatal(err)
	}
	n, err := discover.Discover(discover.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	nodeCache[name] = n
	return clone(n)
}

func clone(n topology.Node) topology.Node {
	n.GPUs = slices.Clone(n.GPUs)
	n.NUMANodes = slices.Clone(n.NUMANodes)
	for i := range n.NUMANodes {
		n.NUMANodes[i].Distances = slices.Clone(n.NUMANodes[i].Distances)
	}
	n.CPU.Cores = slices.Clone(n.CPU.Cores)
	n.CPU.Sockets = slices.Clone(n.CPU.Sockets)
	return n
}

func intp(i int) *int { return &i }

// want is one rank's expected binding, written from the machine's layout.
type want struct {
	gpu  int
	cpus string
	mems string
}

func compute(t *testing.T, n topology.Node, mode Mode, k int) Map {
	t.Helper()
	m, err := Compute(n, Options{Mode: mode, RanksPerGPU: k})
	if err != nil {
		t.Fatalf("Compute(%s, K=%d): %v", mode, k, err)
	}
	return m
}

func check(t *testing.T, m Map, ws []want, leftover string) {
	t.Helper()
	if len(m.Ranks) != len(ws) {
		t.Fatalf("%d ranks, want %d:\n%s", len(m.Ranks), len(ws), dump(m))
	}
	for i, w := range ws {
		r := m.Ranks[i]
		if r.Rank != i || r.GPU != w.gpu || r.CPUs.String() != w.cpus || r.Mems.String() != w.mems {
			t.Errorf("rank %d: GPU %d cpus %q mems %q; want GPU %d cpus %q mems %q", i, r.GPU, r.CPUs, r.Mems, w.gpu, w.cpus, w.mems)
		}
	}
	if m.Mode == ModeExclusive && m.Leftover.String() != leftover {
		t.Errorf("leftover %q, want %q", m.Leftover, leftover)
	}
}

func dump(m Map) string {
	var b strings.Builder
	_ = WriteTable(&b, m)
	return b.String()
}

// per repeats one want for GPUs lo..hi.
func per(lo, hi int, cpus, mems string) []want {
	var out []want
	for g := lo; g <= hi; g++ {
		out = append(out, want{g, cpus, mems})
	}
	return out
}

func cat(ws ...[]want) []want { return slices.Concat(ws...) }

func hasWarning(m Map, subs ...string) bool {
	for _, w := range m.Warnings {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(w, s)
		}
		if ok {
			return true
		}
	}
	return false
}

// The expected maps below are worked out by hand from each spec's layout
// (CPU numbering: socket-major cores, SMT sibling of core c is c + total
// cores; node cpulists as the specs' comments give them).
func TestFixtureMaps(t *testing.T) {
	type modeWant struct {
		mode     Mode
		k        int
		ranks    []want
		leftover string
	}
	cases := []struct {
		name  string
		modes []modeWant
	}{
		{"dgx-h100", []modeWant{
			// node 0 = 0-55,112-167 (GPUs 0-3); node 1 = 56-111,168-223 (GPUs 4-7).
			{ModeNode, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			// 56 cores / 4 GPUs = 14 cores each, siblings +112.
			{ModeExclusive, 1, []want{
				{0, "0-13,112-125", "0"}, {1, "14-27,126-139", "0"}, {2, "28-41,140-153", "0"}, {3, "42-55,154-167", "0"},
				{4, "56-69,168-181", "1"}, {5, "70-83,182-195", "1"}, {6, "84-97,196-209", "1"}, {7, "98-111,210-223", "1"},
			}, ""},
		}},
		{"dgx-h100-faults", []modeWant{
			// dgx-h100 with faults; binding reads the PCI locality, so GPU 7
			// (NVML: lost, still on the bus at node 1) binds as there.
			{ModeNode, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeExclusive, 1, []want{
				{0, "0-13,112-125", "0"}, {1, "14-27,126-139", "0"}, {2, "28-41,140-153", "0"}, {3, "42-55,154-167", "0"},
				{4, "56-69,168-181", "1"}, {5, "70-83,182-195", "1"}, {6, "84-97,196-209", "1"}, {7, "98-111,210-223", "1"},
			}, ""},
		}},
		{"dgx-h100-numa-disagree", []modeWant{
			// GPU 0 reads numa_node -1 (local_cpulist every CPU); NVML's
			// affinity, node 0's CPUs, decides: the dgx-h100 map.
			{ModeNode, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeExclusive, 1, []want{
				{0, "0-13,112-125", "0"}, {1, "14-27,126-139", "0"}, {2, "28-41,140-153", "0"}, {3, "42-55,154-167", "0"},
				{4, "56-69,168-181", "1"}, {5, "70-83,182-195", "1"}, {6, "84-97,196-209", "1"}, {7, "98-111,210-223", "1"},
			}, ""},
		}},
		{"oci-bm-gpu-h100", []modeWant{
			// Same CPU layout as DGX H100 (8480+, siblings +112), 4 GPUs per node.
			{ModeNode, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeExclusive, 1, []want{
				{0, "0-13,112-125", "0"}, {1, "14-27,126-139", "0"}, {2, "28-41,140-153", "0"}, {3, "42-55,154-167", "0"},
				{4, "56-69,168-181", "1"}, {5, "70-83,182-195", "1"}, {6, "84-97,196-209", "1"}, {7, "98-111,210-223", "1"},
			}, ""},
		}},
		{"aws-p4d", []modeWant{
			// 2 x 24 cores, siblings +48: node 0 = 0-23,48-71, node 1 = 24-47,72-95.
			{ModeNode, 1, cat(per(0, 3, "0-23,48-71", "0"), per(4, 7, "24-47,72-95", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-23,48-71", "0"), per(4, 7, "24-47,72-95", "1")), ""},
			// 24 cores / 4 = 6 each.
			{ModeExclusive, 1, []want{
				{0, "0-5,48-53", "0"}, {1, "6-11,54-59", "0"}, {2, "12-17,60-65", "0"}, {3, "18-23,66-71", "0"},
				{4, "24-29,72-77", "1"}, {5, "30-35,78-83", "1"}, {6, "36-41,84-89", "1"}, {7, "42-47,90-95", "1"},
			}, ""},
		}},
		{"aws-p5", []modeWant{
			// 2 x 48 cores, siblings +96.
			{ModeNode, 1, cat(per(0, 3, "0-47,96-143", "0"), per(4, 7, "48-95,144-191", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-47,96-143", "0"), per(4, 7, "48-95,144-191", "1")), ""},
			// 48 cores / 4 = 12 each.
			{ModeExclusive, 1, []want{
				{0, "0-11,96-107", "0"}, {1, "12-23,108-119", "0"}, {2, "24-35,120-131", "0"}, {3, "36-47,132-143", "0"},
				{4, "48-59,144-155", "1"}, {5, "60-71,156-167", "1"}, {6, "72-83,168-179", "1"}, {7, "84-95,180-191", "1"},
			}, ""},
		}},
		{"azure-nd-h100-v5", []modeWant{
			// 96 vCPUs, no SMT: node 0 = 0-47, node 1 = 48-95.
			{ModeNode, 1, cat(per(0, 3, "0-47", "0"), per(4, 7, "48-95", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-47", "0"), per(4, 7, "48-95", "1")), ""},
			{ModeExclusive, 1, []want{
				{0, "0-11", "0"}, {1, "12-23", "0"}, {2, "24-35", "0"}, {3, "36-47", "0"},
				{4, "48-59", "1"}, {5, "60-71", "1"}, {6, "72-83", "1"}, {7, "84-95", "1"},
			}, ""},
		}},
		{"gcp-a3-mega", []modeWant{
			// 2 x 52 cores, siblings +104.
			{ModeNode, 1, cat(per(0, 3, "0-51,104-155", "0"), per(4, 7, "52-103,156-207", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-51,104-155", "0"), per(4, 7, "52-103,156-207", "1")), ""},
			// 52 cores / 4 = 13 each.
			{ModeExclusive, 1, []want{
				{0, "0-12,104-116", "0"}, {1, "13-25,117-129", "0"}, {2, "26-38,130-142", "0"}, {3, "39-51,143-155", "0"},
				{4, "52-64,156-168", "1"}, {5, "65-77,169-181", "1"}, {6, "78-90,182-194", "1"}, {7, "91-103,195-207", "1"},
			}, ""},
		}},
		{"grace-hopper", []modeWant{
			// 72 Neoverse V2 cores on node 0; GPU's PCI numa_node is 0, its HBM
			// (node 1) and nodes 2-8 are CPU-less and never CPU targets.
			{ModeNode, 1, per(0, 0, "0-71", "0"), ""},
			{ModeSocket, 1, per(0, 0, "0-71", "0"), ""},
			{ModeExclusive, 1, per(0, 0, "0-71", "0"), ""},
		}},
		{"gb200-nvl72-tray", []modeWant{
			// Two Graces, 72 cores each, no SMT: node 0 = 0-71 (GPUs 0,1 on
			// PCI numa_node 0), node 1 = 72-143 (GPUs 2,3). The GPUs' HBM
			// nodes (2, 10, 18, 26) and the empty nodes beside them are
			// CPU-less, never CPU or memory targets: a rank stays on its own
			// Grace and its memory.
			{ModeNode, 1, cat(per(0, 1, "0-71", "0"), per(2, 3, "72-143", "1")), ""},
			{ModeSocket, 1, cat(per(0, 1, "0-71", "0"), per(2, 3, "72-143", "1")), ""},
			// 72 cores / 2 GPUs = 36 each.
			{ModeExclusive, 1, []want{{0, "0-35", "0"}, {1, "36-71", "0"}, {2, "72-107", "1"}, {3, "108-143", "1"}}, ""},
		}},
		{"h200-vm", []modeWant{
			// One node with CPUs 0-15; the GPU reads numa_node -1 and NVML's
			// affinity 0-15, which node 0 alone holds.
			{ModeNode, 1, per(0, 0, "0-15", "0"), ""},
			{ModeSocket, 1, per(0, 0, "0-15", "0"), ""},
			{ModeExclusive, 1, per(0, 0, "0-15", "0"), ""},
		}},
		{"smt-off-2s", []modeWant{
			// SMT off: node 0 = 0-31 (GPUs 0,1), node 1 = 32-63 (GPUs 2,3).
			{ModeNode, 1, cat(per(0, 1, "0-31", "0"), per(2, 3, "32-63", "1")), ""},
			{ModeSocket, 1, cat(per(0, 1, "0-31", "0"), per(2, 3, "32-63", "1")), ""},
			// 32 cores / 2 = 16 each, no siblings.
			{ModeExclusive, 1, []want{{0, "0-15", "0"}, {1, "16-31", "0"}, {2, "32-47", "1"}, {3, "48-63", "1"}}, ""},
			// 4 ranks per GPU: 32 cores / 8 = 4 each.
			{ModeExclusive, 4, []want{
				{0, "0-3", "0"}, {0, "4-7", "0"}, {0, "8-11", "0"}, {0, "12-15", "0"},
				{1, "16-19", "0"}, {1, "20-23", "0"}, {1, "24-27", "0"}, {1, "28-31", "0"},
				{2, "32-35", "1"}, {2, "36-39", "1"}, {2, "40-43", "1"}, {2, "44-47", "1"},
				{3, "48-51", "1"}, {3, "52-55", "1"}, {3, "56-59", "1"}, {3, "60-63", "1"},
			}, ""},
		}},
		{"snc2-2s", []modeWant{
			// SNC2: node 0 = 0-23,96-119, node 1 = 24-47,120-143 (socket 0);
			// node 2 = 48-71,144-167, node 3 = 72-95,168-191 (socket 1); two
			// GPUs per node in index order. node = the SNC node.
			{ModeNode, 1, cat(per(0, 1, "0-23,96-119", "0"), per(2, 3, "24-47,120-143", "1"),
				per(4, 5, "48-71,144-167", "2"), per(6, 7, "72-95,168-191", "3")), ""},
			// socket = the whole socket, memory on both of its nodes.
			{ModeSocket, 1, cat(per(0, 3, "0-47,96-143", "0-1"), per(4, 7, "48-95,144-191", "2-3")), ""},
			// 24 cores / 2 GPUs = 12 each.
			{ModeExclusive, 1, []want{
				{0, "0-11,96-107", "0"}, {1, "12-23,108-119", "0"}, {2, "24-35,120-131", "1"}, {3, "36-47,132-143", "1"},
				{4, "48-59,144-155", "2"}, {5, "60-71,156-167", "2"}, {6, "72-83,168-179", "3"}, {7, "84-95,180-191", "3"},
			}, ""},
		}},
		{"cgroup-half", []modeWant{
			// Allowed 0-55 = node 0's first threads only. GPUs 0-3 (node 0) get
			// node 0 ∩ allowed; GPUs 4-7 (node 1) have no allowed CPU and fall
			// back to the allowed set (memory where those CPUs are: node 0).
			{ModeNode, 1, cat(per(0, 3, "0-55", "0"), per(4, 7, "0-55", "0")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-55", "0"), per(4, 7, "0-55", "0")), ""},
			// Exclusive: GPUs 4-7 take their share from node 0 (the nearest
			// with allowed cores), so 56 allowed cores (one thread each) are
			// split 8 ways, 7 each; never a sibling 112-167.
			{ModeExclusive, 1, []want{
				{0, "0-6", "0"}, {1, "7-13", "0"}, {2, "14-20", "0"}, {3, "21-27", "0"},
				{4, "28-34", "0"}, {5, "35-41", "0"}, {6, "42-48", "0"}, {7, "49-55", "0"},
			}, ""},
		}},
		{"unequal-nodes", []modeWant{
			// 2 x 32 cores, siblings +64: node 0 = 0-31,64-95 (GPUs 0-5),
			// node 1 = 32-63,96-127 (GPUs 6, 7).
			{ModeNode, 1, cat(per(0, 5, "0-31,64-95", "0"), per(6, 7, "32-63,96-127", "1")), ""},
			{ModeSocket, 1, cat(per(0, 5, "0-31,64-95", "0"), per(6, 7, "32-63,96-127", "1")), ""},
			// node 0: 32 cores / 6 = 5 each, cores 30, 31 left over;
			// node 1: 32 / 2 = 16 each.
			{ModeExclusive, 1, []want{
				{0, "0-4,64-68", "0"}, {1, "5-9,69-73", "0"}, {2, "10-14,74-78", "0"},
				{3, "15-19,79-83", "0"}, {4, "20-24,84-88", "0"}, {5, "25-29,89-93", "0"},
				{6, "32-47,96-111", "1"}, {7, "48-63,112-127", "1"},
			}, "30-31,94-95"},
		}},
		{"aws-p6-b200", []modeWant{
			// 2 x 48 cores, siblings +96: node 0 = 0-47,96-143 (GPUs 0-3 on
			// switches 44 and 55), node 1 = 48-95,144-191 (GPUs 4-7).
			{ModeNode, 1, cat(per(0, 3, "0-47,96-143", "0"), per(4, 7, "48-95,144-191", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-47,96-143", "0"), per(4, 7, "48-95,144-191", "1")), ""},
			// 48 cores / 4 = 12 each.
			{ModeExclusive, 1, []want{
				{0, "0-11,96-107", "0"}, {1, "12-23,108-119", "0"}, {2, "24-35,120-131", "0"}, {3, "36-47,132-143", "0"},
				{4, "48-59,144-155", "1"}, {5, "60-71,156-167", "1"}, {6, "72-83,168-179", "1"}, {7, "84-95,180-191", "1"},
			}, ""},
		}},
		{"dgx-b200", []modeWant{
			// 2 x Xeon 8570, 56 cores, siblings +112: node 0 = 0-55,112-167
			// (GPUs 0-3), node 1 = 56-111,168-223 (GPUs 4-7).
			{ModeNode, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			// 56 cores / 4 GPUs = 14 each.
			{ModeExclusive, 1, []want{
				{0, "0-13,112-125", "0"}, {1, "14-27,126-139", "0"}, {2, "28-41,140-153", "0"}, {3, "42-55,154-167", "0"},
				{4, "56-69,168-181", "1"}, {5, "70-83,182-195", "1"}, {6, "84-97,196-209", "1"}, {7, "98-111,210-223", "1"},
			}, ""},
		}},
		{"dgx-b300", []modeWant{
			// 2 x Xeon 6776P, 64 cores, siblings +128: node 0 = 0-63,128-191
			// (GPUs 0-3), node 1 = 64-127,192-255 (GPUs 4-7), the CPU
			// affinity column of B300 nodes' nvidia-smi topo -m (DeepEP#590).
			{ModeNode, 1, cat(per(0, 3, "0-63,128-191", "0"), per(4, 7, "64-127,192-255", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-63,128-191", "0"), per(4, 7, "64-127,192-255", "1")), ""},
			// 64 cores / 4 GPUs = 16 each.
			{ModeExclusive, 1, []want{
				{0, "0-15,128-143", "0"}, {1, "16-31,144-159", "0"}, {2, "32-47,160-175", "0"}, {3, "48-63,176-191", "0"},
				{4, "64-79,192-207", "1"}, {5, "80-95,208-223", "1"}, {6, "96-111,224-239", "1"}, {7, "112-127,240-255", "1"},
			}, ""},
		}},
		{"gcp-a3-ultragpu", []modeWant{
			// 2 x 56 cores, siblings +112: node 0 = 0-55,112-167 (GPUs 0-3 on
			// roots 8c and 93), node 1 = 56-111,168-223 (GPUs 4-7).
			{ModeNode, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			// 56 cores / 4 = 14 each.
			{ModeExclusive, 1, []want{
				{0, "0-13,112-125", "0"}, {1, "14-27,126-139", "0"}, {2, "28-41,140-153", "0"}, {3, "42-55,154-167", "0"},
				{4, "56-69,168-181", "1"}, {5, "70-83,182-195", "1"}, {6, "84-97,196-209", "1"}, {7, "98-111,210-223", "1"},
			}, ""},
		}},
		{"amd-mi300x", []modeWant{
			// 2 x EPYC 9654, 96 cores, siblings +192: node 0 = 0-95,192-287
			// (GPUs 0-3, AMD's topology-mapping.md: CPU 0), node 1 =
			// 96-191,288-383 (GPUs 4-7).
			{ModeNode, 1, cat(per(0, 3, "0-95,192-287", "0"), per(4, 7, "96-191,288-383", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-95,192-287", "0"), per(4, 7, "96-191,288-383", "1")), ""},
			// 96 cores / 4 GPUs = 24 each.
			{ModeExclusive, 1, []want{
				{0, "0-23,192-215", "0"}, {1, "24-47,216-239", "0"}, {2, "48-71,240-263", "0"}, {3, "72-95,264-287", "0"},
				{4, "96-119,288-311", "1"}, {5, "120-143,312-335", "1"}, {6, "144-167,336-359", "1"}, {7, "168-191,360-383", "1"},
			}, ""},
		}},
		{"amd-mi355x", []modeWant{
			// 2 x EPYC 9575F, 64 cores, siblings +128: node 0 =
			// 0-63,128-191 (GPUs 0-3), node 1 = 64-127,192-255 (GPUs 4-7).
			{ModeNode, 1, cat(per(0, 3, "0-63,128-191", "0"), per(4, 7, "64-127,192-255", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-63,128-191", "0"), per(4, 7, "64-127,192-255", "1")), ""},
			// 64 cores / 4 GPUs = 16 each.
			{ModeExclusive, 1, []want{
				{0, "0-15,128-143", "0"}, {1, "16-31,144-159", "0"}, {2, "32-47,160-175", "0"}, {3, "48-63,176-191", "0"},
				{4, "64-79,192-207", "1"}, {5, "80-95,208-223", "1"}, {6, "96-111,224-239", "1"}, {7, "112-127,240-255", "1"},
			}, ""},
		}},
		{"azure-nd-mi300x-v5", []modeWant{
			// ND MI300X v5: 96 vCPUs, SMT off, 2 x 48 (Azure's NHC
			// check_hw_cpuinfo 2 96 96; RCCL's VM model's NUMA masks):
			// node 0 = 0-47 (GPUs 0-3), node 1 = 48-95 (GPUs 4-7).
			{ModeNode, 1, cat(per(0, 3, "0-47", "0"), per(4, 7, "48-95", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-47", "0"), per(4, 7, "48-95", "1")), ""},
			// 48 cores / 4 = 12 each.
			{ModeExclusive, 1, []want{
				{0, "0-11", "0"}, {1, "12-23", "0"}, {2, "24-35", "0"}, {3, "36-47", "0"},
				{4, "48-59", "1"}, {5, "60-71", "1"}, {6, "72-83", "1"}, {7, "84-95", "1"},
			}, ""},
		}},
		{"oci-bm-gpu-mi300x", []modeWant{
			// BM.GPU.MI300X.8: 2 x Xeon 8480+ (56 cores), SMT, siblings
			// +112: node 0 = 0-55,112-167 (GPUs 0-3), node 1 =
			// 56-111,168-223 (GPUs 4-7).
			{ModeNode, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			{ModeSocket, 1, cat(per(0, 3, "0-55,112-167", "0"), per(4, 7, "56-111,168-223", "1")), ""},
			// 56 cores / 4 = 14 each.
			{ModeExclusive, 1, []want{
				{0, "0-13,112-125", "0"}, {1, "14-27,126-139", "0"}, {2, "28-41,140-153", "0"}, {3, "42-55,154-167", "0"},
				{4, "56-69,168-181", "1"}, {5, "70-83,182-195", "1"}, {6, "84-97,196-209", "1"}, {7, "98-111,210-223", "1"},
			}, ""},
		}},
		{"mixed-h100-mi210", []modeWant{
			// 1 x EPYC 9354, 32 cores, siblings +32, one NUMA node: the H100
			// (GPU 0) and the MI210 (GPU 1) share CPUs 0-63.
			{ModeNode, 1, per(0, 1, "0-63", "0"), ""},
			{ModeSocket, 1, per(0, 1, "0-63", "0"), ""},
			// 32 cores / 2 = 16 each.
			{ModeExclusive, 1, []want{{0, "0-15,32-47", "0"}, {1, "16-31,48-63", "0"}}, ""},
		}},
		{"numa-unknown-2s", []modeWant{
			// node 0 = 0-15,32-47 (GPUs 0,1), node 1 = 16-31,48-63 (GPU 2);
			// GPU 3 has numa_node -1 and NVML affinity 0-63 (both nodes): it
			// gets that affinity, no memory node.
			{ModeNode, 1, cat(per(0, 1, "0-15,32-47", "0"), per(2, 2, "16-31,48-63", "1"), per(3, 3, "0-63", "")), ""},
			{ModeSocket, 1, cat(per(0, 1, "0-15,32-47", "0"), per(2, 2, "16-31,48-63", "1"), per(3, 3, "0-63", "")), ""},
			// Exclusive: GPU 3 joins node 1 (16 cores for 2 ranks beats 16 for
			// 3), 8 cores each everywhere; its memory node is the one its CPUs
			// are on.
			{ModeExclusive, 1, []want{
				{0, "0-7,32-39", "0"}, {1, "8-15,40-47", "0"}, {2, "16-23,48-55", "1"}, {3, "24-31,56-63", "1"},
			}, ""},
		}},
	}
	// Variants change NICs or storage only: their maps are their base's.
	variants := map[string]string{
		"dgx-h100-ib-storage": "dgx-h100",
		"dgx-h100-gds":        "dgx-h100", "dgx-h100-acs": "dgx-h100",
		"oci-bm-gpu-h100-port-down": "oci-bm-gpu-h100", "snc2-2s-nic-absent": "snc2-2s",
		// A fabric registration and IMEX fault: CPUs and PCI unchanged.
		"gb200-nvl72-fabric-failed": "gb200-nvl72-tray",
		// GB300: the GB200 tray's two Graces, NUMA nodes and GPU PCI
		// numa_nodes; only the PCIe tree below the root ports differs.
		"gb300-nvl72-tray": "gb200-nvl72-tray",
		// NVML not found: GPU locality from the PCI numa_node, the same.
		"gb200-nvl72-tray-no-nvml": "gb200-nvl72-tray",
		// RoCE LAG: the NICs differ, CPUs and GPUs are dgx-b300's.
		"b300-roce-lag": "dgx-b300",
		// AMD: other NICs (Pollara), or GPU faults on the same CPUs.
		"amd-mi300x-pollara": "amd-mi300x", "amd-mi300x-faults": "amd-mi300x",
		// CPX: the same GPUs and CPUs; the map at K ranks per GPU is
		// amd-mi300x's (the commands pick K = 8 there, cpumap tests).
		"amd-mi300x-cpx": "amd-mi300x",
	}
	for v, base := range variants {
		for _, c := range cases {
			if c.name == base {
				cases = append(cases, struct {
					name  string
					modes []modeWant
				}{v, c.modes})
				break
			}
		}
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			n := fixture(t, c.name)
			for _, mw := range c.modes {
				t.Run(fmt.Sprintf("%s-K%d", mw.mode, mw.k), func(t *testing.T) {
					m := compute(t, n, mw.mode, mw.k)
					check(t, m, mw.ranks, mw.leftover)
					if m.Mode != mw.mode || m.RanksPerGPU != mw.k || m.Schema != Schema {
						t.Errorf("map mode %q K %d schema %q", m.Mode, m.RanksPerGPU, m.Schema)
					}
					for _, r := range m.Ranks {
						if r.Mode != mw.mode {
							t.Errorf("rank %d mode %q", r.Rank, r.Mode)
						}
					}
				})
			}
		})
	}
	for _, name := range fakesys.Machines() {
		if !seen[name] {
			t.Errorf("fixture %s has no expected binding map here", name)
		}
	}
}

// TestFourRanksPerGPU: DGX H100 and AWS p4d with 4 ranks per GPU.
func TestFourRanksPerGPU(t *testing.T) {
	t.Run("dgx-h100", func(t *testing.T) {
		n := fixture(t, "dgx-h100")
		// node/socket: the 4 ranks of a GPU share its node.
		check(t, compute(t, n, ModeNode, 4), cat(
			per(0, 0, "0-55,112-167", "0"), per(0, 0, "0-55,112-167", "0"), per(0, 0, "0-55,112-167", "0"), per(0, 0, "0-55,112-167", "0"),
			per(1, 1, "0-55,112-167", "0"), per(1, 1, "0-55,112-167", "0"), per(1, 1, "0-55,112-167", "0"), per(1, 1, "0-55,112-167", "0"),
			per(2, 2, "0-55,112-167", "0"), per(2, 2, "0-55,112-167", "0"), per(2, 2, "0-55,112-167", "0"), per(2, 2, "0-55,112-167", "0"),
			per(3, 3, "0-55,112-167", "0"), per(3, 3, "0-55,112-167", "0"), per(3, 3, "0-55,112-167", "0"), per(3, 3, "0-55,112-167", "0"),
			per(4, 4, "56-111,168-223", "1"), per(4, 4, "56-111,168-223", "1"), per(4, 4, "56-111,168-223", "1"), per(4, 4, "56-111,168-223", "1"),
			per(5, 5, "56-111,168-223", "1"), per(5, 5, "56-111,168-223", "1"), per(5, 5, "56-111,168-223", "1"), per(5, 5, "56-111,168-223", "1"),
			per(6, 6, "56-111,168-223", "1"), per(6, 6, "56-111,168-223", "1"), per(6, 6, "56-111,168-223", "1"), per(6, 6, "56-111,168-223", "1"),
			per(7, 7, "56-111,168-223", "1"), per(7, 7, "56-111,168-223", "1"), per(7, 7, "56-111,168-223", "1"), per(7, 7, "56-111,168-223", "1"),
		), "")
		// exclusive: 16 ranks per node, 56 cores / 16 = 3 each, 8 cores over.
		// Rank r < 16 gets cores 3r..3r+2 and siblings 112+3r..; rank 16+j
		// gets cores 56+3j.. and siblings 168+3j..
		var ws []want
		for r := range 32 {
			lo, sib, mems := 3*r, 112+3*r, "0"
			if r >= 16 {
				j := r - 16
				lo, sib, mems = 56+3*j, 168+3*j, "1"
			}
			ws = append(ws, want{r / 4, fmt.Sprintf("%d-%d,%d-%d", lo, lo+2, sib, sib+2), mems})
		}
		// Spot checks of the formula, by hand.
		if ws[0].cpus != "0-2,112-114" || ws[5].cpus != "15-17,127-129" || ws[15].cpus != "45-47,157-159" || ws[31].cpus != "101-103,213-215" {
			t.Fatalf("expected-map formula is off: %v", ws)
		}
		m := compute(t, n, ModeExclusive, 4)
		check(t, m, ws, "48-55,104-111,160-167,216-223")
		if !hasWarning(m, "node 0", "56 allowed cores", "16 ranks", "8 cores left over", "48-55,160-167") {
			t.Errorf("no leftover warning for node 0: %q", m.Warnings)
		}
	})
	t.Run("aws-p4d", func(t *testing.T) {
		n := fixture(t, "aws-p4d")
		// 24 cores / 16 ranks = 1 core each (with its sibling +48), 8 over.
		var ws []want
		for r := range 32 {
			c, mems := r, "0"
			if r >= 16 {
				c, mems = 24+r-16, "1"
			}
			ws = append(ws, want{r / 4, fmt.Sprintf("%d,%d", c, c+48), mems})
		}
		if ws[0].cpus != "0,48" || ws[17].cpus != "25,73" {
			t.Fatalf("expected-map formula is off: %v", ws)
		}
		check(t, compute(t, n, ModeExclusive, 4), ws, "16-23,40-47,64-71,88-95")
	})
	t.Run("snc2-2s", func(t *testing.T) {
		n := fixture(t, "snc2-2s")
		// 24 cores per SNC node / 8 ranks = 3 each, none over.
		m := compute(t, n, ModeExclusive, 4)
		if len(m.Ranks) != 32 || m.Ranks[0].CPUs.String() != "0-2,96-98" || m.Ranks[7].CPUs.String() != "21-23,117-119" ||
			m.Ranks[8].CPUs.String() != "24-26,120-122" || m.Ranks[31].CPUs.String() != "93-95,189-191" || m.Ranks[31].Mems.String() != "3" {
			t.Errorf("snc2 K=4:\n%s", dump(m))
		}
		if !m.Leftover.IsEmpty() {
			t.Errorf("leftover %s", m.Leftover)
		}
	})
}

// TestNoGPU: a node without a GPU has nothing to bind next to, and every
// mode says so.
func TestNoGPU(t *testing.T) {
	n := fixture(t, "amd-mi300x")
	n.GPUs, n.Pairs, n.Paths, n.GPUPaths = nil, nil, nil, nil
	for _, mode := range []Mode{ModeNode, ModeSocket, ModeExclusive} {
		if _, err := Compute(n, Options{Mode: mode, RanksPerGPU: 1}); err == nil || !strings.Contains(err.Error(), "no GPUs") {
			t.Errorf("%s: err %v, want no GPUs", mode, err)
		}
	}
	// Where the root has no PCI bus, the error says no GPU could be seen,
	// not that the node has none.
	n.NoPCIBus = true
	if _, err := Compute(n, Options{RanksPerGPU: 1}); !errors.Is(err, ErrNoGPUs) || !strings.Contains(err.Error(), "no PCI bus in sysfs") {
		t.Errorf("no PCI bus: err %v", err)
	}
}

// TestInvariants: for every fixture, mode and a few K, no rank has a CPU
// outside the allowed set; in exclusive mode no CPU goes to two ranks and
// ranks plus leftover are exactly the allowed CPUs.
func TestInvariants(t *testing.T) {
	for _, name := range fakesys.Machines() {
		n := fixture(t, name)
		if len(n.GPUs) == 0 {
			t.Errorf("%s has no GPU: TestNoGPU covers that", name)
			continue
		}
		usable := n.CPU.Allowed.Intersect(n.CPU.Online)
		for _, mode := range []Mode{ModeNode, ModeSocket, ModeExclusive} {
			for _, k := range []int{1, 2, 3} {
				m, err := Compute(n, Options{Mode: mode, RanksPerGPU: k})
				if err != nil {
					t.Errorf("%s %s K=%d: %v", name, mode, k, err)
					continue
				}
				if len(m.Ranks) != len(n.GPUs)*k {
					t.Errorf("%s %s K=%d: %d ranks", name, mode, k, len(m.Ranks))
				}
				var all cpuset.Set
				for i, r := range m.Ranks {
					if r.Rank != i || r.GPU != i/k {
						t.Errorf("%s %s K=%d: rank %d is %d on GPU %d", name, mode, k, i, r.Rank, r.GPU)
					}
					if r.CPUs.IsEmpty() || !r.CPUs.Difference(usable).IsEmpty() {
						t.Errorf("%s %s K=%d: rank %d CPUs %s outside allowed %s", name, mode, k, i, r.CPUs, usable)
					}
					if mode == ModeExclusive && !all.Intersect(r.CPUs).IsEmpty() {
						t.Errorf("%s exclusive K=%d: rank %d CPUs %s given twice", name, k, i, r.CPUs.Intersect(all))
					}
					all = all.Union(r.CPUs)
					// Whole cores: an allowed sibling of a rank's CPU is the rank's.
					if mode == ModeExclusive {
						for _, co := range n.CPU.Cores {
							if !co.CPUs.Intersect(r.CPUs).IsEmpty() && !co.CPUs.Intersect(usable).Difference(r.CPUs).IsEmpty() {
								t.Errorf("%s exclusive K=%d: rank %d splits core %s", name, k, i, co.CPUs)
							}
						}
					}
				}
				if mode == ModeExclusive && !all.Union(m.Leftover).Equal(usable) {
					t.Errorf("%s exclusive K=%d: ranks %s + leftover %s != allowed %s", name, k, all, m.Leftover, usable)
				}
			}
		}
	}
}

func TestBadOptions(t *testing.T) {
	n := fixture(t, "dgx-h100")
	for _, o := range []Options{{Mode: "bogus"}, {Mode: "Node"}, {RanksPerGPU: -1}} {
		if _, err := Compute(n, o); !errors.Is(err, ErrOptions) {
			t.Errorf("Compute(%+v) = %v, want ErrOptions", o, err)
		}
	}
	// The zero Options mean exclusive, one rank per GPU.
	m, err := Compute(n, Options{})
	if err != nil || m.Mode != ModeExclusive || m.RanksPerGPU != 1 || len(m.Ranks) != 8 {
		t.Errorf("zero options: %v, %+v", err, m)
	}
}

func TestNoGPUs(t *testing.T) {
	n := fixture(t, "dgx-h100")
	n.GPUs = nil
	if _, err := Compute(n, Options{}); !errors.Is(err, ErrNoGPUs) {
		t.Errorf("err = %v, want ErrNoGPUs", err)
	}
}

func TestEmptyAllowedSet(t *testing.T) {
	n := fixture(t, "dgx-h100")
	n.CPU.Allowed = cpuset.Set{}
	_, err := Compute(n, Options{Mode: ModeNode})
	if !errors.Is(err, ErrNoAllowedCPUs) || !strings.Contains(err.Error(), "Cpus_allowed_list is empty") {
		t.Errorf("err = %v, want ErrNoAllowedCPUs", err)
	}
	// Every allowed CPU offline: nothing left to bind to either.
	n = fixture(t, "dgx-h100")
	n.CPU.Allowed = cpuset.Of(5, 6)
	n.CPU.Offline = cpuset.Of(5, 6)
	n.CPU.Online = cpuset.Range(0, 223).Difference(n.CPU.Offline)
	if _, err := Compute(n, Options{}); !errors.Is(err, ErrNoAllowedCPUs) {
		t.Errorf("err = %v, want ErrNoAllowedCPUs", err)
	}
}

func TestMoreRanksThanCores(t *testing.T) {
	// smt-off-2s: 32 cores (= 32 CPUs) per node, 2 GPUs per node; 17 ranks
	// per GPU is 34 ranks for 32 CPUs: no fallback.
	n := fixture(t, "smt-off-2s")
	_, err := Compute(n, Options{RanksPerGPU: 17})
	if !errors.Is(err, ErrTooManyRanks) || !strings.Contains(err.Error(), "node 0") || !strings.Contains(err.Error(), "34 ranks") {
		t.Errorf("err = %v, want ErrTooManyRanks on node 0 with 34 ranks", err)
	}
	// node mode shares CPUs: any K works.
	if _, err := Compute(n, Options{Mode: ModeNode, RanksPerGPU: 17}); err != nil {
		t.Errorf("node mode K=17: %v", err)
	}
	// DGX H100: 15 ranks per GPU = 60 ranks for 56 cores but 112 threads:
	// the threads are split instead, core by core (0,112,1,113,...), one
	// each; 52 threads over.
	n = fixture(t, "dgx-h100")
	m, err := Compute(n, Options{RanksPerGPU: 15})
	if err != nil {
		t.Fatal(err)
	}
	for r, cpus := range map[int]string{0: "0", 1: "112", 2: "1", 3: "113", 59: "141", 60: "56", 61: "168"} {
		if got := m.Ranks[r].CPUs.String(); got != cpus {
			t.Errorf("rank %d: %s, want %s", r, got, cpus)
		}
	}
	if !hasWarning(m, "node 0", "60 ranks", "56 allowed cores", "hardware threads") {
		t.Errorf("no thread-split warning: %q", m.Warnings)
	}
	if got := m.Leftover.String(); got != "30-55,86-111,142-167,198-223" {
		t.Errorf("leftover %s", got)
	}
}

// TestRanksPerGPUBound: a K beyond the usable CPUs is refused before any
// rank is made (10,000,000 per GPU used to run the process out of memory).
func TestRanksPerGPUBound(t *testing.T) {
	n := fixture(t, "dgx-h100") // 224 usable CPUs
	for _, k := range []int{10_000_000, math.MaxInt, 225} {
		if _, err := Compute(n, Options{RanksPerGPU: k}); !errors.Is(err, ErrTooManyRanks) || !strings.Contains(err.Error(), "224 usable CPUs") {
			t.Errorf("exclusive K=%d: %v, want ErrTooManyRanks", k, err)
		}
		for _, mode := range []Mode{ModeNode, ModeSocket} {
			if _, err := Compute(n, Options{Mode: mode, RanksPerGPU: k}); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "more than the 224 usable CPUs") {
				t.Errorf("%s K=%d: %v, want ErrOptions", mode, k, err)
			}
		}
	}
	// As many ranks per GPU as usable CPUs still share them.
	if m, err := Compute(n, Options{Mode: ModeNode, RanksPerGPU: 224}); err != nil || len(m.Ranks) != 8*224 {
		t.Errorf("node K=224: %v, %d ranks", err, len(m.Ranks))
	}
}

func TestRankBeyondGPUCount(t *testing.T) {
	n := fixture(t, "dgx-h100")
	m := compute(t, n, ModeExclusive, 1)
	all := topology.AllGPUs(n)
	for _, r := range []int{8, 100, -1} {
		if _, err := m.ForRank(n, all, r); !errors.Is(err, ErrNoRank) {
			t.Errorf("ForRank(%d) = %v, want ErrNoRank", r, err)
		}
		if _, err := m.Only(n, all, r); !errors.Is(err, ErrNoRank) {
			t.Errorf("Only(%d) = %v, want ErrNoRank", r, err)
		}
	}
	r, err := m.ForRank(n, all, 7)
	if err != nil || r.GPU != 7 || r.CPUs.String() != "98-111,210-223" {
		t.Errorf("ForRank(7) = %+v, %v", r, err)
	}
	one, err := m.Only(n, all, 3)
	if err != nil || len(one.Ranks) != 1 || one.Ranks[0].Rank != 3 {
		t.Errorf("Only(3) = %+v, %v", one, err)
	}
}

// TestOfflineCPUsInCpulist: a node cpulist (and core list, and allowed
// list) naming CPUs that are offline — as a hand-edited snapshot may.
func TestOfflineCPUsInCpulist(t *testing.T) {
	n := fixture(t, "dgx-h100")
	n.CPU.Offline = cpuset.Of(5, 117) // core 5 of socket 0, both threads
	n.CPU.Online = cpuset.Range(0, 223).Difference(n.CPU.Offline)
	// NUMANodes[0].CPUs, CPU.Allowed and CPU.Cores still name 5 and 117.
	m := compute(t, n, ModeExclusive, 1)
	if !hasWarning(m, "NUMA node 0 lists offline CPUs 5,117") || !hasWarning(m, "allowed CPUs 5,117 are offline") {
		t.Errorf("warnings %q", m.Warnings)
	}
	// Node 0 keeps 55 cores (0-4, 6-55): 13 each, cores 53-55 over.
	check(t, m, []want{
		{0, "0-4,6-13,112-116,118-125", "0"}, {1, "14-26,126-138", "0"}, {2, "27-39,139-151", "0"}, {3, "40-52,152-164", "0"},
		{4, "56-69,168-181", "1"}, {5, "70-83,182-195", "1"}, {6, "84-97,196-209", "1"}, {7, "98-111,210-223", "1"},
	}, "53-55,165-167")
	m = compute(t, n, ModeNode, 1)
	if got := m.Ranks[0].CPUs.String(); got != "0-4,6-55,112-116,118-167" {
		t.Errorf("node mode rank 0: %s", got)
	}
}

// relocate resolves the GPUs' locality again after a test edited the
// node, as discovery does.
func relocate(n *topology.Node) {
	n.Warnings = append(n.Warnings, topology.ResolveLocality(n)...)
}

// TestMemoryOnlyNode: a GPU whose PCI numa_node is a CPU-less node gets
// the nearest node with CPUs by the distance table.
func TestMemoryOnlyNode(t *testing.T) {
	// Grace-Hopper: pretend the GPU reads its HBM node 1 (distance 80 to
	// node 0, the only node with CPUs).
	n := fixture(t, "grace-hopper")
	n.GPUs[0].NUMANode = intp(1)
	relocate(&n)
	for _, mode := range []Mode{ModeNode, ModeSocket, ModeExclusive} {
		m := compute(t, n, mode, 1)
		check(t, m, per(0, 0, "0-71", "0"), "")
		if m.Ranks[0].Node != 0 || !hasWarning(m, "GPU 0 (", "numa_node 1 has no CPUs (memory-only)", "node 0 (distance 80)") {
			t.Errorf("%s: node %d, warnings %q", mode, m.Ranks[0].Node, m.Warnings)
		}
		if len(m.Ranks[0].Warnings) == 0 {
			t.Errorf("%s: the rank carries no warning", mode)
		}
	}
	// snc2-2s plus a CXL memory expander, node 4, nearest to node 1 (14)
	// and GPU 0 reading node 4: GPU 0 moves to node 1 (CPUs 24-47,120-143).
	n = fixture(t, "snc2-2s")
	n.NUMANodes = append(n.NUMANodes, topology.NUMANode{ID: 4, Distances: []int{24, 14, 30, 30, 10}})
	n.GPUs[0].NUMANode = intp(4)
	relocate(&n)
	m := compute(t, n, ModeNode, 1)
	if r := m.Ranks[0]; r.CPUs.String() != "24-47,120-143" || r.Mems.String() != "1" || r.Node != 1 {
		t.Errorf("GPU 0 on CXL node 4: %+v", r)
	}
	if !hasWarning(m, "numa_node 4 has no CPUs", "node 1 (distance 14)") {
		t.Errorf("warnings %q", m.Warnings)
	}
	// Exclusive: node 1 is now shared by GPUs 0, 2, 3: 24 cores / 3 = 8.
	m = compute(t, n, ModeExclusive, 1)
	check(t, m, []want{
		{0, "24-31,120-127", "1"}, {1, "0-23,96-119", "0"}, {2, "32-39,128-135", "1"}, {3, "40-47,136-143", "1"},
		{4, "48-59,144-155", "2"}, {5, "60-71,156-167", "2"}, {6, "72-83,168-179", "3"}, {7, "84-95,180-191", "3"},
	}, "")
}

// TestNUMAMinusOneSources: a GPU of numa_node -1 binds by its resolved
// locality: NVML's affinity first, then local_cpulist, then every allowed
// CPU, each with a warning.
func TestNUMAMinusOneSources(t *testing.T) {
	n := fixture(t, "numa-unknown-2s")
	m := compute(t, n, ModeNode, 1)
	if !hasWarning(m, "GPU 3 (", "numa_node is -1", "nvml_cpu_affinity 0-63", "no single NUMA node") || !hasWarning(m, "GPU 3: ", "no memory binding") {
		t.Errorf("warnings %q", m.Warnings)
	}
	if r := m.Ranks[3]; r.Node != -1 || !r.Mems.IsEmpty() || len(r.Warnings) == 0 {
		t.Errorf("rank 3: %+v", r)
	}
	// NVML places the GPU on node 1's CPUs: node 1, memory on node 1; its
	// local_cpulist (every CPU) disagrees.
	n.GPUs[3].NVMLCPUAffinity = set(t, "16-31,48-63")
	relocate(&n)
	m = compute(t, n, ModeNode, 1)
	if r := m.Ranks[3]; r.Node != 1 || r.CPUs.String() != "16-31,48-63" || r.Mems.String() != "1" {
		t.Errorf("rank 3 with NVML affinity on node 1: %+v", r)
	}
	if !hasWarning(m, "sources disagree: using nvml_cpu_affinity 16-31,48-63 (NUMA node 1); local_cpulist 0-63 (NUMA nodes 0-1)") {
		t.Errorf("warnings %q", m.Warnings)
	}
	// Exclusive: GPU 3 is node 1's second GPU.
	check(t, compute(t, n, ModeExclusive, 1), []want{
		{0, "0-7,32-39", "0"}, {1, "8-15,40-47", "0"}, {2, "16-23,48-55", "1"}, {3, "24-31,56-63", "1"},
	}, "")
	// No NVML: local_cpulist.
	n.GPUs[3].NVMLCPUAffinity = cpuset.Set{}
	n.GPUs[3].LocalCPUs = set(t, "0-15,32-47")
	n.Warnings = nil
	relocate(&n)
	m = compute(t, n, ModeNode, 1)
	if r := m.Ranks[3]; r.Node != 0 || r.CPUs.String() != "0-15,32-47" || r.Mems.String() != "0" {
		t.Errorf("rank 3 from local_cpulist: %+v", r)
	}
	if !hasWarning(m, "numa_node is -1; locality from local_cpulist 0-15,32-47 (NUMA node 0)") {
		t.Errorf("warnings %q", m.Warnings)
	}
	// Neither: every allowed CPU.
	n.GPUs[3].LocalCPUs = cpuset.Set{}
	n.Warnings = nil
	relocate(&n)
	m = compute(t, n, ModeNode, 1)
	if r := m.Ranks[3]; r.Node != -1 || r.CPUs.String() != "0-63" || !r.Mems.IsEmpty() {
		t.Errorf("rank 3 from the allowed set: %+v", r)
	}
	if !hasWarning(m, "no source gives its CPUs") || !hasWarning(m, "all allowed CPUs 0-63") {
		t.Errorf("warnings %q", m.Warnings)
	}
}

// TestCgroupFallbackWarnings: the cgroup-half fallbacks say so.
func TestCgroupFallbackWarnings(t *testing.T) {
	n := fixture(t, "cgroup-half")
	m := compute(t, n, ModeNode, 1)
	for g := 4; g <= 7; g++ {
		if !hasWarning(m, fmt.Sprintf("GPU %d: none of the CPUs of node 1", g), "falling back to the allowed set") {
			t.Errorf("GPU %d: warnings %q", g, m.Warnings)
		}
	}
	if len(m.Ranks[0].Warnings) != 0 || len(m.Ranks[4].Warnings) != 1 {
		t.Errorf("rank warnings: %q / %q", m.Ranks[0].Warnings, m.Ranks[4].Warnings)
	}
	m = compute(t, n, ModeExclusive, 1)
	if !hasWarning(m, "GPU 4: no CPU of NUMA node 1", "from node 0") {
		t.Errorf("warnings %q", m.Warnings)
	}
	// 9 ranks per GPU = 72 ranks for 56 allowed cores of one thread each:
	// no thread fallback either.
	if _, err := Compute(n, Options{RanksPerGPU: 9}); !errors.Is(err, ErrTooManyRanks) {
		t.Errorf("K=9: %v, want ErrTooManyRanks", err)
	}
}

// TestNoCoreTopology: without thread_siblings every CPU is a core.
func TestNoCoreTopology(t *testing.T) {
	n := fixture(t, "smt-off-2s")
	n.CPU.Cores = nil
	m := compute(t, n, ModeExclusive, 1)
	check(t, m, []want{{0, "0-15", "0"}, {1, "16-31", "0"}, {2, "32-47", "1"}, {3, "48-63", "1"}}, "")
	if !hasWarning(m, "no core topology") {
		t.Errorf("warnings %q", m.Warnings)
	}
}

// TestGPUOrder: GPUs are taken in index order whatever the slice order.
func TestGPUOrder(t *testing.T) {
	n := fixture(t, "smt-off-2s")
	slices.Reverse(n.GPUs)
	check(t, compute(t, n, ModeExclusive, 1), []want{{0, "0-15", "0"}, {1, "16-31", "0"}, {2, "32-47", "1"}, {3, "48-63", "1"}}, "")
}

func set(t *testing.T, s string) cpuset.Set {
	t.Helper()
	v, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
