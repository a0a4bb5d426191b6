package fakesystest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
)

// GrowthMachine is one size step of the cost-growth benchmarks.
type GrowthMachine struct {
	Name            string
	Spec            fakesys.Spec
	GPUs, NICs, VFs int // GPU functions, NIC physical functions, VFs
}

// Devices is the step's size: GPU functions, NIC physical functions and
// SR-IOV VFs (bridges, CPUs and NUMA nodes are not counted).
func (m GrowthMachine) Devices() int { return m.GPUs + m.NICs + m.VFs }

// GrowthMachines are the size steps, from the DGX H100 (8 GPUs, 14 NIC
// functions: 8 compute, 4 storage ports, 2 10GbE) and the AWS p5 (8
// GPUs, 32 EFA and 1 ENA):
//
//	gpu1-nic14       DGX H100 without GPUs 1-7
//	gpu8-nic14       DGX H100 as it is
//	gpu16-nic14      DGX H100 with a second tray's 8 GPU switches (domain 0001, GPUs 8-15, no NICs or drives)
//	gpu8-nic0        DGX H100 without any NIC
//	gpu8-nic8        DGX H100 with its 8 compute NICs only
//	gpu8-nic33-p5    AWS p5 as it is (another machine: EFA, 192 CPUs)
//	gpu8-nic14-vf64  DGX H100 with 64 VFs of mlx5_0 (PF 0000:18:00.0), each with a netdev and an RDMA device
//
// A bridge left without children by a removal is removed too, and so is
// a host bridge left without devices. The NVML part of nvml.json follows
// the GPU functions (Build lists the GPUs the spec has), so the GPU
// indexes stay 0..n-1.
func GrowthMachines(tb testing.TB) []GrowthMachine {
	tb.Helper()
	machine := func(name string) fakesys.Spec {
		s, err := fakesys.Machine(name)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	var out []GrowthMachine
	add := func(name string, s fakesys.Spec) {
		s.Name = "growth-" + name
		if err := s.Validate(); err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		m := GrowthMachine{Name: name, Spec: s}
		for _, f := range s.Functions() {
			switch {
			case f.Kind == fakesys.KindGPU:
				m.GPUs++
			case f.Kind == fakesys.KindNIC && f.Device.PhysFn != "":
				m.VFs++
			case f.Kind == fakesys.KindNIC:
				m.NICs++
			}
		}
		out = append(out, m)
	}

	s := machine("dgx-h100")
	s.PCI = growthPrune(s.PCI, func(d *fakesys.Device) bool { return d.GPU != nil && d.GPU.Index > 0 })
	add("gpu1-nic14", s)

	add("gpu8-nic14", machine("dgx-h100"))

	s = machine("dgx-h100")
	// The second tray's GPUs alone: its NICs and NVMe drives would repeat
	// the first tray's names (mlx5_N, nvmeN), which a machine has once.
	tray := growthPrune(machine("dgx-h100").PCI, func(d *fakesys.Device) bool {
		return d.Kind == fakesys.KindNIC || d.Kind == fakesys.KindNVMe
	})
	for i := range tray {
		tray[i].HostBridge = strings.Replace(tray[i].HostBridge, "0000:", "0001:", 1)
		growthWalk(tray[i].Devices, func(d *fakesys.Device) {
			d.BDF = strings.Replace(d.BDF, "0000:", "0001:", 1)
			if d.GPU != nil {
				d.GPU.Index += 8
				d.GPU.UUID = fmt.Sprintf("GPU-dgxh100-0001-0000-0000-%012d", d.GPU.Index)
			}
		})
	}
	s.PCI = append(s.PCI, tray...)
	add("gpu16-nic14", s)

	s = machine("dgx-h100")
	s.PCI = growthPrune(s.PCI, func(d *fakesys.Device) bool { return d.Kind == fakesys.KindNIC })
	s.DefaultRoute = "" // its interface is gone
	add("gpu8-nic0", s)

	s = machine("dgx-h100")
	compute := map[string]bool{}
	for _, p := range s.Expect.Pairs {
		for _, n := range p.NICs {
			compute[n] = true
		}
	}
	s.PCI = growthPrune(s.PCI, func(d *fakesys.Device) bool {
		return d.Kind == fakesys.KindNIC && (d.RDMA == nil || !compute[d.RDMA.Name])
	})
	s.DefaultRoute = ""
	add("gpu8-nic8", s)

	add("gpu8-nic33-p5", machine("aws-p5"))

	s = machine("dgx-h100")
	pf := "0000:18:00.0"
	found := false
	for i := range s.PCI {
		growthWalk(s.PCI[i].Devices, func(d *fakesys.Device) {
			for _, c := range d.Children {
				if c.BDF == pf {
					found = true
					d.Children = append(d.Children, growthVFs(pf, 64)...)
					return
				}
			}
		})
	}
	if !found {
		tb.Fatalf("dgx-h100 has no function %s", pf)
	}
	add("gpu8-nic14-vf64", s)
	return out
}

// growthVFs are n SR-IOV VFs of the ConnectX-7 PF pf (mlx5_0, ibp24s0 of
// the DGX H100), on the PF's bus at functions 1..n (ARI numbering: dev
// k/8, fn k%8), each bound to mlx5_core with an InfiniBand netdev and an
// RDMA device, as VFs used on the host are.
func growthVFs(pf string, n int) []fakesys.Device {
	bus := pf[:len("0000:18")]
	vfs := make([]fakesys.Device, 0, n)
	speed := 400000
	for k := 1; k <= n; k++ {
		vfs = append(vfs, fakesys.Device{
			BDF:     fmt.Sprintf("%s:%02x.%x", bus, k/8, k%8),
			Kind:    fakesys.KindNIC,
			Device:  "0x101e", // ConnectX VF
			Virtual: true,
			PhysFn:  pf,
			Netdevs: []fakesys.Netdev{{Name: fmt.Sprintf("ibp24s0v%d", k-1), Type: 32, Speed: &speed}},
			RDMA: &fakesys.RDMA{
				Name:  fmt.Sprintf("mlx5_%d", 11+k),
				Ports: []fakesys.Port{{Port: 1, Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand"}},
			},
		})
	}
	return vfs
}

// growthPrune returns host bridges without the functions drop selects,
// and without the bridges (and host bridges) that are left empty.
func growthPrune(hbs []fakesys.HostBridge, drop func(*fakesys.Device) bool) []fakesys.HostBridge {
	var prune func([]fakesys.Device) []fakesys.Device
	prune = func(devs []fakesys.Device) []fakesys.Device {
		var out []fakesys.Device
		for _, d := range devs {
			if drop(&d) {
				continue
			}
			if len(d.Children) > 0 {
				if d.Children = prune(d.Children); len(d.Children) == 0 {
					continue
				}
			}
			out = append(out, d)
		}
		return out
	}
	var out []fakesys.HostBridge
	for _, hb := range hbs {
		if hb.Devices = prune(hb.Devices); len(hb.Devices) > 0 {
			out = append(out, hb)
		}
	}
	return out
}

// growthWalk calls f on every function of devs, parents first.
func growthWalk(devs []fakesys.Device, f func(*fakesys.Device)) {
	for i := range devs {
		f(&devs[i])
		growthWalk(devs[i].Children, f)
	}
}
