package main

import (
	"fmt"
	"strconv"
)

// machine is one kind of node of the synthetic fleet: what the agent
// discovers on it and exports, copied from the embedded example machine
// of the same name (internal/testutil/fakesys testdata/machines/<demo>.yaml, as
// `gpuaffinity topo --demo <demo> -o json` shows it). machines_test.go
// checks every copy against a discovery of its example.
type machine struct {
	demo     string // the example machine
	short    string // the name the setup line gives it
	model    string // placement's model: DMI's instance type or product name, GCP's machine type
	gpuModel string // every GPU's model
	cloud    string // platform's cloud
	gpus     []gpuSlot
	nics     []nicSpec
	class    string // the class of every GPU's pair
	imex     int    // the IMEX node list's length; 0: none installed
}

// gpuSlot is one GPU of a machine: where it sits and its compute NICs.
type gpuSlot struct {
	bus  string   // sysfs form, "0000:1b:00.0"
	numa int      // its NUMA node (gpu_info's numa_node)
	nics []string // its pair's RDMA devices
}

// nicSpec is one RDMA device (one port) of a machine, as rdma_info has it.
type nicSpec struct {
	dev, netdev, bus, fabric, role, firmware, linkLayer string
}

// The machines the fleet is made of.
var (
	gb200 = &machine{
		demo: "gb200-nvl72-tray", short: "GB200 NVL72 tray", model: "GB200 NVL", gpuModel: "NVIDIA GB200", cloud: "baremetal",
		gpus: []gpuSlot{
			{"0008:01:00.0", 0, []string{"mlx5_0"}}, {"0009:01:00.0", 0, []string{"mlx5_1"}},
			{"0018:01:00.0", 1, []string{"mlx5_4"}}, {"0019:01:00.0", 1, []string{"mlx5_5"}},
		},
		nics: []nicSpec{
			{"mlx5_0", "ibp3s0", "0000:03:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_1", "ibP2p3s0", "0002:03:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_2", "enP6p3s0f0np0", "0006:03:00.0", "roce", "frontend", "32.43.1014", "Ethernet"},
			{"mlx5_3", "enP6p3s0f1np1", "0006:03:00.1", "roce", "frontend", "32.43.1014", "Ethernet"},
			{"mlx5_4", "ibP16p3s0", "0010:03:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_5", "ibP18p3s0", "0012:03:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_6", "enP22p3s0f0np0", "0016:03:00.0", "roce", "frontend", "32.43.1014", "Ethernet"},
			{"mlx5_7", "enP22p3s0f1np1", "0016:03:00.1", "roce", "frontend", "32.43.1014", "Ethernet"},
		},
		class: "NODE", imex: 18,
	}
	// The DGX H100's 8 compute ConnectX-7 and its 2 dual-port storage
	// adapters (4 RDMA devices, one port InfiniBand and one Ethernet).
	dgxH100 = &machine{
		demo: "dgx-h100", short: "DGX H100", model: "DGXH100", gpuModel: "NVIDIA H100 80GB HBM3", cloud: "baremetal",
		gpus: []gpuSlot{
			{"0000:1b:00.0", 0, []string{"mlx5_0"}}, {"0000:43:00.0", 0, []string{"mlx5_3"}},
			{"0000:52:00.0", 0, []string{"mlx5_4"}}, {"0000:61:00.0", 0, []string{"mlx5_5"}},
			{"0000:9d:00.0", 1, []string{"mlx5_6"}}, {"0000:c3:00.0", 1, []string{"mlx5_9"}},
			{"0000:d1:00.0", 1, []string{"mlx5_10"}}, {"0000:df:00.0", 1, []string{"mlx5_11"}},
		},
		nics: []nicSpec{
			{"mlx5_0", "ibp24s0", "0000:18:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_1", "ibp41s0f0", "0000:29:00.0", "infiniband", "storage", fwIB, "InfiniBand"},
			{"mlx5_2", "enp41s0f1np1", "0000:29:00.1", "roce", "storage", fwIB, "Ethernet"},
			{"mlx5_3", "ibp64s0", "0000:40:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_4", "ibp79s0", "0000:4f:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_5", "ibp94s0", "0000:5e:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_6", "ibp154s0", "0000:9a:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_7", "ibp170s0f0", "0000:aa:00.0", "infiniband", "storage", fwIB, "InfiniBand"},
			{"mlx5_8", "enp170s0f1np1", "0000:aa:00.1", "roce", "storage", fwIB, "Ethernet"},
			{"mlx5_9", "ibp192s0", "0000:c0:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_10", "ibp206s0", "0000:ce:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
			{"mlx5_11", "ibp220s0", "0000:dc:00.0", "infiniband", "compute", fwIB, "InfiniBand"},
		},
		class: "PIX",
	}
	awsP5 = &machine{
		demo: "aws-p5", short: "AWS p5.48xlarge", model: "p5.48xlarge", gpuModel: "NVIDIA H100 80GB HBM3", cloud: "aws",
		class: "PIX",
	}
	gcpA3Ultra = &machine{
		demo: "gcp-a3-ultragpu", short: "GCP a3-ultragpu-8g", model: "a3-ultragpu-8g", gpuModel: "NVIDIA H200", cloud: "gcp",
		class: "PIX",
	}
	ociH100 = &machine{
		demo: "oci-bm-gpu-h100", short: "OCI BM.GPU.H100.8", model: "BM.GPU.H100.8", gpuModel: "NVIDIA H100 80GB HBM3", cloud: "oci",
		gpus: []gpuSlot{
			{"0000:0f:00.0", 0, []string{"mlx5_0", "mlx5_1"}}, {"0000:2d:00.0", 0, []string{"mlx5_3", "mlx5_4"}},
			{"0000:44:00.0", 0, []string{"mlx5_5", "mlx5_6"}}, {"0000:5b:00.0", 0, []string{"mlx5_7", "mlx5_8"}},
			{"0000:89:00.0", 1, []string{"mlx5_9", "mlx5_10"}}, {"0000:a8:00.0", 1, []string{"mlx5_12", "mlx5_13"}},
			{"0000:c0:00.0", 1, []string{"mlx5_14", "mlx5_15"}}, {"0000:d8:00.0", 1, []string{"mlx5_16", "mlx5_17"}},
		},
		class: "PXB",
	}
)

// fwIB is the firmware of the examples' ConnectX-7 (and EFA) devices.
const fwIB = "28.39.1002"

// machines is every kind, in the order the fleet is composed.
var machines = []*machine{gb200, dgxH100, awsP5, gcpA3Ultra, ociH100}

func init() {
	// p5.48xlarge: 8 GPUs, each with 4 EFA devices on its PCIe switch;
	// rdmap<bus>s0 sits at bus <bus> (decimal in the name, hex in the id).
	for i, b := range []int{0x53, 0x64, 0x75, 0x86, 0x97, 0xa8, 0xb9, 0xca} {
		g := gpuSlot{bus: fmt.Sprintf("0000:%02x:00.0", b), numa: i / 4}
		for k := range 4 {
			bus := b - 4 + k
			dev := "rdmap" + strconv.Itoa(bus) + "s0"
			g.nics = append(g.nics, dev)
			awsP5.nics = append(awsP5.nics, nicSpec{dev, "", fmt.Sprintf("0000:%02x:00.0", bus), "efa", "compute", fwIB, "Unknown"})
		}
		awsP5.gpus = append(awsP5.gpus, g)
	}
	// a3-ultragpu-8g: 8 H200, each with one RoCE NIC on its switch,
	// rocep<bus>s0 with netdev gpu<i>rdma0.
	for i, b := range []int{0x8f, 0x90, 0x96, 0x97, 0xc4, 0xc5, 0xcb, 0xcc} {
		nb := b + 2
		dev := "rocep" + strconv.Itoa(nb) + "s0"
		gcpA3Ultra.gpus = append(gcpA3Ultra.gpus, gpuSlot{fmt.Sprintf("0000:%02x:00.0", b), i / 4, []string{dev}})
		gcpA3Ultra.nics = append(gcpA3Ultra.nics, nicSpec{dev, fmt.Sprintf("gpu%drdma0", i), fmt.Sprintf("0000:%02x:00.0", nb), "roce", "compute", fwIB, "Ethernet"})
	}
	// BM.GPU.H100.8: 8 dual-port ConnectX-7 (16 RoCE compute ports, two
	// per GPU) and 2 frontend NICs.
	for i, b := range []int{0x0c, 0x2a, 0x41, 0x58, 0x86, 0xa5, 0xbd, 0xd5} {
		switch i { // the frontend NICs' bus numbers come between
		case 1:
			ociH100.nics = append(ociH100.nics, nicSpec{"mlx5_2", "eth0", "0000:17:00.0", "roce", "frontend", "22.39.1002", "Ethernet"})
		case 5:
			ociH100.nics = append(ociH100.nics, nicSpec{"mlx5_11", "eth1", "0000:98:00.0", "roce", "frontend", "22.39.1002", "Ethernet"})
		}
		for f := range 2 {
			dev := fmt.Sprintf("mlx5_%d", len(ociH100.nics))
			ociH100.nics = append(ociH100.nics, nicSpec{dev, fmt.Sprintf("enp%ds0f%dnp%d", b, f, f), fmt.Sprintf("0000:%02x:00.%d", b, f), "roce", "compute", fwIB, "Ethernet"})
		}
	}
}
