package discover

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/hwloccheck"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
	"github.com/gpuaffinity/gpuaffinity/render"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func discoverRoot(t testing.TB, root string) topology.Node {
	t.Helper()
	n, err := Discover(Options{Root: root})
	if err != nil {
		t.Fatalf("Discover(%s): %v", root, err)
	}
	return n
}

// TestMachines holds every fixture machine to the pairs written by hand
// in its spec (from the machine's published layout, cited there).
func TestMachines(t *testing.T) {
	for _, name := range fakesys.Machines() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, err := fakesys.Expectation(name)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Pairs) == 0 && want.Unsupported == 0 {
				t.Fatalf("%s has no hand-written expected pairs", name)
			}
			if want.Roles == nil {
				t.Fatalf("%s has no hand-written expected roles (expect.roles; roles: {} for a node without NICs)", name)
			}
			n := discoverRoot(t, sharedRoot(t, name))
			if len(n.Unsupported) != want.Unsupported {
				t.Errorf("%d unsupported accelerators, want %d: %+v", len(n.Unsupported), want.Unsupported, n.Unsupported)
			}
			// Every NIC has its hand-written role, and no role is written
			// for a NIC the node does not have.
			seen := map[string]bool{}
			for _, nic := range n.NICs {
				seen[nic.Name] = true
				w, ok := want.Roles[nic.Name]
				if !ok {
					t.Errorf("NIC %s (%s) has no expected role; got %s (%s)", nic.Name, nic.BusID, nic.Role, nic.RoleReason)
				} else if string(nic.Role) != w {
					t.Errorf("NIC %s (%s): role %s, want %s (%s)", nic.Name, nic.BusID, nic.Role, w, nic.RoleReason)
				}
				if len(nic.Roles) == 0 || nic.Roles[0] != nic.Role || nic.RoleReason == "" {
					t.Errorf("NIC %s: roles %v, role %s, reason %q", nic.Name, nic.Roles, nic.Role, nic.RoleReason)
				}
			}
			for name := range want.Roles {
				if !seen[name] {
					t.Errorf("expected role for NIC %s, which the node does not have", name)
				}
			}
			if len(n.Pairs) != len(want.Pairs) {
				t.Fatalf("got %d pairs, want %d:\n%+v", len(n.Pairs), len(want.Pairs), n.Pairs)
			}
			for i, w := range want.Pairs {
				got := n.Pairs[i]
				wantNICs := w.NICs
				if wantNICs == nil {
					wantNICs = []string{}
				}
				if got.GPU != w.GPU || !slices.Equal(got.NICs, wantNICs) || got.Class.String() != w.Class {
					t.Errorf("GPU %d: got %v at %s, want %v at %s (note %q)", w.GPU, got.NICs, got.Class, wantNICs, w.Class, got.Note)
				}
				if w.Decided != nil && got.Decided != *w.Decided {
					t.Errorf("GPU %d: decided = %v, want %v", w.GPU, got.Decided, *w.Decided)
				}
				if w.Note != "" && got.Note != w.Note {
					t.Errorf("GPU %d: note %q, want %q", w.GPU, got.Note, w.Note)
				}
				wantDown := want.DownNICs[w.GPU]
				if wantDown == nil {
					wantDown = []string{}
				}
				if !slices.Equal(got.DownNICs, wantDown) {
					t.Errorf("GPU %d: down NICs %v, want %v (note %q)", w.GPU, got.DownNICs, wantDown, got.Note)
				}
				// A pair's class is the path class to each of its NICs.
				for _, nic := range got.NICs {
					if c := n.PathClass(got.GPU, nic); c != got.Class {
						t.Errorf("GPU %d: path to %s is %s, pair says %s", got.GPU, nic, c, got.Class)
					}
				}
			}
			if want.GPUGPU != "" {
				for _, p := range n.GPUPaths {
					got := p.Class.String()
					switch {
					case p.NVLinks > 0:
						got = "NV" + strconv.Itoa(p.NVLinks)
					case p.XGMI > 0:
						got = "XGMI"
					}
					wantCell := want.GPUGPU
					if c, ok := want.GPUGPUExcept[strconv.Itoa(p.A)+"-"+strconv.Itoa(p.B)]; ok {
						wantCell = c
					}
					if got != wantCell {
						t.Errorf("GPU%d-GPU%d: %s, want %s", p.A, p.B, got, wantCell)
					}
				}
			}
			if want.Storage != nil {
				checkStorage(t, n, *want.Storage)
			}
			if spec, err := fakesys.Machine(name); err == nil && n.DefaultRouteInterface != spec.DefaultRoute {
				t.Errorf("default route interface %q, spec says %q", n.DefaultRouteInterface, spec.DefaultRoute)
			}
			// Never a non-compute NIC while a compute NIC exists.
			compute := map[string]bool{}
			for _, nic := range n.NICs {
				if nic.Role == topology.RoleCompute {
					compute[nic.Name] = true
				}
			}
			for _, p := range n.Pairs {
				for _, nic := range p.NICs {
					if !compute[nic] {
						t.Errorf("GPU %d paired with non-compute NIC %s", p.GPU, nic)
					}
				}
			}
		})
	}
}

// TestHwlocAgrees runs hwloc (HWLOC_FSROOT) on every fixture root and
// holds our NUMA locality of every GPU, NIC and NVMe drive to hwloc's.
func TestHwlocAgrees(t *testing.T) {
	if _, err := exec.LookPath("lstopo-no-graphics"); err != nil {
		if testenv.InCI() {
			t.Fatal("lstopo-no-graphics missing in CI: make test installs Debian package hwloc")
		}
		t.Skip("lstopo-no-graphics not installed (Debian package hwloc; `make test` installs it as root)")
	}
	for _, name := range fakesys.Machines() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := sharedRoot(t, name)
			n := discoverRoot(t, root)
			loc, err := hwloccheck.Locality(root)
			if err != nil {
				t.Fatal(err)
			}
			ours := map[string]int{}
			for _, g := range n.GPUs {
				// A GPU's locality is its resolved one (hwloc, too, places a
				// function of numa_node -1 by its host bridge).
				ours[g.BusID] = -1
				if g.Locality.Node != nil {
					ours[g.BusID] = *g.Locality.Node
				}
			}
			for _, nic := range n.NICs {
				ours[nic.BusID] = numaOf(n, nic.NUMANode, nic.LocalCPUs.String())
			}
			for _, d := range n.Storage.NVMe {
				if d.BusID == "" {
					continue
				}
				var local string
				for _, pd := range n.PCIDevices {
					if pd.BusID == d.BusID {
						local = pd.LocalCPUs.String()
					}
				}
				ours[d.BusID] = numaOf(n, d.NUMANode, local)
			}
			if len(ours) == 0 {
				t.Fatal("no GPU or NIC discovered")
			}
			for bus, want := range ours {
				got, ok := loc[bus]
				if !ok {
					t.Errorf("hwloc does not report %s", bus)
					continue
				}
				if got != want {
					t.Errorf("%s: hwloc says NUMA %d, we say %d", bus, got, want)
				}
			}
		})
	}
}

// numaOf is our locality of a device as hwloc states it: the PCI NUMA
// node; where that is unknown, the one node whose CPUs equal the device's
// local CPUs (hwloc places such a device by local_cpus); else -1.
func numaOf(n topology.Node, node *int, local string) int {
	if node != nil {
		return *node
	}
	for _, nn := range n.NUMANodes {
		if nn.CPUs.String() == local || (len(n.NUMANodes) == 1 && local != "") {
			return nn.ID
		}
	}
	return -1
}

// TestH200Capture checks the real capture's facts (shared/README.md).
func TestH200Capture(t *testing.T) {
	n := discoverRoot(t, sharedRoot(t, fakesys.H200VM))
	if len(n.GPUs) != 1 {
		t.Fatalf("GPUs = %+v", n.GPUs)
	}
	g := n.GPUs[0]
	if g.BusID != "0000:00:06.0" || g.Model != "NVIDIA H200" || g.State != topology.GPUOK || g.NUMANode != nil ||
		g.GPUNUMAID != nil || g.NVLinkVisible || g.NVMLCPUAffinity.String() != "0-15" || g.LocalCPUs.String() != "0-15" ||
		g.UUID != "GPU-e3344502-c9fc-0416-7091-4a6968e9d3e8" || g.PCIe != (topology.PCIe{Gen: 5, Width: 16, MaxGen: 5, MaxWidth: 16}) {
		t.Errorf("GPU = %+v", g)
	}
	// The probe's health answers; fabric state 0 (NOT_SUPPORTED: a VM GPU
	// outside any NVSwitch fabric) and the calls it did not make are null.
	b, i, u := func(v bool) *bool { return &v }, func(v int) *int { return &v }, func(v uint64) *uint64 { return &v }
	wantHealth := topology.GPUHealth{Persistence: b(true), ECCUncorrectedVolatile: u(0),
		RemappedRowsCorrectable: i(0), RemappedRowsUncorrectable: i(0), RemapPending: b(false), RemapFailure: b(false),
		PCIeReplay: u(0)}
	if diff := cmp.Diff(wantHealth, g.Health); diff != "" {
		t.Errorf("GPU health (-want +got):\n%s", diff)
	}
	if n.NVML.Source != "replay" || n.NVML.DriverVersion != "580.159.04" || n.NVML.CUDAVersion != 13000 {
		t.Errorf("NVML = %+v", n.NVML)
	}
	if n.Driver != (topology.DriverInfo{Version: "580.159.04", Source: "nvml"}) || !n.Platform.Virtual {
		t.Errorf("driver %+v, platform %+v (the capture's cpuinfo has the hypervisor flag)", n.Driver, n.Platform)
	}
	// No route table in the capture: eth0, the one Ethernet NIC and up, is
	// the front end (NCCL used it: nccl-init.log "NET/Socket : Using [0]eth0").
	if len(n.NICs) != 1 || n.NICs[0].Name != "eth0" || n.NICs[0].Driver != "virtio-pci" ||
		n.NICs[0].Fabric != topology.FabricEthernet || n.NICs[0].Role != topology.RoleFrontend {
		t.Errorf("NICs = %+v", n.NICs)
	}
	if n.Platform.Cloud != topology.CloudUnknown || len(n.NUMANodes) != 1 || n.CPU.Online.String() != "0-15" ||
		n.CPU.Family != 6 || n.CPU.Model != 207 {
		t.Errorf("platform %+v numa %+v cpu %+v", n.Platform, n.NUMANodes, n.CPU)
	}
	if n.Paths[0].Class != topology.ClassPHB {
		t.Errorf("GPU-eth0 path = %v", n.Paths[0].Class)
	}
}

// TestDotRenders pipes each fixture's DOT through Graphviz.
func TestDotRenders(t *testing.T) {
	if _, err := exec.LookPath("dot"); err != nil {
		if testenv.InCI() {
			t.Fatal("dot missing in CI: make test installs Debian package graphviz")
		}
		t.Skip("dot not installed (Debian package graphviz)")
	}
	for _, name := range fakesys.Machines() {
		n := discoverRoot(t, sharedRoot(t, name))
		var buf bytes.Buffer
		if err := render.DOT(&buf, n); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("dot", "-Tsvg")
		cmd.Stdin = &buf
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil || !strings.Contains(string(out), "<svg") {
			t.Errorf("%s: dot -Tsvg: %v\n%s", name, err, out)
		}
	}
}

// TestGPUHealthCarried: fakesys' healthy NVSwitch GPUs reach the topology
// with fabric registration completed.
func TestGPUHealthCarried(t *testing.T) {
	n := discoverRoot(t, fakesystest.Root(t, "dgx-h100"))
	for _, g := range n.GPUs {
		h := g.Health
		if h.Persistence == nil || !*h.Persistence || h.FabricState == nil || *h.FabricState != 3 ||
			h.FabricStatus == nil || *h.FabricStatus != 0 || h.ECCUncorrectedVolatile == nil || *h.ECCUncorrectedVolatile != 0 {
			t.Errorf("GPU %d health = %+v", g.Index, h)
		}
	}
}

// TestRoleReasonsDocumented: every role reason a fixture gets is one of
// the shapes docs/topology-json.md lists (by its opening words).
func TestRoleReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/topology-json.md")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(doc, []byte("**Role reasons.**"))
	if i < 0 {
		t.Fatal("docs/topology-json.md has no role reasons table")
	}
	table := string(doc[i:])
	seen := map[string]bool{}
	for _, name := range fakesys.Machines() {
		n := discoverRoot(t, sharedRoot(t, name))
		for _, nic := range n.NICs {
			words := strings.Fields(nic.RoleReason)
			if len(words) < 2 {
				t.Errorf("%s %s: reason %q", name, nic.Name, nic.RoleReason)
				continue
			}
			open := strings.Join(words[:2], " ")
			if !seen[open] && !strings.Contains(table, open) {
				t.Errorf("%s %s: reason %q: %q is not in the role reasons table", name, nic.Name, nic.RoleReason, open)
			}
			seen[open] = true
		}
	}
	if len(seen) < 8 {
		t.Errorf("only %d reason shapes across the fixtures: %v", len(seen), seen)
	}
}

// checkStorage holds the storage layer to a machine's hand-written
// expect.storage: each GPU's nearest NVMe and storage NICs, the mounts
// GDS serves and the NICs that carry them, and P2PDMA support.
func checkStorage(t *testing.T, n topology.Node, want fakesys.ExpectStorage) {
	t.Helper()
	if len(n.Storage.Pairs) != len(want.Pairs) {
		t.Fatalf("%d storage pairs, want %d: %+v", len(n.Storage.Pairs), len(want.Pairs), n.Storage.Pairs)
	}
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	for i, w := range want.Pairs {
		got := n.Storage.Pairs[i]
		if got.GPU != w.GPU || !slices.Equal(got.NVMe, orEmpty(w.NVMe)) || got.NVMeClass.String() != w.NVMeClass ||
			!slices.Equal(got.NICs, orEmpty(w.NICs)) || got.NICClass.String() != w.NICClass {
			t.Errorf("GPU %d storage: NVMe %v at %s, NICs %v at %s; want NVMe %v at %s, NICs %v at %s (%s)",
				w.GPU, got.NVMe, got.NVMeClass, got.NICs, got.NICClass, w.NVMe, w.NVMeClass, w.NICs, w.NICClass, got.Note)
		}
	}
	if want.Mounts != nil {
		seen := map[string]bool{}
		for _, m := range n.Storage.Mounts {
			seen[m.Target] = true
			w, ok := want.Mounts[m.Target]
			if !ok {
				t.Errorf("mount %s (%s, %s) reported, not expected", m.Target, m.FSType, m.Kind)
				continue
			}
			if !slices.Equal(m.NICs, orEmpty(w)) {
				t.Errorf("mount %s: NICs %v (%s), want %v", m.Target, m.NICs, m.NICsReason, w)
			}
		}
		for target := range want.Mounts {
			if !seen[target] {
				t.Errorf("mount %s expected, not reported", target)
			}
		}
	}
	if want.P2PDMA != nil && n.Storage.GDS.P2PDMA.Supported != *want.P2PDMA {
		t.Errorf("P2PDMA supported = %v (missing %v), want %v", n.Storage.GDS.P2PDMA.Supported, n.Storage.GDS.P2PDMA.Missing, *want.P2PDMA)
	}
}
