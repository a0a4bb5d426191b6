package discover

import (
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// BenchmarkDiscoverGrowth measures Discover on machines of growing size,
// derived in code from the embedded specs (fakesystest.GrowthMachines), each built on
// disk once outside the timer. Besides ns/op it reports the machine's
// device count and ns/device: ns/op divided by the devices, where a
// device is a GPU function, a NIC physical function or an SR-IOV VF
// (bridges, CPUs and NUMA nodes are not counted). docs/bench.md, "Cost
// growth", has the figures.
func BenchmarkDiscoverGrowth(b *testing.B) {
	for _, m := range fakesystest.GrowthMachines(b) {
		b.Run(m.Name, func(b *testing.B) {
			dir := b.TempDir()
			if err := fakesys.Build(m.Spec, dir); err != nil {
				b.Fatal(err)
			}
			// Discovery must see every device the variant has, or the
			// figure is not the one it claims to be.
			n, err := Discover(Options{Root: dir})
			if err != nil {
				b.Fatal(err)
			}
			if len(n.GPUs) != m.GPUs || len(n.NICs) != m.NICs+m.VFs {
				b.Fatalf("discovered %d GPUs and %d NICs, want %d and %d", len(n.GPUs), len(n.NICs), m.GPUs, m.NICs+m.VFs)
			}
			if len(n.Warnings) > 0 {
				b.Fatalf("discovery warns: %q", n.Warnings)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Discover(Options{Root: dir}); err != nil {
					b.Fatal(err)
				}
			}
			reportPerDevice(b, m.Devices())
		})
	}
}

// reportPerDevice reports the device count and ns/op divided by it.
func reportPerDevice(b *testing.B, devices int) {
	b.ReportMetric(float64(devices), "devices")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(devices), "ns/device")
}
