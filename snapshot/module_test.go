package snapshot

import (
	"testing"
)

// A kernel module of the list is kept as its folder alone (a built-in
// module has parameters but no initstate), its initstate copied where
// there is one; its other files and other modules are not copied.
func TestModuleFolders(t *testing.T) {
	f := newFakeRoot(t)
	f.write("sys/module/ib_core/parameters/recv_queue_size", "512", 0o444)
	f.write("sys/module/nvidia_peermem/initstate", "live", 0o444)
	f.write("sys/module/nvidia_peermem/refcnt", "0", 0o444)
	f.write("sys/module/nvidia_peermem/parameters/peerdirect_support", "0", 0o444)
	f.write("sys/module/snd_hda/initstate", "live", 0o444)
	_, got, _ := snapshotWithFaults(t, Options{Root: f.dir})
	for p, want := range map[string]string{
		"sys/module/ib_core":                  "d",
		"sys/module/nvidia_peermem":           "d",
		"sys/module/nvidia_peermem/initstate": "f:live",
	} {
		if got[p] != want {
			t.Errorf("%s = %q, want %q", p, got[p], want)
		}
	}
	for _, p := range []string{
		"sys/module/ib_core/parameters", "sys/module/nvidia_peermem/refcnt",
		"sys/module/nvidia_peermem/parameters", "sys/module/snd_hda",
	} {
		if _, ok := got[p]; ok {
			t.Errorf("%s copied", p)
		}
	}
}
