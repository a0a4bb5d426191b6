package snapshot

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// h200Capture is the real capture of an Azure-like H200 VM: one GPU at
// 0000:00:06.0 on a flat virtual PCI bus, virtio NICs, no RDMA, one NUMA
// node with 16 CPUs (a copy of the shared fixtures/h200-vm in
// internal/testutil/fakesys/testdata).
const h200Capture = "../internal/testutil/fakesys/testdata/h200-vm/sysfs.tar.gz"

// allowlistOracle restates paths.go as regular expressions, written apart
// from it, for checking a snapshot of a real capture: every file or link of
// the capture that matches must be in the snapshot, byte for byte, and the
// snapshot must hold nothing else.
var allowlistOracle = func() *regexp.Regexp {
	const (
		pci  = `sys/devices/pci[0-9a-f]{4,5}:[0-9a-f]{2}(/[0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])+`
		net  = `(sys/devices/virtual/net|` + pci + `(/virtio[0-9]+)?/net)/[^/]+` // virtio-net sits below its virtioN
		rdma = pci + `/infiniband/[^/]+`
		cpu  = `sys/devices/system/cpu`
		node = `sys/devices/system/node`
	)
	alts := []string{
		`sys/bus/pci/devices/[^/]+`,
		`sys/class/(net|infiniband)/[^/]+`,
		pci + `/(vendor|device|class|subsystem_vendor|subsystem_device|revision|numa_node|local_cpulist|local_cpus|current_link_speed|current_link_width|max_link_speed|max_link_width|modalias|enable|irq|config|driver|physfn)`,
		net + `/(address|operstate|mtu|speed|type|carrier|ifindex|addr_assign_type|dev_port|dev_id|device|master|bonding/slaves|bonding/mode|bridge/bridge_id)`,
		rdma + `/(fw_ver|node_guid|sys_image_guid|node_type|hca_type|board_id|device)`,
		rdma + `/ports/[0-9]+/(state|phys_state|rate|link_layer|lid|sm_lid|cap_mask)`,
		rdma + `/ports/[0-9]+/(gids|gid_attrs/types|gid_attrs/ndevs|counters|hw_counters)/[^/]+`,
		rdma + `/hw_counters/[^/]+`,
		cpu + `/(online|offline|possible|present|kernel_max)`,
		cpu + `/cpu[0-9]+/(online|topology/[^/]+)`,
		cpu + `/cpu[0-9]+/cache/index[0-9]+/(level|type|size|id|shared_cpu_map|shared_cpu_list|coherency_line_size|ways_of_associativity|number_of_sets|physical_line_partition)`,
		node + `/(online|possible|has_cpu|has_memory|has_normal_memory)`,
		node + `/node[0-9]+/(cpulist|cpumap|distance|meminfo|cpu[0-9]+|hugepages/[^/]+/[^/]+|access[01]/initiators/[^/]+)`,
		`sys/class/dmi/id`,
		`sys/devices/virtual/dmi/id/(sys_vendor|product_name|product_version|chassis_asset_tag|board_vendor|board_name|chassis_vendor)`,
		`proc/(cpuinfo|meminfo|self/status|mounts|cmdline|sys/kernel/hostname|sys/kernel/osrelease|net/route|driver/nvidia/version|driver/nvidia/gpus/[^/]+/(information|numa_status)|driver/nvidia-fs/version)`,
		// Storage: NVMe controllers and subsystems, block devices, IOMMU.
		`sys/class/(nvme|nvme-subsystem|block|iommu)/[^/]+`,
		pci + `/iommu_group`,
		pci + `/nvme/nvme[0-9]+/(model|serial|firmware_rev|transport|address|state|numa_node|device|nvme[0-9]+(c[0-9]+)?n[0-9]+/size)`,
		`sys/kernel/iommu_groups/[0-9]+/type`,
		`sys/module/nvme_core/parameters/multipath`,
		`sys/module/(amdgpu|efa|ib_core|ib_uverbs|mlx5_core|mlx5_ib|nvidia|nvidia_fs|nvidia_peermem|nvidia_uvm)/initstate`,
		`sys/module/nvidia/version`,
		`opt/microsoft/[^/]+/topo\.xml`,
		`opt/amazon/(ofi-nccl|aws-ofi-nccl)/share/aws-ofi-nccl/xml/[^/]+\.xml`,
		`usr/local/gib/scripts/set_nccl_env\.sh`,
	}
	return regexp.MustCompile(`^(` + strings.Join(alts, "|") + `)$`)
}()

func TestSnapshotOfH200Capture(t *testing.T) {
	tgz, err := os.Open(h200Capture)
	if err != nil {
		t.Skipf("real capture not available: %v", err)
	}
	defer tgz.Close()
	src := t.TempDir()
	if err := Extract(tgz, src); err != nil {
		t.Fatalf("Extract %s: %v", h200Capture, err)
	}

	out := filepath.Join(t.TempDir(), "snap")
	rep, err := WriteDir(Options{Root: src}, out)
	if err != nil {
		t.Fatalf("WriteDir: %v", err)
	}
	if len(rep.Warnings) != 0 {
		t.Errorf("warnings: %q", rep.Warnings)
	}
	t.Logf("report: %d files, %d links, %d dirs, skipped %v", rep.Files, rep.Links, rep.Dirs, rep.Skipped)

	source, got := walkTree(t, src), walkTree(t, out)
	var matched int
	for p, v := range source {
		if v == "d" || !allowlistOracle.MatchString(p) {
			continue
		}
		matched++
		if got[p] != v {
			t.Errorf("%s: snapshot has %.60q, capture %.60q", p, got[p], v)
		}
	}
	for p, v := range got {
		if v != "d" && !allowlistOracle.MatchString(p) {
			t.Errorf("%s: in the snapshot but not allowlisted", p)
		}
	}
	// The capture's shape, so that a silently empty walk cannot pass:
	// 7 PCI functions, 4 netdevs, 16 CPUs, 1 node, 1 GPU in /proc.
	for _, p := range []string{
		"sys/bus/pci/devices/0000:00:06.0",
		"sys/devices/pci0000:00/0000:00:06.0/driver",
		"sys/devices/pci0000:00/0000:00:06.0/local_cpulist",
		"sys/devices/virtual/net/lo/address",
		"sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device",
		"sys/devices/system/cpu/cpu15/topology/core_cpus_list",
		"sys/devices/system/node/node0/distance",
		"proc/self/status",
		"proc/driver/nvidia/gpus/0000:00:06.0/information",
	} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s: missing from the snapshot", p)
		}
	}
	// The virtio netdev's device link resolves: its target folder exists.
	if got["sys/devices/pci0000:00/0000:00:03.0/virtio2"] != "d" {
		t.Errorf("virtio2: want the folder eth0's device link points at")
	}
	if got["sys/bus/pci/drivers/nvidia"] != "d" {
		t.Errorf("sys/bus/pci/drivers/nvidia: want the (empty) driver folder the GPU's driver link needs")
	}
	if matched < 500 {
		t.Errorf("only %d allowlisted paths in the capture; the oracle or Extract is broken", matched)
	}
}
