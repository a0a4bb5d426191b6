package snapshot

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// IMEX channel nodes are recorded as "c MAJOR:MINOR" files, never opened;
// /proc/devices and the IMEX config are copied; other /dev entries are not
// read.
func TestSnapshotIMEX(t *testing.T) {
	f := newFakeRoot(t)
	f.file("proc/devices", "Character devices:\n195 nvidia\n234 nvidia-caps-imex-channels\n")
	f.file("etc/nvidia-imex/config.cfg", "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n")
	f.file("etc/nvidia-imex/nodes_config.cfg", "10.0.0.1\n")
	// A replayed node (a snapshot of a snapshot) is copied as it is.
	f.file("dev/nvidia-caps-imex-channels/channel1", "c 234:1\n")
	f.extra("dev/nvidia-caps-imex-channels/README", "not a channel\n")
	f.extra("dev/other", "never read\n")
	dev := filepath.Join(f.dir, "dev/nvidia-caps-imex-channels/channel0")
	mknod := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(234, 0)))
	_, got, _ := snapshotWithFaults(t, Options{Root: f.dir})
	for p, want := range f.want {
		if got[p] != "f:"+want {
			t.Errorf("%s = %q, want %q", p, got[p], want)
		}
	}
	for _, p := range []string{"dev/nvidia-caps-imex-channels/README", "dev/other"} {
		if v, ok := got[p]; ok {
			t.Errorf("%s in the snapshot: %q", p, v)
		}
	}
	if mknod != nil {
		t.Logf("mknod: %v; the character device case is not tested here", mknod)
		return
	}
	if got["dev/nvidia-caps-imex-channels/channel0"] != "f:c 234:0\n" {
		t.Errorf("channel0 = %q, want the node described as c 234:0", got["dev/nvidia-caps-imex-channels/channel0"])
	}
	if _, err := os.Stat(dev); err != nil {
		t.Fatal(err)
	}
}
