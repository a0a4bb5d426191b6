package discover

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// /proc/devices as a GB200 node with IMEX shows it (the major varies per
// node: the IMEX guide reads it with grep from this file).
const gbProcDevices = "Character devices:\n  1 mem\n195 nvidia\n234 nvidia-caps-imex-channels\n511 nvidia-uvm\n\nBlock devices:\n259 blkext\n"

func TestReadIMEX(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"proc/devices": gbProcDevices,
		// Replayed nodes ("c MAJOR:MINOR"): channel0 is the driver's,
		// channel1 was made in an earlier boot with another major, channel2
		// is not a node's description, channelx and channel07 are not
		// channel names.
		"dev/nvidia-caps-imex-channels/channel0":  "c 234:0\n",
		"dev/nvidia-caps-imex-channels/channel1":  "c 237:1\n",
		"dev/nvidia-caps-imex-channels/channel2":  "garbage\n",
		"dev/nvidia-caps-imex-channels/channelx":  "c 234:9\n",
		"dev/nvidia-caps-imex-channels/channel07": "c 234:7\n",
		"etc/nvidia-imex/config.cfg":              "# comment\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\nSERVER_PORT=50000\n",
		"etc/nvidia-imex/nodes_config.cfg":        "10.0.0.1\n10.0.0.2\n# spare\n\n10.0.0.3\n",
	})
	// A FIFO where a node should be is not opened.
	if err := syscall.Mkfifo(filepath.Join(dir, "dev/nvidia-caps-imex-channels/channel3"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := rootfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var warns []error
	im := readIMEX(root, func(e ...error) { warns = append(warns, e...) })
	if len(warns) > 0 {
		t.Errorf("warnings: %v", warns)
	}
	if im.DeviceMajor == nil || *im.DeviceMajor != 234 {
		t.Errorf("DeviceMajor = %v, want 234", im.DeviceMajor)
	}
	want := []struct {
		n       int
		problem string
	}{{0, ""}, {1, "major 237, but the driver's nvidia-caps-imex-channels major is 234"}, {2, "is not \"c MAJOR:MINOR\""}, {3, "not a character device"}}
	if len(im.Channels) != len(want) {
		t.Fatalf("Channels = %+v", im.Channels)
	}
	for i, w := range want {
		c := im.Channels[i]
		if c.Number != w.n || c.Path != "/dev/nvidia-caps-imex-channels/channel"+strconv.Itoa(w.n) ||
			(w.problem == "") != (c.Problem == "") || !strings.Contains(c.Problem, w.problem) {
			t.Errorf("channel %d = %+v, want problem %q", w.n, c, w.problem)
		}
	}
	three, port := 3, 50000
	if d := cmp.Diff(&topology.IMEXConfig{Path: "/etc/nvidia-imex/config.cfg", NodesConfig: "/etc/nvidia-imex/nodes_config.cfg",
		Nodes: &three, ServerPort: &port}, im.Config); d != "" {
		t.Errorf("Config (-want +got):\n%s", d)
	}
}

// No IMEX at all: no major, no channels, no config, no warnings. The
// driver's major without nodes is the state after every reboot.
func TestReadIMEXAbsent(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"proc/devices": "Character devices:\n195 nvidia\n\nBlock devices:\n234 nvidia-caps-imex-channels\n"})
	root, err := rootfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var warns []error
	im := readIMEX(root, func(e ...error) { warns = append(warns, e...) })
	// A block device of the name is not the character device.
	if im.DeviceMajor != nil || len(im.Channels) != 0 || im.Config != nil || len(warns) != 0 {
		t.Errorf("readIMEX = %+v, warnings %v", im, warns)
	}
	// A config naming a node list that is missing warns, naming the config.
	writeFiles(t, dir, map[string]string{"etc/nvidia-imex/config.cfg": "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/gone.cfg\n"})
	im = readIMEX(root, func(e ...error) { warns = append(warns, e...) })
	if im.Config == nil || im.Config.Nodes != nil || len(warns) != 1 || !strings.Contains(warns[0].Error(), "config.cfg") {
		t.Errorf("missing node list: %+v, warnings %v", im.Config, warns)
	}
}
