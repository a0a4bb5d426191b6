package exporter

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// storageFamilies are the storage collector's families.
var storageFamilies = []string{
	"gpuaffinity_storage_nvme_info",
	"gpuaffinity_storage_nvme_pcie_link_generation", "gpuaffinity_storage_nvme_pcie_link_max_generation",
	"gpuaffinity_storage_nvme_pcie_link_width", "gpuaffinity_storage_nvme_pcie_link_max_width",
	"gpuaffinity_storage_nvme_pair_info", "gpuaffinity_storage_nic_pair_info",
	"gpuaffinity_storage_gds_nvidia_fs_loaded", "gpuaffinity_storage_gds_p2pdma_supported",
	"gpuaffinity_storage_iommu_info", "gpuaffinity_storage_mount_info", "gpuaffinity_storage_mount_nics",
}

func intp(i int) *int { return &i }

// storageNode is a two-GPU node written for these tests: two U.2 data
// drives (nvme1's link trained down to 8 GT/s x2), an M.2 boot drive
// whose serial is not UTF-8 and whose link sysfs does not report, an
// NVMe/TCP controller, GPU 0 with its drive on its PCIe switch and two
// storage NICs a NUMA node away, GPU 1 with its drive two switches away
// and no storage NIC; nvidia-fs not loaded but P2PDMA supported, IOMMU in
// passthrough; a local XFS, a Lustre mount over both storage NICs, and an
// NFS mount mounted over by a second one.
func storageNode() *topology.Node {
	gen4x4 := topology.PCILink{Speed: "16.0 GT/s PCIe", Width: 4, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 4}
	return &topology.Node{
		Hostname: "node-a",
		GPUs: []topology.GPU{
			{Index: 0, BusID: "0000:1b:00.0", UUID: "GPU-00000000-0000-0000-0000-000000000000", Model: "NVIDIA H100 80GB HBM3"},
			{Index: 1, BusID: "0000:43:00.0", UUID: "GPU-11111111-1111-1111-1111-111111111111", Model: "NVIDIA H100 80GB HBM3"},
		},
		Storage: topology.Storage{
			NVMe: []topology.NVMe{
				{Name: "nvme0", BusID: "0000:1d:00.0", Transport: "pcie", Model: "SAMSUNG MZWLR3T8HBLS-00007", Serial: "S6EUNA0R500123",
					Firmware: "MPK7525Q", State: "live", NUMANode: intp(0), Link: gen4x4, Use: topology.NVMeData},
				{Name: "nvme1", BusID: "0000:45:00.0", Transport: "pcie", Model: "SAMSUNG MZWLR3T8HBLS-00007", Serial: "S6EUNA0R500124",
					Firmware: "MPK7525Q", State: "live", NUMANode: intp(0),
					Link: topology.PCILink{Speed: "8.0 GT/s PCIe", Width: 2, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 4}, Use: topology.NVMeData},
				{Name: "nvme2", BusID: "0000:c1:00.0", Transport: "pcie", Model: "SAMSUNG MZ1L21T9HCLS-00A07  ", Serial: "S665\xffX",
					Firmware: "GDC7302Q", State: "live", NUMANode: intp(1), Use: topology.NVMeSystem},
				{Name: "nvme3", Transport: "tcp", Model: "Linux", Serial: "4a1b2c", Firmware: "6.8.0", State: "connecting", Use: topology.NVMeOther},
			},
			Pairs: []topology.StoragePair{
				{GPU: 0, NVMe: []string{"nvme0"}, NVMeClass: topology.ClassPIX, NICs: []string{"mlx5_1", "mlx5_2"}, NICClass: topology.ClassNODE},
				{GPU: 1, NVMe: []string{"nvme1"}, NVMeClass: topology.ClassPXB, NICs: []string{}, NICClass: topology.ClassUnknown},
			},
			GDS: topology.GDS{P2PDMA: topology.P2PDMA{Supported: true, Missing: []string{}},
				IOMMU: topology.IOMMU{Mode: topology.IOMMUPassthrough}},
			Mounts: []topology.Mount{
				{Source: "/dev/md0", Target: "/raid", FSType: "xfs", Kind: topology.MountNVMe, Devices: []string{"nvme0", "nvme1"}, NICs: []string{}},
				{Source: "10.0.0.1@o2ib:/lustre", Target: "/mnt/lustre", FSType: "lustre", Kind: topology.MountLustre, NICs: []string{"mlx5_1", "mlx5_2"}},
				{Source: "10.0.9.9:/old", Target: "/mnt/nfs", FSType: "nfs4", Kind: topology.MountNFS, NICs: []string{}},
				{Source: "10.0.0.2:/ckpt", Target: "/mnt/nfs", FSType: "nfs4", Kind: topology.MountNFS, NICs: []string{"mlx5_1"}},
			},
		},
	}
}

// storageExporter serves node with the storage collector alone.
func storageExporter(t *testing.T, node *topology.Node) *Exporter {
	t.Helper()
	return newExporter(t, t.TempDir(), node, nil, func(o *Options) {
		o.Hostname = "node-a"
		o.Collectors = map[string]bool{CollectorNVML: false, CollectorNVLink: false, CollectorRDMA: false, CollectorTopology: false}
	})
}

// The storage series of storageNode, written from its description: NVMe
// info for all four controllers (the boot drive's model without its
// padding, its serial's odd byte as U+FFFD, the NVMe/TCP controller with
// no bus id or NUMA node), PCIe links only where sysfs gave them, one
// pair per GPU and nearest device (GPU 1 has no storage NIC, so no NIC
// pair), the GDS state, and each mount target once (the NFS mount on top,
// with its one NIC; the local XFS has no NIC count).
func TestStorageExposition(t *testing.T) {
	// The text format lists labels sorted by name: the GPU's join labels
	// around the pair's own.
	const (
		gpu0 = `Hostname="node-a",UUID="GPU-00000000-0000-0000-0000-000000000000",`
		end0 = `,gpu="0",model_name="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:1B:00.0"`
		gpu1 = `Hostname="node-a",UUID="GPU-11111111-1111-1111-1111-111111111111",`
		end1 = `,gpu="1",model_name="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:43:00.0"`
	)
	want := `
# HELP gpuaffinity_storage_gds_nvidia_fs_loaded 1 when the nvidia-fs driver (GPUDirect Storage) is loaded.
# TYPE gpuaffinity_storage_gds_nvidia_fs_loaded gauge
gpuaffinity_storage_gds_nvidia_fs_loaded 0
# HELP gpuaffinity_storage_gds_p2pdma_supported 1 when GPUDirect Storage's P2PDMA mode can run on the node.
# TYPE gpuaffinity_storage_gds_p2pdma_supported gauge
gpuaffinity_storage_gds_p2pdma_supported 1
# HELP gpuaffinity_storage_iommu_info 1; mode is how the IOMMU treats GPU and storage DMA: off, passthrough, translated or unknown.
# TYPE gpuaffinity_storage_iommu_info gauge
gpuaffinity_storage_iommu_info{mode="passthrough"} 1
# HELP gpuaffinity_storage_mount_info 1 per mounted file system GPUDirect Storage can serve.
# TYPE gpuaffinity_storage_mount_info gauge
gpuaffinity_storage_mount_info{fstype="lustre",kind="lustre",target="/mnt/lustre"} 1
gpuaffinity_storage_mount_info{fstype="nfs4",kind="nfs",target="/mnt/nfs"} 1
gpuaffinity_storage_mount_info{fstype="xfs",kind="nvme",target="/raid"} 1
# HELP gpuaffinity_storage_mount_nics NICs that carry the network mount's traffic.
# TYPE gpuaffinity_storage_mount_nics gauge
gpuaffinity_storage_mount_nics{target="/mnt/lustre"} 2
gpuaffinity_storage_mount_nics{target="/mnt/nfs"} 1
# HELP gpuaffinity_storage_nic_pair_info 1 per GPU and each of its nearest storage NICs (class PIX, PXB, PHB, NODE, SYS).
# TYPE gpuaffinity_storage_nic_pair_info gauge
gpuaffinity_storage_nic_pair_info{` + gpu0 + `class="NODE",gpu="0",model_name="NVIDIA H100 80GB HBM3",nic="mlx5_1",pci_bus_id="00000000:1B:00.0"} 1
gpuaffinity_storage_nic_pair_info{` + gpu0 + `class="NODE",gpu="0",model_name="NVIDIA H100 80GB HBM3",nic="mlx5_2",pci_bus_id="00000000:1B:00.0"} 1
# HELP gpuaffinity_storage_nvme_info 1 per NVMe controller; device, firmware_revision, model, serial and state as node_exporter's node_nvme_info has them.
# TYPE gpuaffinity_storage_nvme_info gauge
gpuaffinity_storage_nvme_info{bus_id="0000:1d:00.0",device="nvme0",firmware_revision="MPK7525Q",model="SAMSUNG MZWLR3T8HBLS-00007",numa_node="0",serial="S6EUNA0R500123",state="live",transport="pcie",use="data"} 1
gpuaffinity_storage_nvme_info{bus_id="0000:45:00.0",device="nvme1",firmware_revision="MPK7525Q",model="SAMSUNG MZWLR3T8HBLS-00007",numa_node="0",serial="S6EUNA0R500124",state="live",transport="pcie",use="data"} 1
gpuaffinity_storage_nvme_info{bus_id="0000:c1:00.0",device="nvme2",firmware_revision="GDC7302Q",model="SAMSUNG MZ1L21T9HCLS-00A07",numa_node="1",serial="S665` + "\uFFFD" + `X",state="live",transport="pcie",use="system"} 1
gpuaffinity_storage_nvme_info{bus_id="",device="nvme3",firmware_revision="6.8.0",model="Linux",numa_node="",serial="4a1b2c",state="connecting",transport="tcp",use="other"} 1
# HELP gpuaffinity_storage_nvme_pair_info 1 per GPU and each of its nearest NVMe controllers (class PIX, PXB, PHB, NODE, SYS).
# TYPE gpuaffinity_storage_nvme_pair_info gauge
gpuaffinity_storage_nvme_pair_info{` + gpu0 + `class="PIX",device="nvme0"` + end0 + `} 1
gpuaffinity_storage_nvme_pair_info{` + gpu1 + `class="PXB",device="nvme1"` + end1 + `} 1
# HELP gpuaffinity_storage_nvme_pcie_link_generation Current PCIe generation of the NVMe controller's link.
# TYPE gpuaffinity_storage_nvme_pcie_link_generation gauge
gpuaffinity_storage_nvme_pcie_link_generation{device="nvme0"} 4
gpuaffinity_storage_nvme_pcie_link_generation{device="nvme1"} 3
# HELP gpuaffinity_storage_nvme_pcie_link_max_generation Maximum PCIe generation of the NVMe controller's link.
# TYPE gpuaffinity_storage_nvme_pcie_link_max_generation gauge
gpuaffinity_storage_nvme_pcie_link_max_generation{device="nvme0"} 4
gpuaffinity_storage_nvme_pcie_link_max_generation{device="nvme1"} 4
# HELP gpuaffinity_storage_nvme_pcie_link_max_width Maximum PCIe lanes of the NVMe controller's link.
# TYPE gpuaffinity_storage_nvme_pcie_link_max_width gauge
gpuaffinity_storage_nvme_pcie_link_max_width{device="nvme0"} 4
gpuaffinity_storage_nvme_pcie_link_max_width{device="nvme1"} 4
# HELP gpuaffinity_storage_nvme_pcie_link_width Current PCIe lanes of the NVMe controller's link.
# TYPE gpuaffinity_storage_nvme_pcie_link_width gauge
gpuaffinity_storage_nvme_pcie_link_width{device="nvme0"} 4
gpuaffinity_storage_nvme_pcie_link_width{device="nvme1"} 2
`
	e := storageExporter(t, storageNode())
	if err := testutil.GatherAndCompare(e.Gatherer(), strings.NewReader(want), storageFamilies...); err != nil {
		t.Error(err)
	}
	r := scrapeOK(t, e.Handler())
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "storage")); v != 1 {
		t.Errorf("storage collector success = %g, want 1", v)
	}
}

// A node without NVMe, mounts or storage NICs (a GPU node before the
// storage layer is set up, or one discovered without it) has the three
// node series only; an IOMMU mode the discovery left empty reads unknown.
func TestStorageNone(t *testing.T) {
	n := &topology.Node{GPUs: []topology.GPU{{Index: 0, BusID: "0000:1b:00.0"}},
		Storage: topology.Storage{GDS: topology.GDS{NvidiaFS: true},
			Pairs: []topology.StoragePair{{GPU: 0, NVMe: []string{}, NICs: []string{}}}}}
	want := `
# HELP gpuaffinity_storage_gds_nvidia_fs_loaded 1 when the nvidia-fs driver (GPUDirect Storage) is loaded.
# TYPE gpuaffinity_storage_gds_nvidia_fs_loaded gauge
gpuaffinity_storage_gds_nvidia_fs_loaded 1
# HELP gpuaffinity_storage_gds_p2pdma_supported 1 when GPUDirect Storage's P2PDMA mode can run on the node.
# TYPE gpuaffinity_storage_gds_p2pdma_supported gauge
gpuaffinity_storage_gds_p2pdma_supported 0
# HELP gpuaffinity_storage_iommu_info 1; mode is how the IOMMU treats GPU and storage DMA: off, passthrough, translated or unknown.
# TYPE gpuaffinity_storage_iommu_info gauge
gpuaffinity_storage_iommu_info{mode="unknown"} 1
`
	e := storageExporter(t, n)
	if err := testutil.GatherAndCompare(e.Gatherer(), strings.NewReader(want), storageFamilies...); err != nil {
		t.Error(err)
	}
}

// Before the first discovery the storage collector fails and sends none
// of its series, as the topology collector does.
func TestStorageNoDiscovery(t *testing.T) {
	e := newExporter(t, t.TempDir(), nil, nil, func(o *Options) {
		o.Collectors = map[string]bool{CollectorNVML: false, CollectorNVLink: false, CollectorRDMA: false, CollectorTopology: false}
	})
	r := scrapeOK(t, e.Handler())
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", "storage")); v != 0 {
		t.Errorf("storage collector success = %g before a discovery, want 0", v)
	}
	for _, f := range storageFamilies {
		if r.mfs[f] != nil {
			t.Errorf("%s before a discovery", f)
		}
	}
}

// The storage series are rendered once per State.Node: a second
// collection of one node builds no metric, and another node is rendered
// anew.
func TestStorageOncePerNode(t *testing.T) {
	a := storageNode()
	c := &discoveryCollector{labels: &gpuLabelCache{host: "node-a"}, render: collectStorage}
	run := func(n *topology.Node) []prometheus.Metric {
		var s sink
		if err := c.collect(t.Context(), &State{Node: n}, &s); err != nil {
			t.Fatal(err)
		}
		return s.ms
	}
	first := run(a)
	// 4 info, 2×4 link, 2 NVMe pairs, 2 NIC pairs, 3 node, 3 mounts, 2 NIC counts.
	if len(first) != 24 {
		t.Fatalf("%d storage series of storageNode, want 24", len(first))
	}
	again := run(a)
	for i := range first {
		if first[i] != again[i] {
			t.Fatalf("series %d rendered again for the same node", i)
		}
	}
	b := storageNode()
	b.Storage.GDS.NvidiaFS = true
	other := run(b)
	if len(other) != len(first) || other[0] == first[0] {
		t.Error("another node's series not rendered anew")
	}
}

// dgx-h100 (internal/testutil/fakesys/testdata/machines/dgx-h100.yaml): 10 NVMe
// controllers, the two M.2 boot drives nvme0 (0000:06:00.0) and nvme1 on
// CPU 0 and one U.2 drive in each GPU's PCIe switch (nvme2…nvme9 for GPUs
// 0…7, PIX), no mount table (every drive unmounted), storage NICs
// mlx5_1/2 on CPU 0 and mlx5_7/8 on CPU 1 on root ports of their own
// (NODE to the GPUs of their socket). The values are the spec's.
func TestStorageDGXH100(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	r := scrapeOK(t, newExporter(t, root, node, replay(t, root)).Handler())
	r.expect(t, []wantSample{
		{"gpuaffinity_scrape_collector_success", l("collector", "storage"), 1},
		// FORMAT.md's nvme defaults: the serial from the bus id (two hex
		// digits each of bus, device, function), firmware
		// EPK9GB5Q, a 16.0 GT/s x4 link.
		{"gpuaffinity_storage_nvme_info", l("device", "nvme0", "bus_id", "0000:06:00.0", "model", "SAMSUNG MZ1L21T9HCLS-00A07",
			"serial", "S4YPNA0T060000", "firmware_revision", "EPK9GB5Q", "transport", "pcie", "numa_node", "0", "use", "unmounted"), 1},
		{"gpuaffinity_storage_nvme_pcie_link_generation", l("device", "nvme0"), 4},
		{"gpuaffinity_storage_nvme_pcie_link_width", l("device", "nvme0"), 4},
	})
	if n := len(r.find("gpuaffinity_storage_nvme_info", nil)); n != 10 {
		t.Errorf("%d nvme_info series, want 10", n)
	}
	if n := len(r.find("gpuaffinity_storage_mount_info", nil)); n != 0 {
		t.Errorf("%d mount_info series without a mount table", n)
	}
	for gpu := range 8 {
		g := itoa(gpu)
		ms := r.find("gpuaffinity_storage_nvme_pair_info", l("gpu", g))
		if len(ms) != 1 || labelsOf(ms[0])["device"] != "nvme"+itoa(gpu+2) || labelsOf(ms[0])["class"] != "PIX" {
			t.Errorf("GPU %d: NVMe pairs %v, want nvme%d at PIX", gpu, ms, gpu+2)
		}
		nics := []string{"mlx5_1", "mlx5_2"}
		if gpu >= 4 {
			nics = []string{"mlx5_7", "mlx5_8"}
		}
		for _, nic := range nics {
			r.expect(t, []wantSample{{"gpuaffinity_storage_nic_pair_info", l("gpu", g, "nic", nic, "class", "NODE"), 1}})
		}
		if n := len(r.find("gpuaffinity_storage_nic_pair_info", l("gpu", g))); n != 2 {
			t.Errorf("GPU %d: %d storage NIC pairs, want 2", gpu, n)
		}
	}
}

// The storage checks' verdicts are health_check_failed's like any
// check's: 1 for a fail, 0 for a warn (a profile that downgrades storage
// fails) or a pass.
func TestStorageCheckVerdicts(t *testing.T) {
	rep := &health.Report{Time: time.Now(), Results: []health.Result{
		{ID: "storage.gds", Verdict: health.Fail},
		{ID: "storage.ports", Verdict: health.Warn},
		{ID: "storage.iommu", Verdict: health.Pass},
	}}
	e := newExporter(t, t.TempDir(), storageNode(), nil, func(o *Options) {
		o.State = func() State { return State{Node: storageNode(), Health: rep} }
	})
	scrapeOK(t, e.Handler()).expect(t, []wantSample{
		{"gpuaffinity_health_check_failed", l("check", "storage.gds"), 1},
		{"gpuaffinity_health_check_failed", l("check", "storage.ports"), 0},
		{"gpuaffinity_health_check_failed", l("check", "storage.iommu"), 0},
	})
}
