package numa

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs/rootfstest"
)

func put(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, v := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// cpu writes one online CPU's topology files.
func cpu(m map[string]string, id, core, pkg int, siblings string) {
	d := "sys/devices/system/cpu/cpu" + strconv.Itoa(id) + "/topology/"
	m[d+"core_id"] = strconv.Itoa(core)
	m[d+"physical_package_id"] = strconv.Itoa(pkg)
	m[d+"thread_siblings_list"] = siblings
}

// A Grace-Hopper-like node with sub-NUMA clustering folded in: socket 0
// holds nodes 0 and 1 (SNC2), node 2 is memory-only (GPU memory), CPU 3
// is offline, and the process is limited to CPUs 0-1.
func TestReadSNCMemoryOnlyOffline(t *testing.T) {
	root := t.TempDir()
	m := map[string]string{
		"sys/devices/system/cpu/online":          "0-2",
		"sys/devices/system/cpu/offline":         "3",
		"sys/devices/system/node/node0/cpulist":  "0",
		"sys/devices/system/node/node0/distance": "10 11 80",
		"sys/devices/system/node/node0/meminfo":  "Node 0 MemTotal:       1024 kB\nNode 0 MemFree: 1 kB",
		"sys/devices/system/node/node1/cpulist":  "1-2",
		"sys/devices/system/node/node1/distance": "11 10 80",
		"sys/devices/system/node/node1/meminfo":  "Node 1 MemTotal:       2048 kB",
		"sys/devices/system/node/node2/cpulist":  "",
		"sys/devices/system/node/node2/distance": "80 80 10",
		"sys/devices/system/node/node2/meminfo":  "Node 2 MemTotal:       4096 kB",
		"sys/devices/system/node/possible":       "0-2", // not a node directory
		"proc/self/status":                       "Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n",
		"proc/cpuinfo":                           "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n\nprocessor\t: 1\nvendor_id\t: Other\n",
	}
	cpu(m, 0, 0, 0, "0")
	cpu(m, 1, 1, 0, "1-2")
	cpu(m, 2, 1, 0, "1-2")
	put(t, root, m)
	got, errs := Read(rootfstest.Open(t, root))
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if len(got.Nodes) != 3 || got.Nodes[2].CPUs.Len() != 0 || got.Nodes[2].MemoryBytes != 4096*1024 ||
		got.Nodes[1].CPUs.String() != "1-2" || got.Nodes[0].Distances[2] != 80 {
		t.Errorf("nodes = %+v", got.Nodes)
	}
	if got.Online.String() != "0-2" || got.Offline.String() != "3" || got.Allowed.String() != "0-1" {
		t.Errorf("online %v offline %v allowed %v", got.Online, got.Offline, got.Allowed)
	}
	if len(got.CPUs) != 3 || got.CPUs[2].Siblings.String() != "1-2" || got.CPUs[2].Node != 1 || got.CPUs[0].Node != 0 {
		t.Errorf("cpus = %+v", got.CPUs)
	}
	if got.Vendor != "GenuineIntel" || got.FamilyID != 6 || got.ModelID != 143 || !strings.HasPrefix(got.Model, "Intel") {
		t.Errorf("cpuinfo = %q %d %d %q", got.Vendor, got.FamilyID, got.ModelID, got.Model)
	}
}

// Garbage and missing files: the node is kept, each problem names its file.
func TestReadBadInput(t *testing.T) {
	root := t.TempDir()
	m := map[string]string{
		"sys/devices/system/cpu/online":          "0-1",
		"sys/devices/system/node/node0/cpulist":  "0-1",
		"sys/devices/system/node/node0/distance": "10 abc",
		"sys/devices/system/node/node0/meminfo":  "nothing useful",
		"proc/self/status":                       "Cpus_allowed_list:\tzz\n",
	}
	cpu(m, 0, 0, 0, "5") // siblings that do not hold the CPU itself
	put(t, root, m)      // cpu1 has no topology files at all
	got, errs := Read(rootfstest.Open(t, root))
	all := ""
	for _, e := range errs {
		all += e.Error() + "\n"
	}
	for _, want := range []string{"node0/distance", "node0/meminfo", "cpu 1: open", "cpu1/topology: no such file", "thread_siblings_list", "proc/self/status", "proc/cpuinfo"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
	if len(got.Nodes) != 1 || got.Nodes[0].CPUs.String() != "0-1" || got.Allowed.String() != "0-1" {
		t.Errorf("got %+v", got)
	}
	if got.CPUs[0].Siblings.String() != "0" || got.CPUs[1].CoreID != -1 {
		t.Errorf("cpus = %+v", got.CPUs)
	}
}

// No node directory (CONFIG_NUMA off, some containers): one node 0.
func TestReadNoNUMA(t *testing.T) {
	root := t.TempDir()
	put(t, root, map[string]string{"sys/devices/system/cpu/online": "0-3"})
	got, errs := Read(rootfstest.Open(t, root))
	if len(got.Nodes) != 1 || got.Nodes[0].CPUs.String() != "0-3" {
		t.Fatalf("nodes = %+v", got.Nodes)
	}
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), "no NUMA nodes") {
		t.Errorf("errors = %v", errs)
	}
}

// Malformed files that would give a silently wrong answer get a warning
// naming the file: two node cpulists claiming one CPU (the CPU stays with
// the lower node, so no two ranks are given it), a Cpus_allowed_list that
// does not parse (every online CPU is taken, and the warning says so), a
// cpuinfo whose first block names no architecture.
func TestReadMalformedWarns(t *testing.T) {
	root := t.TempDir()
	m := map[string]string{
		"sys/devices/system/cpu/online":          "0-3",
		"sys/devices/system/node/node0/cpulist":  "0-2",
		"sys/devices/system/node/node0/distance": "10 21",
		"sys/devices/system/node/node1/cpulist":  "2-3",
		"sys/devices/system/node/node1/distance": "21 10",
		"proc/self/status":                       "Cpus_allowed_list:\t0-3,junk\n",
		"proc/cpuinfo":                           "garbage line\nmore: junk\n",
	}
	for i := range 4 {
		cpu(m, i, i, i/2, strconv.Itoa(i))
	}
	put(t, root, m)
	got, errs := Read(rootfstest.Open(t, root))
	all := ""
	for _, e := range errs {
		all += e.Error() + "\n"
	}
	for _, want := range []string{
		"node1/cpulist: CPUs 2 are also in the cpulist of NUMA node 0; they are counted in node 0 only",
		"proc/self/status", "taking every online CPU (0-3) as allowed",
		"proc/cpuinfo: the first processor block has no vendor_id, CPU implementer or cpu line",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
	if got.Nodes[0].CPUs.String() != "0-2" || got.Nodes[1].CPUs.String() != "3" || got.CPUs[2].Node != 0 {
		t.Errorf("nodes %+v, CPU 2 node %d", got.Nodes, got.CPUs[2].Node)
	}
}

// Only the first processor block of cpuinfo is read, and a first block
// longer than the prefix read at first is read whole: a flags line past
// the prefix still sets Hypervisor, and later blocks change nothing.
func TestReadCPUInfoFirstBlock(t *testing.T) {
	block := func(vendor, flags string) string {
		return "processor\t: 0\nvendor_id\t: " + vendor + "\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9654\nflags\t\t: " + flags + "\n\n"
	}
	many := block("AuthenticAMD", "fpu sse2 hypervisor") + strings.Repeat(block("Other", "fpu"), 400) // far past the prefix
	long := block("AuthenticAMD", strings.Repeat("padflag ", 3000)+"hypervisor")                      // one block over 16 KiB
	for name, tc := range map[string]struct {
		cpuinfo    string
		hypervisor bool
	}{
		"many blocks":     {many, true},
		"long block":      {long, true},
		"no hypervisor":   {block("AuthenticAMD", "fpu") + strings.Repeat(block("Other", "hypervisor"), 400), false},
		"long block only": {strings.TrimSuffix(long, "\n\n"), true}, // no blank line anywhere
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			m := map[string]string{
				"sys/devices/system/cpu/online":          "0",
				"sys/devices/system/node/node0/cpulist":  "0",
				"sys/devices/system/node/node0/distance": "10",
				"sys/devices/system/node/node0/meminfo":  "Node 0 MemTotal:       1024 kB",
				"proc/self/status":                       "Cpus_allowed_list:\t0\n",
				"proc/cpuinfo":                           tc.cpuinfo,
			}
			cpu(m, 0, 0, 0, "0")
			put(t, root, m)
			got, errs := Read(rootfstest.Open(t, root))
			if len(errs) != 0 {
				t.Fatalf("errors: %v", errs)
			}
			if got.Vendor != "AuthenticAMD" || got.FamilyID != 25 || got.ModelID != 17 || got.Hypervisor != tc.hypervisor {
				t.Errorf("cpuinfo = %q %d %d hypervisor %v; want AuthenticAMD 25 17 %v", got.Vendor, got.FamilyID, got.ModelID, got.Hypervisor, tc.hypervisor)
			}
		})
	}
}
