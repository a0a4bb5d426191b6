package nccl

import (
	"fmt"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/fakesys"
)

func TestEnvDump(t *testing.T) {
	for _, m := range fakesys.Machines() {
		n, err := discover.Discover(discover.Options{Root: fakesys.Root(t, m)})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("== %s %+v route=%q allowed=%s numa=%d\n", m, n.Platform, n.DefaultRouteInterface, n.CPU.Allowed, len(n.NUMANodes))
		for _, g := range n.GPUs {
			nn := -1
			if g.NUMANode != nil { nn = *g.NUMANode }
			fmt.Printf("  gpu %d %s numa=%d local=%s nvml=%s\n", g.Index, g.UUID, nn, g.LocalCPUs, g.NVMLCPUAffinity)
		}
		for _, c := range n.NICs {
			fmt.Printf("  nic %s rdma=%q %v fab=%s role=%s ports=%v ifs=%v\n", c.Name, c.RDMADevice, c.Netdevs, c.Fabric, c.Role, len(c.Ports), c.Interfaces)
		}
		for _, p := range n.Pairs { fmt.Printf("  pair %d %v\n", p.GPU, p.NICs) }
	}
}
