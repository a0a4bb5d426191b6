package nvml

import (
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// TestReturnNamesOwned fails when NVML's return names are spelt out a
// second time outside this package (health once kept its own table of
// 32): every report must name a return through ReturnName. It looks for
// a name only a whole table holds.
func TestReturnNamesOwned(t *testing.T) {
	const marker = `"ERROR_INSUFFICIENT_POWER"`
	if ReturnName(8) != "ERROR_INSUFFICIENT_POWER" || ReturnName(0) != "SUCCESS" || ReturnName(4242) != "RETURN_4242" {
		t.Fatalf("ReturnName: %q %q %q", ReturnName(8), ReturnName(0), ReturnName(4242))
	}
	srcfiles.Product(t, "..", func(p, text string) {
		if strings.Contains(text, marker) {
			t.Errorf("%s spells out NVML's return names: use nvml.ReturnName", p)
		}
	}, "nvml")
}
