package exporter

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// nodeExporterBin is Debian's node_exporter (1.5.0 on bookworm), which
// `make test` installs.
const nodeExporterBin = "/usr/bin/prometheus-node-exporter"

// needBinary returns path when it is an executable; otherwise it fails the
// test in CI (testenv.InCI) and skips it elsewhere.
func needBinary(tb testing.TB, path string) string {
	tb.Helper()
	if p, err := exec.LookPath(path); err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not installed (scripts/install-deps.sh installs it)", path)
	if testenv.InCI() {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// startNodeExporter runs node_exporter with only its infiniband collector
// on root's sysfs and returns its /metrics URL once it answers. The
// process is killed in Cleanup.
func startNodeExporter(tb testing.TB, root string) string {
	tb.Helper()
	bin := needBinary(tb, nodeExporterBin)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin,
		"--path.sysfs="+filepath.Join(root, "sys"),
		"--collector.disable-defaults", "--collector.infiniband",
		"--web.disable-exporter-metrics",
		"--web.listen-address="+addr)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	url := "http://" + addr + "/metrics"
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			tb.Fatalf("node_exporter exited: %v\n%s", err, stderr.String())
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("node_exporter did not answer on %s: %v\n%s", url, err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// distinctCounters gives every counters/ file of every port of root a
// distinct nonzero value (some above 2^32), and gives one port the
// counters_ext/ files of kernels before 4.5. It returns the number of
// ports.
func distinctCounters(tb testing.TB, root string) int {
	tb.Helper()
	ports, err := filepath.Glob(filepath.Join(root, "sys/class/infiniband/*/ports/*"))
	if err != nil || len(ports) == 0 {
		tb.Fatalf("no RDMA ports under %s (%v)", root, err)
	}
	for k, p := range ports {
		files, err := os.ReadDir(filepath.Join(p, "counters"))
		if err != nil {
			tb.Fatal(err)
		}
		for j, f := range files {
			v := uint64(1000*(k+1) + j + 1)
			if strings.Contains(f.Name(), "_data") {
				v += 5_000_000_000 // 64-bit, and ×4 in bytes
			}
			writeFile(tb, filepath.Join(p, "counters", f.Name()), fmt.Sprintf("%d\n", v))
		}
	}
	// An iWARP-style answer both must skip.
	writeFile(tb, filepath.Join(ports[1], "counters", "port_xmit_wait"), "N/A (no PMA)\n")
	ext := filepath.Join(ports[0], "counters_ext")
	if err := os.MkdirAll(ext, 0o755); err != nil {
		tb.Fatal(err)
	}
	for j, f := range []string{"port_multicast_rcv_packets", "port_multicast_xmit_packets", "port_rcv_data_64",
		"port_rcv_packets_64", "port_unicast_rcv_packets", "port_unicast_xmit_packets", "port_xmit_data_64", "port_xmit_packets_64"} {
		writeFile(tb, filepath.Join(ext, f), fmt.Sprintf("%d\n", 7_000_000_000+j))
	}
	return len(ports)
}

// node_exporter's infiniband collector and ours read the same fake sysfs:
// every node_infiniband_* sample (but the info metric, whose labels
// differ) must have an equal gpuaffinity_rdma_* sample for the same device
// and port, and each shared metric has as many samples on both sides.
// dgx-h100's counters are 0, so the test gives them distinct values;
// dgx-h100-faults is compared as built (mlx5_4 has counts).
func TestNodeExporterCrossCheck(t *testing.T) {
	for _, c := range []struct {
		machine  string
		distinct bool
	}{{"dgx-h100", true}, {"dgx-h100-faults", false}} {
		t.Run(c.machine, func(t *testing.T) {
			root, node := fixture(t, c.machine)
			nports, extra, minNonzero := 12, 0, 12*3+5 // rate, state, phys_state; mlx5_4's 5 counts
			if c.distinct {
				nports = distinctCounters(t, root)
				extra = 8 - 1 // counters_ext on one port, one N/A file
				minNonzero = nports * 22
			}
			crossCheck(t, root, node, nports*25+extra, minNonzero)
		})
	}
}

func crossCheck(t *testing.T, root string, node *topology.Node, wantCompared, minNonzero int) {
	url := startNodeExporter(t, root)
	theirs := scrapeURL(t, url)
	ours := scrape(t, newExporter(t, root, node, replay(t, root)).Handler())
	if v := ours.must(t, "gpuaffinity_scrape_collector_success", l("collector", "rdma")); v != 1 {
		t.Fatalf("rdma collector success %g", v)
	}
	if v := theirs.must(t, "node_scrape_collector_success", l("collector", "infiniband")); v != 1 {
		t.Fatalf("node_exporter's infiniband collector failed on the fixture:\n%s", theirs.body)
	}
	compared, nonzero := 0, 0
	for _, name := range theirs.names("node_infiniband_") {
		if name == "node_infiniband_info" {
			continue
		}
		ourName := "gpuaffinity_rdma_" + strings.TrimPrefix(name, "node_infiniband_")
		if ours.mfs[ourName] == nil {
			t.Errorf("%s has no %s", name, ourName)
			continue
		}
		if got, want := ours.mfs[ourName].GetType(), theirs.mfs[name].GetType(); got != want {
			t.Errorf("%s is a %s, node_exporter's %s a %s", ourName, got, name, want)
		}
		for _, m := range theirs.mfs[name].GetMetric() {
			ls := labelsOf(m)
			want := sampleValue(m)
			got, ok := ours.value(t, ourName, l("device", ls["device"], "port", ls["port"]))
			switch {
			case !ok:
				t.Errorf("%s{device=%q,port=%q} = %g has no %s", name, ls["device"], ls["port"], want, ourName)
			case got != want:
				t.Errorf("%s{device=%q,port=%q} = %g, node_exporter says %g", ourName, ls["device"], ls["port"], got, want)
			}
			compared++
			if want != 0 {
				nonzero++
			}
		}
		// Nor do we have samples node_exporter has not (the N/A file).
		if got, want := len(ours.mfs[ourName].GetMetric()), len(theirs.mfs[name].GetMetric()); got != want {
			t.Errorf("%d %s samples, node_exporter has %d %s", got, ourName, want, name)
		}
	}
	// 3 gauges and 22 counters per port, plus the extras.
	if compared != wantCompared {
		t.Errorf("compared %d samples, want %d", compared, wantCompared)
	}
	if nonzero < minNonzero {
		t.Errorf("only %d nonzero samples compared, want at least %d", nonzero, minNonzero)
	}
	t.Logf("%d node_infiniband samples agree (%d nonzero)", compared, nonzero)
}
