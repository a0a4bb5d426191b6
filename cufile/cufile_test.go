package cufile

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// nic is a storage NIC with one interface holding the given CIDRs.
func nic(name string, cidrs ...string) topology.NIC {
	return topology.NIC{Name: name, Role: topology.RoleStorage, Fabric: topology.FabricInfiniBand,
		Interfaces: []topology.Interface{{Name: "ib-" + name, IPv4: cidrs}}}
}

func mount(kind topology.MountKind, target string, nics ...string) topology.Mount {
	return topology.Mount{Kind: kind, Target: target, NICs: nics}
}

// pairs gives GPU i the storage NICs at class classes[i].
func pairs(classes ...topology.Class) []topology.StoragePair {
	var out []topology.StoragePair
	for i, c := range classes {
		out = append(out, topology.StoragePair{GPU: i, NICs: []string{"mlx5_1"}, NICClass: c})
	}
	return out
}

// decode parses a rendered file with encoding/json: what cuFile reads.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, b)
	}
	return m
}

// at walks dotted keys; a key with dots (a mount point) is given whole
// as its own element.
func at(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}

func strs(v any) []string {
	a, ok := v.([]any)
	if !ok {
		return nil
	}
	var out []string
	for _, e := range a {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// The DGX H100 storage ports (mlx5_1, mlx5_2 at 10.10.1.11 and .12)
// serve both Lustre mounts: one fs.lustre.rdma_dev_addr_list, in NIC
// order, and no mount_table.
func TestPerFSList(t *testing.T) {
	n := topology.Node{
		NICs: []topology.NIC{nic("mlx5_1", "10.10.1.11/16"), nic("mlx5_2", "10.10.1.12/16")},
		Storage: topology.Storage{Mounts: []topology.Mount{
			mount(topology.MountLustre, "/lustre/a", "mlx5_1", "mlx5_2"),
			mount(topology.MountLustre, "/lustre/b", "mlx5_1", "mlx5_2"),
		}},
	}
	s := FromNode(n)
	if len(s.FS) != 1 || s.FS[0].FS != "lustre" || s.FS[0].Mounts != nil ||
		!slices.Equal(s.FS[0].Addrs, []string{"10.10.1.11", "10.10.1.12"}) {
		t.Fatalf("FS = %+v; want lustre [10.10.1.11 10.10.1.12], no mount table", s.FS)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings %q", s.Warnings)
	}
	out, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	if got := strs(at(m, "fs", "lustre", "rdma_dev_addr_list")); !slices.Equal(got, []string{"10.10.1.11", "10.10.1.12"}) {
		t.Errorf("fs.lustre.rdma_dev_addr_list = %q", got)
	}
	if at(m, "fs", "lustre", "mount_table") != nil {
		t.Error("fs.lustre.mount_table set beside the per-fs list")
	}
	// The reference's own lustre key stays, and the other file systems
	// get no list.
	if at(m, "fs", "lustre", "posix_gds_min_kb") != float64(0) || at(m, "fs", "nfs", "rdma_dev_addr_list") != nil {
		t.Errorf("fs = %v", at(m, "fs"))
	}
	// The global list is the reference's, empty.
	if got := at(m, "properties", "rdma_dev_addr_list"); got == nil || len(got.([]any)) != 0 {
		t.Errorf("properties.rdma_dev_addr_list = %v", got)
	}
}

// Two NFS mounts on different ports: a mount_table entry each, and no
// per-fs list; a NIC with two addresses lists both.
func TestMountTableWhenMountsDiffer(t *testing.T) {
	n := topology.Node{
		NICs: []topology.NIC{nic("mlx5_1", "10.10.1.11/24", "10.10.2.11/24"), nic("mlx5_7", "10.20.1.17/24")},
		Storage: topology.Storage{Mounts: []topology.Mount{
			mount(topology.MountNFS, "/mnt/vast", "mlx5_1"),
			mount(topology.MountNVMe, "/raid"),
			mount(topology.MountNFS, "/mnt/ckpt", "mlx5_7"),
		}},
	}
	s := FromNode(n)
	want := []MountAddrs{{"/mnt/vast", []string{"10.10.1.11", "10.10.2.11"}}, {"/mnt/ckpt", []string{"10.20.1.17"}}}
	if len(s.FS) != 1 || s.FS[0].FS != "nfs" || s.FS[0].Addrs != nil || !slices.EqualFunc(s.FS[0].Mounts, want, func(a, b MountAddrs) bool {
		return a.Target == b.Target && slices.Equal(a.Addrs, b.Addrs)
	}) {
		t.Fatalf("FS = %+v; want nfs mount table %+v", s.FS, want)
	}
	out, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	if at(m, "fs", "nfs", "rdma_dev_addr_list") != nil {
		t.Error("fs.nfs.rdma_dev_addr_list set beside the mount table")
	}
	if got := strs(at(m, "fs", "nfs", "mount_table", "/mnt/vast", "rdma_dev_addr_list")); !slices.Equal(got, []string{"10.10.1.11", "10.10.2.11"}) {
		t.Errorf("/mnt/vast = %q", got)
	}
	if got := strs(at(m, "fs", "nfs", "mount_table", "/mnt/ckpt", "rdma_dev_addr_list")); !slices.Equal(got, []string{"10.20.1.17"}) {
		t.Errorf("/mnt/ckpt = %q", got)
	}
	// fs.nfs keeps the reference's use_pci_p2pdma (NFS is not P2PDMA's).
	if at(m, "fs", "nfs", "use_pci_p2pdma") != false {
		t.Errorf("fs.nfs.use_pci_p2pdma = %v", at(m, "fs", "nfs", "use_pci_p2pdma"))
	}
	// The mount table comes last in fs.nfs, where NVIDIA's file has it
	// commented out, and in mount order.
	if !strings.Contains(string(out), `"nfs": {
      "use_pci_p2pdma": false,
      "mount_table": {
        "/mnt/vast": {
          "rdma_dev_addr_list": ["10.10.1.11", "10.10.2.11"]
        },
        "/mnt/ckpt": {
          "rdma_dev_addr_list": ["10.20.1.17"]
        }
      }
    },`) {
		t.Errorf("fs.nfs block:\n%s", out)
	}
}

// A NIC without IPv4 gives nothing and a warning naming it; the mount it
// alone serves then has no entry, so the other mount's list cannot be the
// per-fs one (it would route the first mount through it too).
func TestNICWithoutIPv4(t *testing.T) {
	n := topology.Node{
		NICs: []topology.NIC{nic("mlx5_1", "10.10.1.11/16"), nic("mlx5_2")},
		Storage: topology.Storage{Mounts: []topology.Mount{
			mount(topology.MountWeka, "/mnt/weka", "mlx5_1", "mlx5_2"),
			mount(topology.MountGPFS, "/gpfs/a", "mlx5_2"),
			mount(topology.MountGPFS, "/gpfs/b", "mlx5_1"),
		}},
	}
	s := FromNode(n)
	if len(s.FS) != 2 || s.FS[0].FS != "gpfs" || s.FS[1].FS != "weka" {
		t.Fatalf("FS = %+v; want gpfs, weka (the reference's order)", s.FS)
	}
	if s.FS[0].Addrs != nil || len(s.FS[0].Mounts) != 1 || s.FS[0].Mounts[0].Target != "/gpfs/b" {
		t.Errorf("gpfs = %+v; want a mount table with /gpfs/b only", s.FS[0])
	}
	if !slices.Equal(s.FS[1].Addrs, []string{"10.10.1.11"}) {
		t.Errorf("weka = %+v; want [10.10.1.11]", s.FS[1])
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "NIC mlx5_2") ||
		!strings.Contains(s.Warnings[0], "/mnt/weka, /gpfs/a") || !strings.Contains(s.Warnings[0], "no IPv4") {
		t.Errorf("warnings = %q; want one naming mlx5_2 and both mounts", s.Warnings)
	}
}

// A file system whose only mount has no address is left alone, with a
// warning.
func TestFSWithoutAddress(t *testing.T) {
	n := topology.Node{
		NICs:    []topology.NIC{nic("mlx5_2")},
		Storage: topology.Storage{Mounts: []topology.Mount{mount(topology.MountBeeGFS, "/mnt/beegfs", "mlx5_2")}},
	}
	s := FromNode(n)
	if len(s.FS) != 0 {
		t.Errorf("FS = %+v; want none", s.FS)
	}
	if len(s.Warnings) != 2 || !strings.Contains(s.Warnings[0], "fs.beegfs") || !strings.Contains(s.Warnings[1], "mlx5_2") {
		t.Errorf("warnings = %q", s.Warnings)
	}
}

func TestP2PDMA(t *testing.T) {
	for _, on := range []bool{true, false} {
		n := topology.Node{Storage: topology.Storage{GDS: topology.GDS{P2PDMA: topology.P2PDMA{Supported: on}}}}
		out, err := Render(FromNode(n))
		if err != nil {
			t.Fatal(err)
		}
		m := decode(t, out)
		if at(m, "properties", "use_pci_p2pdma") != on || at(m, "block", "nvme", "use_pci_p2pdma") != on {
			t.Errorf("P2PDMA %v: properties %v, block.nvme %v", on, at(m, "properties", "use_pci_p2pdma"), at(m, "block", "nvme", "use_pci_p2pdma"))
		}
		// NVMe-oF and RAID stay off: P2PDMA breaks NVMe-oF RDMA writes
		// (ai-dynamo/nixl#1063), and neither is P2PDMA's.
		if at(m, "block", "nvmeof", "use_pci_p2pdma") != false || at(m, "block", "raid", "use_pci_p2pdma") != false ||
			at(m, "fs", "nfs", "use_pci_p2pdma") != false {
			t.Errorf("P2PDMA %v: block %v, fs.nfs %v", on, at(m, "block"), at(m, "fs", "nfs"))
		}
	}
}

func TestDynamicRouting(t *testing.T) {
	lustre := []topology.Mount{mount(topology.MountLustre, "/lustre", "mlx5_1")}
	for _, tc := range []struct {
		name   string
		mounts []topology.Mount
		pairs  []topology.StoragePair
		want   bool
	}{
		// DGX H100: every GPU reaches its storage NIC across host bridges.
		{"NODE", lustre, pairs(topology.ClassNODE, topology.ClassNODE), true},
		{"one GPU at PHB", lustre, pairs(topology.ClassPIX, topology.ClassPHB), true},
		{"SYS", lustre, pairs(topology.ClassSYS), true},
		// A shared switch (PIX, PXB): cuFile's own routing is right.
		{"PIX and PXB", lustre, pairs(topology.ClassPIX, topology.ClassPXB), false},
		// Only local NVMe and NFS over TCP: no RDMA mount to route.
		{"no network mount", []topology.Mount{mount(topology.MountNVMe, "/raid"), mount(topology.MountNFSTCP, "/home", "mlx5_1")},
			pairs(topology.ClassSYS), false},
		// A GPU with no storage NIC has no class to judge.
		{"no storage NIC", lustre, []topology.StoragePair{{GPU: 0, NICs: []string{}, NICClass: topology.ClassUnknown}}, false},
	} {
		n := topology.Node{NICs: []topology.NIC{nic("mlx5_1", "10.0.0.1/8")}, Storage: topology.Storage{Mounts: tc.mounts, Pairs: tc.pairs}}
		s := FromNode(n)
		if s.DynamicRouting != tc.want {
			t.Errorf("%s: DynamicRouting = %v, want %v", tc.name, s.DynamicRouting, tc.want)
		}
		out, err := Render(s)
		if err != nil {
			t.Fatal(err)
		}
		m := decode(t, out)
		if at(m, "properties", "rdma_dynamic_routing") != tc.want {
			t.Errorf("%s: rdma_dynamic_routing = %v", tc.name, at(m, "properties", "rdma_dynamic_routing"))
		}
		// The order stays NVIDIA's default.
		if got := strs(at(m, "properties", "rdma_dynamic_routing_order")); !slices.Equal(got, []string{"GPU_MEM_NVLINKS", "GPU_MEM", "SYS_MEM", "P2P"}) {
			t.Errorf("%s: rdma_dynamic_routing_order = %q", tc.name, got)
		}
	}
}

// A fresh file is NVIDIA's default without comments: every key of the
// reference, with its value, in its order; 2-space indent, final newline.
func TestRenderIsTheReference(t *testing.T) {
	out, err := Render(Settings{})
	if err != nil {
		t.Fatal(err)
	}
	// Spot checks written from the guide's listing.
	for _, want := range []string{
		"{\n  \"logging\": {\n    \"level\": \"ERROR\"\n  },\n  \"profile\": {\n",
		"      \"slab_size_kb\": [1024, 8192, 16384, 65536],\n",
		"    \"max_device_pinned_mem_size_kb\": 33554432,\n",
		"    \"rdma_load_balancing_policy\": \"RoundRobin\",\n    \"rdma_dynamic_routing\": false,\n",
		"    \"static_routing_filepath\": \"/etc/topology.json\"\n  }\n}\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("fresh file lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "//") || strings.Contains(string(out), "rdma_dc_key") || strings.Contains(string(out), "max_direct_io_size_kb") {
		t.Errorf("a comment survived:\n%s", out)
	}
	if !strings.HasSuffix(string(out), "}\n") || strings.HasSuffix(string(out), "\n\n") {
		t.Error("want exactly one trailing newline")
	}
	// Top-level keys in the reference's order.
	var keys []string
	for _, line := range strings.Split(string(out), "\n") {
		if k, ok := strings.CutPrefix(line, "  \""); ok {
			keys = append(keys, k[:strings.IndexByte(k, '"')])
		}
	}
	if want := []string{"logging", "profile", "execution", "properties", "fs", "block", "denylist", "miscellaneous"}; !slices.Equal(keys, want) {
		t.Errorf("top-level keys %q, want %q", keys, want)
	}
	// Deterministic.
	again, _ := Render(Settings{})
	if string(again) != string(out) {
		t.Error("two renders differ")
	}
	// The embedded reference is the testdata file.
	ref, err := os.ReadFile("testdata/cufile.default.json")
	if err != nil || string(ref) != string(reference) {
		t.Errorf("embedded reference differs from testdata/cufile.default.json (%v)", err)
	}
}
