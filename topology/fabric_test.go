package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func u32(v uint32) *uint32 { return &v }
func iptr(v int) *int      { return &v }

// The health mask decoded by hand from nvml.h's shifts and widths.
func TestFabricHealth(t *testing.T) {
	// degraded_bw TRUE (1<<0), route_recovery FALSE (2<<2), route_unhealthy
	// FALSE (2<<4), access_timeout_recovery not supported (0),
	// incorrect_configuration INSUFFICIENT_NVLINKS (5<<8),
	// partition_assigned FALSE (2<<12), gfm_state CONNECTED (1<<14).
	f := &GPUFabric{State: FabricCompleted, Status: iptr(0), HealthMask: u32(1 | 2<<2 | 2<<4 | 5<<8 | 2<<12 | 1<<14)}
	want := []FabricField{
		{Name: "degraded_bw", Value: "true", Bad: true},
		{Name: "route_recovery", Value: "false"},
		{Name: "route_unhealthy", Value: "false"},
		{Name: "access_timeout_recovery", Value: "not_supported"},
		{Name: "incorrect_configuration", Value: "insufficient_nvlinks", Bad: true},
		{Name: "partition_assigned", Value: "false", Bad: true},
		{Name: "gfm_state", Value: "connected"},
	}
	if d := cmp.Diff(want, f.Health()); d != "" {
		t.Errorf("Health (-want +got):\n%s", d)
	}
	// A value nvml.h does not define is named, and bad.
	if h := (&GPUFabric{HealthMask: u32(12 << 8)}).Health(); h[4].Value != "unknown_12" || !h[4].Bad {
		t.Errorf("incorrect_configuration 12 = %+v", h[4])
	}
	if (&GPUFabric{}).Health() != nil || (*GPUFabric)(nil).Health() != nil {
		t.Error("Health without a mask is not nil")
	}
}

func TestFabricReadyAndClique(t *testing.T) {
	uuid := "9277d399-0674-44a9-b64e-d85bb19ce2b0"
	for _, tc := range []struct {
		f      *GPUFabric
		ready  bool
		clique string
	}{
		{&GPUFabric{State: FabricCompleted, Status: iptr(0), ClusterUUID: uuid, CliqueID: 32766}, true, uuid + ".32766"},
		{&GPUFabric{State: FabricCompleted, Status: iptr(999), ClusterUUID: uuid, CliqueID: 1}, false, uuid + ".1"},
		{&GPUFabric{State: FabricInProgress, ClusterUUID: uuid}, false, uuid + ".0"},
		{&GPUFabric{State: FabricCompleted, Status: iptr(0)}, false, ""}, // single-node NVSwitch
		{nil, false, ""},
	} {
		if got := tc.f.Ready(); got != tc.ready {
			t.Errorf("%+v Ready = %v", tc.f, got)
		}
		if got := tc.f.Clique(); got != tc.clique {
			t.Errorf("%+v Clique = %q, want %q", tc.f, got, tc.clique)
		}
	}
}

func TestLinkFabric(t *testing.T) {
	a, b := "9277d399-0674-44a9-b64e-d85bb19ce2b0", "11111111-0674-44a9-b64e-d85bb19ce2b0"
	done := func(uuid string, clique uint32) *GPUFabric {
		return &GPUFabric{State: FabricCompleted, Status: iptr(0), ClusterUUID: uuid, CliqueID: clique}
	}
	n := Node{GPUs: []GPU{
		{Index: 0, Fabric: done(a, 7)}, {Index: 1, Fabric: done(a, 7)},
		{Index: 2, Fabric: done(b, 3)}, {Index: 3, Fabric: &GPUFabric{State: FabricInProgress, ClusterUUID: a}},
		{Index: 4},
		// Completed with an error (ERROR_INSUFFICIENT_RESOURCES): in no domain.
		{Index: 5, Fabric: &GPUFabric{State: FabricCompleted, Status: iptr(23)}},
	}}
	n.linkFabric()
	want := NVLinkFabric{MultiNode: true, IMEX: IMEX{Channels: []IMEXChannel{}}, Domains: []NVLinkDomain{
		{ClusterUUID: b, CliqueID: 3, GPUs: []int{2}},
		{ClusterUUID: a, CliqueID: 7, GPUs: []int{0, 1}},
	}}
	if d := cmp.Diff(want, n.NVLinkFabric); d != "" {
		t.Errorf("NVLinkFabric (-want +got):\n%s", d)
	}
	// Single-node NVSwitch: one domain without a UUID, not multi-node.
	n = Node{GPUs: []GPU{{Index: 0, Fabric: done("", 0)}, {Index: 1, Fabric: done("", 0)}}}
	n.linkFabric()
	if f := n.NVLinkFabric; f.MultiNode || len(f.Domains) != 1 || len(f.Domains[0].GPUs) != 2 {
		t.Errorf("single-node fabric = %+v", f)
	}
}

func TestUsableChannels(t *testing.T) {
	im := IMEX{Channels: []IMEXChannel{{Number: 0}, {Number: 1, Problem: "not a character device"}, {Number: 5}}}
	if d := cmp.Diff([]int{0, 5}, im.UsableChannels()); d != "" {
		t.Errorf("UsableChannels (-want +got):\n%s", d)
	}
}
