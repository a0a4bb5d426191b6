package discover

import "testing"

// BenchmarkDiscover measures in-process discovery of a built fixture root
// (the root is built once, outside the timer): the DGX H100 (8 GPUs, 14
// NICs, 224 CPUs) and the p5 (8 GPUs, 32 EFA + ENA, 192 CPUs).
func BenchmarkDiscover(b *testing.B) {
	for _, name := range []string{"dgx-h100", "aws-p5"} {
		b.Run(name, func(b *testing.B) {
			root := sharedRoot(b, name)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Discover(Options{Root: root}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
