package fakesystest

import "testing"

// The growth steps are valid machines (GrowthMachines fails the test on
// one that is not) of the sizes their names say: make bench runs them,
// make test does not, so this is where a spec change that breaks one
// shows.
func TestGrowthMachines(t *testing.T) {
	want := map[string][3]int{ // GPUs, NICs, VFs, from the names and the doc comment
		"gpu1-nic14": {1, 14, 0}, "gpu8-nic14": {8, 14, 0}, "gpu16-nic14": {16, 14, 0},
		"gpu8-nic0": {8, 0, 0}, "gpu8-nic8": {8, 8, 0}, "gpu8-nic33-p5": {8, 33, 0}, "gpu8-nic14-vf64": {8, 14, 64},
	}
	ms := GrowthMachines(t)
	if len(ms) != len(want) {
		t.Errorf("%d growth machines, want %d", len(ms), len(want))
	}
	for _, m := range ms {
		if got := [3]int{m.GPUs, m.NICs, m.VFs}; got != want[m.Name] {
			t.Errorf("%s: GPUs, NICs, VFs %v, want %v", m.Name, got, want[m.Name])
		}
	}
}
