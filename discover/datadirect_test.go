package discover

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Without the VPD (a reader that is not root: the vpd file is mode 0600),
// the GB300 tray's Data Direct functions cannot be told apart: two per
// Grace tie. They stay untied, the pairs fall back to the PFs' places
// (NODE, undecided, as nvidia-smi sees them), and a warning names every
// function and why; no pair is made up from bus order.
func TestDataDirectWithoutVPD(t *testing.T) {
	root := fakesystest.Root(t, "gb300-nvl72-tray")
	removeVPDs(t, root, nil)
	n := discoverRoot(t, root)
	for _, nic := range n.NICs {
		if nic.DataDirect != nil {
			t.Errorf("%s tied to %+v without VPD", nic.Name, nic.DataDirect)
		}
	}
	for _, p := range n.Pairs {
		if p.Class != topology.ClassNODE || p.Decided {
			t.Errorf("GPU %d: %v %s decided=%v, want NODE undecided", p.GPU, p.NICs, p.Class, p.Decided)
		}
	}
	var warn string
	for _, w := range n.Warnings {
		if strings.Contains(w, "Data Direct functions not tied") {
			warn = w
		}
	}
	for _, dma := range []string{"0008:03:00.0", "0009:03:00.0", "0018:03:00.0", "0019:03:00.0"} {
		if !strings.Contains(warn, dma) {
			t.Errorf("the warning does not name %s: %q", dma, warn)
		}
	}
	if !strings.Contains(warn, "/vpd: absent") || !strings.Contains(warn, "as root") {
		t.Errorf("the warning does not say why and what to do: %q", warn)
	}
}

// With one ConnectX-8 and one Data Direct function per Grace (the other
// complex's PF and DMA function not fitted), position ties them even
// without VPD, and the pair note says which signal decided.
func TestDataDirectByPosition(t *testing.T) {
	root := fakesystest.Root(t, "gb300-nvl72-tray")
	// Leave ConnectX-8 #1 (PF 0002:03:00.0, DMA 0008:03:00.0) and #3
	// (PF 0012:03:00.0, DMA 0018:03:00.0), one per Grace.
	removeVPDs(t, root, []string{"0000:03:00.0", "0009:03:00.0", "0010:03:00.0", "0019:03:00.0"})
	n := discoverRoot(t, root)
	tied := map[string]string{}
	for _, nic := range n.NICs {
		if nic.DataDirect != nil {
			tied[nic.Name] = nic.DataDirect.BusID + " " + nic.DataDirect.MatchedBy
		}
	}
	want := map[string]string{"ibP2p3s0": "0008:03:00.0 position", "ibP18p3s0": "0018:03:00.0 position"}
	if len(tied) != len(want) || tied["ibP2p3s0"] != want["ibP2p3s0"] || tied["ibP18p3s0"] != want["ibP18p3s0"] {
		t.Errorf("ties %v, want %v", tied, want)
	}
	// GPU 0 is beside DMA 0008:03:00.0: PXB to ibP2p3s0; GPU 1 reaches
	// the same NIC's DMA function across root ports: NODE.
	got := map[int]string{}
	for _, p := range n.Pairs {
		got[p.GPU] = strings.Join(p.NICs, ",") + " " + p.Class.String()
		if p.GPU == 0 && !strings.Contains(p.Note, "the only one and the only ConnectX-8 on the NUMA node") {
			t.Errorf("GPU 0 note does not say position decided: %q", p.Note)
		}
	}
	if got[0] != "ibP2p3s0 PXB" || got[1] != "ibP2p3s0 NODE" || got[2] != "ibP18p3s0 PXB" {
		t.Errorf("pairs %v", got)
	}
}

// removeVPDs deletes every vpd file under root and, for each bus id in
// gone, the function itself (its bus link and directory): a card not
// fitted.
func removeVPDs(t *testing.T, root string, gone []string) {
	t.Helper()
	devs := filepath.Join(root, "sys/bus/pci/devices")
	entries, err := os.ReadDir(devs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		dir, err := filepath.EvalSymlinks(filepath.Join(devs, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, "vpd")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if slices.Contains(gone, e.Name()) {
			for _, sub := range []string{"net", "infiniband"} {
				links, _ := os.ReadDir(filepath.Join(dir, sub))
				for _, l := range links {
					cls := map[string]string{"net": "sys/class/net", "infiniband": "sys/class/infiniband"}[sub]
					os.Remove(filepath.Join(root, cls, l.Name()))
				}
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(devs, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}
