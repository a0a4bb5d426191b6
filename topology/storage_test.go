package topology

import (
	"slices"
	"strings"
	"testing"
)

func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"5.15.0-1042-nvidia", "6.2", true},
		{"6.2", "6.2", false},
		{"6.8.0-1015-aws", "6.2", false},
		{"6.10", "6.2", false},
		{"550.54.15", "565.47", true},
		{"565.57.01", "565.47", false},
		{"565.47", "565.47.1", true},
	} {
		if got := versionLess(tc.a, tc.b); got != tc.want {
			t.Errorf("versionLess(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

func TestDecideP2PDMA(t *testing.T) {
	yes, no := true, false
	ready := func() Node {
		return Node{
			NVML:    NVMLInfo{CUDAVersion: 12080},
			Driver:  DriverInfo{Version: "570.86.15"},
			Kernel:  KernelInfo{Release: "6.8.0-51-generic"},
			GPUs:    []GPU{{Index: 0, Device: "0x2330"}},
			Storage: Storage{GDS: GDS{OpenKernelModule: &yes, NVMeMultipath: &no}},
		}
	}
	n := ready()
	if p := decideP2PDMA(&n); !p.Supported || len(p.Missing) != 0 {
		t.Errorf("ready node: %+v", p)
	}
	n.Storage.GDS.NVMeMultipath = nil // nvme_core without the parameter
	if p := decideP2PDMA(&n); !p.Supported {
		t.Errorf("unknown multipath: %+v", p)
	}
	n = ready()
	n.NVML.CUDAVersion = 12040
	n.Driver.Version = "550.54.15"
	n.Kernel.Release = "5.15.0-1042-nvidia"
	n.GPUs = append(n.GPUs, GPU{Index: 1, Device: "0x1db6"})
	n.Storage.GDS.OpenKernelModule = &no
	n.Storage.GDS.NVMeMultipath = &yes
	p := decideP2PDMA(&n)
	if p.Supported {
		t.Fatal("supported with nothing met")
	}
	for _, want := range []string{"CUDA driver 12.4 < 12.8", "proprietary", "550.54.15 < 565.47", "kernel 5.15.0-1042-nvidia < 6.2", "GPU 1 (device 0x1db6)", "multipath"} {
		if !slices.ContainsFunc(p.Missing, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("missing %v lacks %q", p.Missing, want)
		}
	}
	if p := decideP2PDMA(&Node{}); p.Supported || len(p.Missing) < 3 {
		t.Errorf("empty node: %+v", p)
	}
}

func TestIOMMUMode(t *testing.T) {
	for _, tc := range []struct {
		m    IOMMU
		want IOMMUMode
	}{
		{IOMMU{}, IOMMUOff},
		{IOMMU{Units: []string{"dmar0"}, Groups: []IOMMUGroup{{"0000:1b:00.0", "identity"}}}, IOMMUPassthrough},
		{IOMMU{Units: []string{"dmar0"}, Groups: []IOMMUGroup{{"0000:19:00.0", "DMA-FQ"}, {"0000:1b:00.0", "identity"}}}, IOMMUTranslated},
		{IOMMU{Units: []string{"dmar0"}}, IOMMUUnknown},
		{IOMMU{Units: []string{"dmar0"}, Groups: []IOMMUGroup{{"0000:1b:00.0", "unknown"}}}, IOMMUUnknown},
	} {
		if got := iommuMode(tc.m); got != tc.want {
			t.Errorf("iommuMode(%+v) = %s, want %s", tc.m, got, tc.want)
		}
	}
}

func TestClassifyMount(t *testing.T) {
	for _, tc := range []struct {
		fstype string
		opts   []string
		nvme   bool
		kind   MountKind
		ok     bool
	}{
		{"xfs", nil, true, MountNVMe, true},
		{"ext4", nil, false, MountNVMe, false}, // ext4 on a SATA disk or a loop device
		{"nfs4", []string{"vers=4.2", "proto=rdma"}, false, MountNFS, true},
		{"nfs", []string{"proto=tcp"}, false, MountNFSTCP, true},
		{"lustre", nil, false, MountLustre, true},
		{"wekafs", nil, false, MountWeka, true},
		{"gpfs", nil, false, MountGPFS, true},
		{"beegfs", nil, false, MountBeeGFS, true},
		{"tmpfs", nil, false, "", false},
		{"overlay", nil, true, "", false},
	} {
		k, ok := ClassifyMount(tc.fstype, tc.opts, tc.nvme)
		if ok != tc.ok || (ok && k != tc.kind) {
			t.Errorf("ClassifyMount(%s, %v, %v) = %s %v", tc.fstype, tc.opts, tc.nvme, k, ok)
		}
	}
	if MountNFSTCP.CuFileFS() != "" || MountWeka.CuFileFS() != "weka" || MountNVMe.Network() {
		t.Error("kind helpers")
	}
}

func TestMountServers(t *testing.T) {
	if got := MountServers(MountLustre, "100.69.252.1@o2ib,100.69.252.2@o2ib:100.69.252.3@o2ib:/scratch", nil); !slices.Equal(got, []string{"100.69.252.1", "100.69.252.2", "100.69.252.3"}) {
		t.Errorf("lustre servers = %v", got)
	}
	if got := MountServers(MountNFS, "10.0.0.9:/x", []string{"proto=rdma", "addr=10.0.0.9", "clientaddr=10.0.0.1"}); !slices.Equal(got, []string{"10.0.0.9"}) {
		t.Errorf("nfs servers = %v", got)
	}
	if got := MountServers(MountNFS, "[fe80::1]:/x", []string{"addr=fe80::1"}); len(got) != 0 {
		t.Errorf("IPv6 server = %v", got)
	}
}

func TestMountNICs(t *testing.T) {
	nic := func(name string, role Role, fabric Fabric, netdev, ip string) NIC {
		return NIC{Name: name, Role: role, Roles: []Role{role}, Fabric: fabric, Netdevs: []string{netdev},
			Interfaces: []Interface{{Name: netdev, IPv4: []string{ip}}}}
	}
	n := &Node{NICs: []NIC{
		nic("mlx5_0", RoleCompute, FabricInfiniBand, "ibp24s0", "10.50.0.5/16"),
		nic("mlx5_1", RoleStorage, FabricInfiniBand, "ibp41s0f0", "10.200.1.21/16"),
		nic("mlx5_2", RoleStorage, FabricRoCE, "enp41s0f1np1", "10.100.1.21/16"),
		nic("eth0", RoleFrontend, FabricEthernet, "eth0", "192.168.1.5/24"),
	}}
	c := &roleCtx{n: n}
	storage := []int{1, 2}
	for _, tc := range []struct {
		m       Mount
		want    []string
		reason  string
		warning string
	}{
		{Mount{Kind: MountNFS, Options: []string{"clientaddr=10.100.1.21"}}, []string{"mlx5_2"}, "clientaddr", ""},
		{Mount{Kind: MountLustre, Servers: []string{"10.200.0.1"}}, []string{"mlx5_1"}, "subnet", ""},
		{Mount{Kind: MountWeka, Options: []string{"net=ibp41s0f0"}}, []string{"mlx5_1"}, "net=", ""},
		{Mount{Kind: MountGPFS}, []string{"mlx5_1", "mlx5_2"}, "every RDMA storage NIC", ""},
		// Storage reached over the compute fabric: listed, and warned of.
		{Mount{Kind: MountLustre, Target: "/scratch", Servers: []string{"10.50.0.1"}}, []string{"mlx5_0"}, "no storage NIC", "mlx5_0, a compute NIC"},
		{Mount{Kind: MountNVMe}, []string{}, "", ""},
	} {
		m := tc.m
		warns := c.mountNICs(&m, storage)
		if !slices.Equal(m.NICs, tc.want) || !strings.Contains(m.NICsReason, tc.reason) {
			t.Errorf("%+v: NICs %v (%s), want %v (%s)", tc.m, m.NICs, m.NICsReason, tc.want, tc.reason)
		}
		if tc.warning == "" && len(warns) > 0 || tc.warning != "" && (len(warns) != 1 || !strings.Contains(warns[0], tc.warning)) {
			t.Errorf("%+v: warnings %v, want %q", tc.m, warns, tc.warning)
		}
	}
	// No storage NIC and nothing named: a warning, no NICs.
	c = &roleCtx{n: &Node{NICs: n.NICs[:1]}}
	m := Mount{Kind: MountBeeGFS, Target: "/beegfs", FSType: "beegfs"}
	if warns := c.mountNICs(&m, nil); len(m.NICs) != 0 || len(warns) != 1 || !strings.Contains(warns[0], "/beegfs") {
		t.Errorf("unreachable mount: %v %v", m.NICs, warns)
	}
}
