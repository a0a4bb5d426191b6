package rdma

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

func TestReadAddresses(t *testing.T) {
	m := rootfs.NewMemory("t")
	m.File(AddressesFile, []byte(`{"schema": "gpuaffinity.addresses/v1", "interfaces": {
  "ibp41s0f0": ["10.10.1.5/16", "10.20.1.5/24"],
  "eth9": ["fe80::1/64", "300.1.1.1/8", "10.0.0.1"]}}`))
	got, errs := ReadAddresses(m.Root())
	if !slices.Equal(got["ibp41s0f0"], []string{"10.10.1.5/16", "10.20.1.5/24"}) || len(got["eth9"]) != 0 {
		t.Errorf("addresses = %v", got)
	}
	if len(errs) != 3 {
		t.Fatalf("errs = %v, want 3 (IPv6, bad octet, no prefix)", errs)
	}
	for _, e := range errs {
		if !strings.Contains(e.Error(), `"eth9"`) || !strings.Contains(e.Error(), AddressesFile) {
			t.Errorf("error %q names neither interface nor file", e)
		}
	}

	for _, bad := range []string{`{"schema": "other/v1", "interfaces": {}}`, `not json`} {
		m := rootfs.NewMemory("t")
		m.File(AddressesFile, []byte(bad))
		if got, errs := ReadAddresses(m.Root()); got != nil || len(errs) != 1 {
			t.Errorf("%q: %v %v", bad, got, errs)
		}
	}
	if got, errs := ReadAddresses(rootfs.NewMemory("t").Root()); got != nil || errs != nil {
		t.Errorf("no file: %v %v", got, errs)
	}
}
